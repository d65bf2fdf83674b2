"""The lesson registry: which page of `docs/` teaches which lesson, read from front matter.

A lesson page's front matter:

    ---
    title: The KV cache
    lesson: kv-cache                      # lab/kv-cache/, build/kv-cache/
    run: 2026-11-29T101233Z-h200          # optional: pin a run (default: the newest good one)
    part: Part 2 · The maths of one request
    number: "2.4"
    summary: What a model keeps for every earlier token, and how much of the GPU it takes.
    outcomes: [...]                       # 3-5 things the reader can do afterwards
    read_first: ["[Tokens](../part-1/tokens.md)"]
    ---

Any other page may say `section: For authors` to be grouped under that heading in the navigation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import PageError

_FRONT = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.DOTALL)
_NUMBER = re.compile(r"\d+")


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
    read_first: list[str] = []
    """Pages to read first, as Markdown links."""
    section: str | None = None
    """For a page that is not a lesson: the navigation heading it sits under."""

    @field_validator("number", mode="before")
    @classmethod
    def _number_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A Markdown file's front matter (a mapping) and its body."""
    match = _FRONT.match(text)
    if not match:
        return {}, text
    data = yaml.safe_load(match.group(1) or "") or {}
    if not isinstance(data, dict):
        raise TypeError("front matter must be a mapping of keys to values")
    return data, text[match.end() :]


def read_meta(path: Path, shown: str) -> tuple[LessonMeta, dict[str, Any], str]:
    """A page's validated front matter, its raw mapping and its body; PageError naming the page."""
    try:
        raw, body = split_front_matter(path.read_text(encoding="utf-8"))
        return LessonMeta.model_validate(raw), raw, body
    except (yaml.YAMLError, ValueError, TypeError, ValidationError) as exc:
        raise PageError(f"{shown}: front matter: {exc}") from None


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
    """Every Markdown page under docs/, sorted by path, with its front matter."""
    pages = []
    for path in sorted(docs.rglob("*.md")):
        src = path.relative_to(docs).as_posix()
        meta, raw, _ = read_meta(path, f"docs/{src}")
        pages.append(PageEntry(src, meta, raw))
    return pages


def lesson_pages(docs: Path) -> list[PageEntry]:
    """The pages that teach a lesson (front matter `lesson:`), in course order."""
    return sorted((p for p in scan(docs) if p.meta.lesson), key=_order)


def _order(page: PageEntry) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    def numbers(text: str | None) -> tuple[int, ...]:
        return tuple(int(n) for n in _NUMBER.findall(text or "")) or (10**6,)

    return numbers(page.meta.part), numbers(page.meta.number), page.src


def navigation(docs: Path) -> list[Any]:
    """mkdocs `nav`: home, then each part with its lessons in order, then the other sections."""
    pages = scan(docs)
    nav: list[Any] = [{"Home": "index.md"}] if (docs / "index.md").is_file() else []
    parts: dict[str, list[Any]] = {}
    for page in sorted((p for p in pages if p.meta.lesson), key=_order):
        label = f"{page.meta.number} · {page.title}" if page.meta.number else page.title
        parts.setdefault(page.meta.part or "Lessons", []).append({label: page.src})
    nav.extend({part: entries} for part, entries in parts.items())
    sections: dict[str, list[Any]] = {}
    loose: list[Any] = []
    for page in pages:
        if page.meta.lesson or page.src == "index.md":
            continue
        (sections.setdefault(page.meta.section, []) if page.meta.section else loose).append(
            {page.title: page.src}
        )
    nav.extend(loose)
    nav.extend({name: entries} for name, entries in sections.items())
    return nav
