"""A page's data file (`<page>.yml` beside `<page>.md`): checks, questions people ask, glossary.

    checks:    {id: Check}                  see course.checks
    faq:       [{q: "...", a: "..."}]       answers may quote recorded values with {{ value(...) }}
    glossary:  {term: definition}           in the order written

The same keys may sit in the page's front matter instead; a key in both places is an error.
The FAQ is shown on the page and emitted as schema.org FAQPage JSON-LD, next to a LearningResource.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import PageError
from ..lab.keys import keys, mapping_at, problem_text
from ..lab.schema import suggest
from ..record import yamlfast
from .checks import Check

DATA_KEYS = ("checks", "faq", "glossary")


class FaqEntry(BaseModel):
    """One question people ask, with a short answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q: str
    """The question."""
    a: str
    """The answer (Markdown; macros allowed)."""


class PageData(BaseModel):
    """Everything a page declares besides its prose."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checks: dict[str, Check] = {}
    faq: list[FaqEntry] = []
    glossary: dict[str, str] = {}


def data_file(docs: Path, src: str) -> Path:
    """`docs/part-2/kv-cache.md` -> `docs/part-2/kv-cache.yml`."""
    return (docs / src).with_suffix(".yml")


def load_page_data(docs: Path, src: str, front: dict[str, Any]) -> PageData:
    """The page's checks, FAQ and glossary from its data file and front matter; PageError listing
    problems.
    """
    path = data_file(docs, src)
    merged = {k: front[k] for k in DATA_KEYS if k in front}
    shown = f"docs/{Path(src).with_suffix('.yml').as_posix()}"
    if path.is_file():
        try:
            loaded = yamlfast.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise PageError(f"{shown}: not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise PageError(f"{shown}: expected a mapping with {', '.join(DATA_KEYS)}")
        twice = sorted(set(loaded) & set(merged))
        if twice:
            raise PageError(
                f"{shown}: {', '.join(twice)} also given in docs/{src}'s front matter; keep one"
            )
        merged.update(loaded)
    try:
        return PageData.model_validate(merged)
    except ValidationError as exc:
        problems = [f"  - {data_problem(e)}" for e in exc.errors()]
        where = shown if path.is_file() else f"docs/{src} (front matter)"
        noun = "problem" if len(problems) == 1 else "problems"
        raise PageError(f"{where}: {len(problems)} {noun}:\n" + "\n".join(problems)) from None


def data_problem(error: Any) -> str:
    """One problem of a page's data as a sentence naming the check, question or term it is in:
    "check 'grows', option #2: text: required but missing"."""
    loc, index = list(error["loc"]), 0
    where: list[str] = []
    keys_path: list[str] = []
    named = {"checks": "check '{}'", "glossary": "glossary '{}'", "faq": "faq #{}"}
    while index < len(loc):
        key, following = loc[index], loc[index + 1] if index + 1 < len(loc) else None
        if key in named and following is not None and not keys_path:
            shown = following + 1 if isinstance(following, int) else following
            where.append(named[str(key)].format(shown))
            index += 2
        elif key == "options" and isinstance(following, int) and not keys_path:
            where.append(f"option #{following + 1}")
            index += 2
        else:
            keys_path.append(str(key))
            index += 1
    if error["type"] == "extra_forbidden":
        key = keys_path.pop()
        allowed = known_keys(loc[:-1])
        message = f"unknown key '{key}'{suggest(key, allowed)}; allowed here: {', '.join(allowed)}"
    else:
        message = problem_text(error)
    return ": ".join(x for x in (", ".join(where), ".".join(keys_path), message) if x)


def known_keys(loc: list[Any]) -> list[str]:
    """The keys the mapping at `loc` of a page's data takes, from the models."""
    found = mapping_at(loc, PageData)
    return keys(found.model) if found is not None else list(DATA_KEYS)


def slug(text: str) -> str:
    """An id fragment for a term."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "term"


def glossary_html(terms: list[tuple[str, str]]) -> str:
    """The glossary as a definition list; each term has an anchor `term-<slug>`."""
    rows = "".join(
        f'<div><dt id="term-{slug(term)}">{html.escape(term)}</dt><dd>{definition}</dd></div>'
        for term, definition in terms
    )
    return f'<dl class="course-glossary">{rows}</dl>'


def jsonld(
    name: str, description: str, minutes_iso: str, date: str | None, faq: list[tuple[str, str]]
) -> str:
    """schema.org LearningResource and, when there are questions, FAQPage, as one JSON-LD graph."""
    graph: list[dict[str, Any]] = [
        {
            "@type": "LearningResource",
            "name": name,
            "description": description,
            "learningResourceType": "lesson",
            "timeRequired": minutes_iso,
            **({"dateModified": date} if date else {}),
        }
    ]
    if faq:
        graph.append(
            {
                "@type": "FAQPage",
                "mainEntity": [
                    {
                        "@type": "Question",
                        "name": q,
                        "acceptedAnswer": {"@type": "Answer", "text": a},
                    }
                    for q, a in faq
                ],
            }
        )
    text = json.dumps(
        {"@context": "https://schema.org", "@graph": graph}, ensure_ascii=False, sort_keys=True
    )
    # inside <script>: no tag, comment or entity can start in it
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
