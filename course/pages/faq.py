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
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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
        problems = "\n".join(
            f"  - {'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        where = shown if path.is_file() else f"docs/{src} (front matter)"
        raise PageError(f"{where}: {len(exc.errors())} problem(s):\n{problems}") from None


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
    return text.replace("</", "<\\/")
