"""The pages of one build, whichever engine renders them, and what an engine calls around a page.

An engine's adapter (`mkdocs_adapter.py` for MkDocs' hooks and mkdocs-macros, `zensical_adapter.py`
for Zensical's macros module) opens a page's context when its macros start (`open_page`), runs
the registered macros against it, and hands the rendered Markdown to `after_macros` (the lesson
header, the way to the next lesson, the structured data). The problems every page found are
collected in `STATE`; once every page is rendered, the build stops with all of them (`report`).
Nothing here knows which engine runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cards import Card
from .context import PageContext, Problem
from .facts import prose_words
from .lessons import page_meta
from .outline import load_outline
from .render import finish, structured_data

LENIENT = "COURSE_LENIENT"
"""Set while `course serve` previews: the pages' problems are logged, not fatal."""
FIGURE_CACHE = Path(".cache") / "figures"
"""Where figures are kept between builds, under the project, when the build names no cache."""


@dataclass
class BuildState:
    """The pages of one build and the problems they found."""

    pages: dict[str, PageContext] = field(default_factory=dict)
    figure_cache: Path | None = None
    """Where figures are kept between builds; None: `.cache/figures/` of the project."""
    cards_cache: Path | None = None
    """Where social cards are kept between builds; None: `.cache/cards/` of the project."""
    root: Path | None = None
    """The project, for an engine whose configuration does not lie in it (Zensical's)."""
    site_dir: Path | None = None
    """Where that engine writes the site."""
    rendering: str | None = None
    """The page whose macros run now (Zensical makes its Jinja environment before it names the
    page)."""
    cards: dict[str, Card] = field(default_factory=dict)
    """Social cards to draw once the pages are written: path in the site -> card."""

    @property
    def problems(self) -> list[Problem]:
        """Every problem of every page, in page order."""
        return [p for ctx in self.pages.values() for p in ctx.problems]

    def start(self, root: Path | None = None, site_dir: Path | None = None) -> None:
        """Begin a build: no pages, no problems, no cards."""
        self.pages.clear()
        self.cards.clear()
        self.rendering = None
        self.root, self.site_dir = root, site_dir


STATE = BuildState()


def report(problems: list[Problem]) -> str:
    """All problems as one message, grouped by page."""
    pages = sorted({p.page for p in problems})
    noun = "problem" if len(problems) == 1 else "problems"
    lines = [f"{len(problems)} {noun} in {len(pages)} page{'s' if len(pages) != 1 else ''}:"]
    for page in pages:
        lines.append(f"{page}:")
        for p in problems:
            if p.page == page:  # a message of several lines (a data file's list) sits under it
                first, *rest = f"{p.call}: {p.message}".splitlines()
                lines += [f"  - {first}", *(f"    {line}" for line in rest)]
    return "\n".join(lines)


def open_page(
    root: Path,
    src: str,
    raw_meta: dict[str, Any],
    url: str,
    site_dir: Path,
    text: str | None,
) -> PageContext:
    """The context of page `src` (its path in docs/) of this build, made on its first call.

    `raw_meta` is its front matter, `url` its URL in the site, `text` its source (for lines).
    """
    ctx = STATE.pages.get(src)
    if ctx is None:
        outline = load_outline(root / "docs")
        ctx = PageContext(
            root=root,
            src=src,
            meta=page_meta(outline, src, raw_meta, text),
            raw_meta=raw_meta,
            url=url,
            site_dir=site_dir,
            figure_cache=STATE.figure_cache or root / FIGURE_CACHE,
        )
        STATE.pages[src] = ctx
    return ctx


def after_macros(ctx: PageContext, markdown: str) -> tuple[str, str]:
    """A page's Markdown once its macros ran, with the lesson header on top and the way to the
    next lesson at the end; and the page's JSON-LD ('' when it has none)."""
    words = prose_words(markdown)
    ctx.words = words
    finished = finish(ctx, markdown)
    return finished, structured_data(ctx, words)


def words_of(src: str) -> int | None:
    """The words of prose of a page of this build, once rendered (the landing's reading times)."""
    ctx = STATE.pages.get(src)
    return ctx.words if ctx is not None else None
