"""The page registry: which page of `docs/` teaches which lesson, and the site's navigation.

Where a lesson sits (its part, its number, its title) comes from the outline, `docs/course.yml`
(`outline.py`); a page's own facts come from its front matter:

    ---
    lesson: kv-cache                      # optional on a lesson page (the outline names it)
    run: 2026-11-29T101233Z-h200          # optional: pin a run (default: the newest good one)
    summary: What a model keeps for every earlier token, and how much of the GPU it takes.
    outcomes: [...]                       # 3-5 things the reader can do afterwards
    read_first: [prefill-decode]          # lesson ids (linked, or shown as coming) or topics
    headline: {value: size.bytes_per_token_8b, unit: KiB, label: per token for Qwen3-8B}
    ---

The learners' side of the site is the home page and the outline's lessons; every other page is on
the authors' side (`outline.AUTHORS`), which the learners' navigation, previous/next and search
never lead to. A page outside the outline that names a `lesson:` reads that lesson's records (a
page about an older run, say) and must say `section:` to be placed there on purpose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import PageError
from ..lab.keys import line_of, problem_text, unknown_key
from ..record import yamlfast
from .outline import AUTHORS, OUTLINE, Outline, load_outline, merged_meta

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.DOTALL)
_NUMBER = re.compile(r"\d+")


class Headline(BaseModel):
    """A lesson's headline number: a recorded value (or arithmetic on values) and what it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: str
    """The expression, as `value()` takes it: `size.bytes_per_token_8b`."""
    label: str
    """What the number is, in a few words: 'per token for Qwen3-8B'."""
    unit: str | None = None
    """The unit to show it in."""
    decimals: int | None = None
    """Decimal places (default as `value()`)."""


class LessonMeta(BaseModel):
    """The front matter keys this package reads; others (Material's, the author's) pass through."""

    model_config = ConfigDict(extra="allow", frozen=True)

    title: str | None = None
    """The page title (also the navigation entry)."""
    lesson: str | None = None
    """The lesson whose record the page reads: `lab/<lesson>/` and `build/<lesson>/`."""
    run: str | None = None
    """A run id to use instead of the newest good run."""
    part: str | None = None
    """The part of the course, e.g. 'Part 2 · The maths of one request'."""
    number: str | None = None
    """The lesson's number within the course, e.g. '2.4'."""
    summary: str | None = None
    """One sentence: what the reader will learn and measure."""
    outcomes: list[str] = []
    """What the reader will be able to do afterwards."""
    read_first: list[str | dict[str, str]] = []
    """What to read first: lesson ids (a link, or the lesson shown as coming), `id: why`, or
    topics in words."""
    section: str | None = None
    """For a page that is not a lesson: the heading of the authors' side it sits under."""
    headline: Headline | None = None
    """The number the lesson's social card shows."""

    @field_validator("number", mode="before")
    @classmethod
    def _number_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A Markdown file's front matter (a mapping) and its body."""
    match = _FRONT.match(text)
    if not match:
        return {}, text
    data = yamlfast.safe_load(match.group(1) or "") or {}
    if not isinstance(data, dict):
        raise TypeError("front matter must be a mapping of keys to values")
    return data, text[match.end() :]


def read_meta(path: Path, shown: str) -> tuple[LessonMeta, dict[str, Any], str]:
    """A page's validated front matter, its raw mapping and its body; PageError naming the page.

    The page's place in the course (lesson, title, part, number) is the outline's when the page
    lies in a docs/ folder that has one.
    """
    text = path.read_text(encoding="utf-8")
    try:
        raw, body = split_front_matter(text)
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise PageError(f"{shown}: front matter: {exc}") from None
    docs = _docs_of(path, shown)
    if docs is not None:
        return page_meta(load_outline(docs), shown.removeprefix("docs/"), raw, text), raw, body
    return _validated(raw, shown, text), raw, body


def _docs_of(path: Path, shown: str) -> Path | None:
    """The docs/ folder of a page named `docs/<src>`, when it has an outline."""
    if not shown.startswith("docs/"):
        return None
    docs = path
    for _ in shown.removeprefix("docs/").split("/"):
        docs = docs.parent
    return docs if (docs / OUTLINE).is_file() else None


def _validated(raw: dict[str, Any], shown: str, text: str | None = None) -> LessonMeta:
    try:
        return LessonMeta.model_validate(raw)
    except ValidationError as exc:
        match = _FRONT.match(text or "")
        node = yamlfast.compose(match.group(1) or "") if match else None
        found = sorted(  # in the order of the page's lines
            (line_of(node, e["loc"]) or 0, front_problem(e, node)) for e in exc.errors()
        )
        problems = [f"  - {problem}" for _, problem in found]
        noun = "problem" if len(problems) == 1 else "problems"
        raise PageError(
            f"{shown}: front matter: {len(problems)} {noun}:\n" + "\n".join(problems)
        ) from None


def front_problem(error: Any, node: yaml.Node | None) -> str:
    """One problem of a page's front matter as lab.yml's are told: the line in the page (the
    front matter starts on line 2), the key, what is wrong, and for an unknown key the close
    match and the keys allowed there."""
    loc = list(error["loc"])
    line = line_of(node, loc)
    where = f"line {line + 1}: " if line is not None else ""
    if error["type"] == "extra_forbidden":
        message = unknown_key(loc, LessonMeta)
    else:
        message = problem_text(error)
    return f"{where}{'.'.join(str(p) for p in loc)}: {message}"


def page_meta(
    outline: Outline, src: str, raw: dict[str, Any], text: str | None = None
) -> LessonMeta:
    """A page's front matter with its place in the outline; PageError naming the page when the
    front matter contradicts the outline, or, with each problem's line (from the page's `text`),
    the key and the keys allowed there, when it does not fit the schema.
    """
    merged, problems = merged_meta(outline, src, raw)
    if problems:
        raise PageError(f"docs/{src}: " + "; ".join(problems))
    return _validated(merged, f"docs/{src}", text)


def page_url(src: str) -> str:
    """The URL mkdocs gives a page with directory URLs: `part-2/kv-cache.md` ->
    `part-2/kv-cache/`.
    """
    stem = src.removesuffix(".md")
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[: -len("index")]
    return stem + "/"


@dataclass
class PageEntry:
    """One page of docs/ and what its front matter says."""

    src: str
    """Path inside docs/, with '/'."""
    meta: LessonMeta
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """The page's title: its front matter's, else its file name."""
        return self.meta.title or Path(self.src).stem.replace("-", " ").capitalize()

    @property
    def url(self) -> str:
        """The page's URL relative to the site root."""
        return page_url(self.src)


def scan(docs: Path) -> list[PageEntry]:
    """Every Markdown page under docs/, sorted by path, with its front matter and outline facts."""
    outline = load_outline(docs)
    pages = []
    for path in sorted(docs.rglob("*.md")):
        src = path.relative_to(docs).as_posix()
        text = path.read_text(encoding="utf-8")
        try:
            raw, _ = split_front_matter(text)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise PageError(f"docs/{src}: front matter: {exc}") from None
        pages.append(PageEntry(src, page_meta(outline, src, raw, text), raw))
    return pages


def lesson_pages(docs: Path) -> list[PageEntry]:
    """The pages that read a lesson's records, in course order: the outline's lessons first."""
    return sorted((p for p in scan(docs) if p.meta.lesson), key=_order)


def _order(page: PageEntry) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    def numbers(text: str | None) -> tuple[int, ...]:
        return tuple(int(n) for n in _NUMBER.findall(text or "")) or (10**6,)

    return numbers(page.meta.part), numbers(page.meta.number), page.src


def learners_pages(docs: Path) -> set[str]:
    """The pages of the learners' side: the home page, the outline's guides and its written
    lessons."""
    outline = load_outline(docs)
    return {"index.md", *outline.guides} | {lesson.src for lesson in outline.written}


def placement_problems(outline: Outline, pages: list[PageEntry]) -> list[tuple[str, str]]:
    """(page, problem) for each page the outline should place but does not, and each authors'
    page it names that is missing."""
    problems = []
    for page in pages:
        if page.meta.lesson and outline.by_page(page.src) is None and not page.meta.section:
            listed = next((x for x in outline.lessons if x.id == page.meta.lesson), None)
            where = (
                f"docs/{OUTLINE} lists lesson '{listed.id}' with the page docs/{listed.src}"
                if listed
                else f"docs/{OUTLINE} does not list lesson '{page.meta.lesson}'"
            )
            problems.append(
                (
                    f"docs/{page.src}",
                    f"names lesson '{page.meta.lesson}', but {where}: list it there, or give the "
                    "page a `section:` to place it on the authors' side",
                )
            )
    existing = {p.src for p in pages}
    problems += [
        (f"docs/{OUTLINE}", f"{side}: page docs/{src} does not exist")
        for side, listed in (("guides", outline.guides), ("authors", outline.authors))
        for src in listed
        if src not in existing
    ]
    return problems


def navigation(docs: Path) -> list[Any]:
    """mkdocs `nav`: the course (home, then each part with its written lessons in order), then
    the authors' side; PageError listing every page that is not where the outline says.
    """
    outline = load_outline(docs)
    pages = scan(docs)
    problems = placement_problems(outline, pages)
    if problems:
        raise PageError("\n".join(f"{page}: {problem}" for page, problem in problems))
    course: list[Any] = ["index.md"] if (docs / "index.md").is_file() else []
    by_src = {p.src: p for p in pages}
    course += [{by_src[src].title: src} for src in outline.guides if src in by_src]
    for part in outline.parts:
        entries = [{lesson.label: lesson.src} for lesson in part.lessons if lesson.written]
        if entries:
            course.append({part.label: entries})
    learners = learners_pages(docs)
    rest = [p for p in pages if p.src not in learners and p.src not in outline.authors]
    authors: list[Any] = [{by_src[src].title: src} for src in outline.authors]
    sections: dict[str, list[Any]] = {}
    for page in rest:
        section = page.meta.section if page.meta.section not in (None, AUTHORS) else None
        (sections.setdefault(section, []) if section else authors).append({page.title: page.src})
    authors.extend({name: entries} for name, entries in sections.items())
    nav: list[Any] = []
    if course:
        nav.append({"Course": course})
    if authors:
        nav.append({AUTHORS: authors})
    return nav
