"""The glue between mkdocs and the pages: the macros' `define_env`, and mkdocs hooks.

`macros/__init__.py` re-exports `define_env` and `on_post_page_macros`; `macros/hooks.py`
re-exports the mkdocs hooks. Problems found while rendering are collected in `STATE` and, once
every page has been rendered (`on_env`), the build stops with all of them; under `course serve`
(COURSE_LENIENT=1) they are logged and the marked page is served.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from .context import PageContext, Problem
from .deferred import defer_folded_code, write_blocks
from .facts import prose_words
from .lessons import navigation, page_meta
from .macros import MACROS
from .outline import load_outline
from .render import collecting_undefined, finish, structured_data

log = logging.getLogger("mkdocs.course")
LENIENT = "COURSE_LENIENT"
FIGURE_CACHE = Path(".cache") / "figures"


@dataclass
class BuildState:
    """The pages of one build and the problems they found."""

    pages: dict[str, PageContext] = field(default_factory=dict)
    figure_cache: Path | None = None
    """Where figures are kept between builds; None: `.cache/figures/` of the project."""
    cards_cache: Path | None = None
    """Where social cards are kept between builds; None: `.cache/cards/` of the project."""

    @property
    def problems(self) -> list[Problem]:
        """Every problem of every page, in page order."""
        return [p for ctx in self.pages.values() for p in ctx.problems]


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


def context_for(env: Any) -> PageContext:
    """The PageContext of the page mkdocs-macros is rendering now."""
    page = env.page
    src = page.file.src_uri
    ctx = STATE.pages.get(src)
    if ctx is None:
        config = env.conf
        root = Path(config.config_file_path).resolve().parent
        source = page.file.abs_src_path
        text = Path(source).read_text(encoding="utf-8") if source else None  # for lines
        outline = load_outline(Path(config["docs_dir"]))
        ctx = PageContext(
            root=root,
            src=src,
            meta=page_meta(outline, src, dict(page.meta or {}), text),
            raw_meta=dict(page.meta or {}),
            url=page.url,
            site_dir=Path(config.site_dir),
            figure_cache=STATE.figure_cache or root / FIGURE_CACHE,
        )
        STATE.pages[src] = ctx
    return ctx


def define_env(env: Any) -> None:
    """mkdocs-macros entry point: expose every registered macro, bound to the current page."""

    def bind(name: str) -> Any:
        method = MACROS[name]

        def call(*args: Any, **kwargs: Any) -> str:
            return method(context_for(env), *args, **kwargs)

        call.__name__ = name
        call.__doc__ = method.__doc__
        return call

    for name in MACROS:
        env.macro(bind(name), name)


def on_pre_page_macros(env: Any) -> None:
    """Before a page's macros: a misspelt macro name becomes a problem of this page, collected."""
    env.env.undefined = collecting_undefined(context_for(env))


def on_post_page_macros(env: Any) -> None:
    """After a page's macros: add the lesson header and the page's structured data."""
    ctx = context_for(env)
    words = prose_words(env.markdown)
    ctx.words = words
    env.markdown = finish(ctx, env.markdown)
    data = structured_data(ctx, words)
    if data:
        env.page.meta["course_jsonld"] = data


# -- mkdocs hooks (macros/hooks.py) --------------------------------------------------------


def on_config(config: Any) -> Any:
    """Build the navigation from the lesson registry (parts and lessons in order)."""
    if not config.get("nav"):
        config["nav"] = navigation(Path(config["docs_dir"]))
    return config


def on_pre_build(config: Any) -> None:
    """Start a build with no pages and no problems."""
    STATE.pages.clear()


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """A page's folded code blocks go to files of their own, fetched when unfolded
    (`deferred.py`); before the search plugin reads the page, so they stay out of its index."""
    deferred = defer_folded_code(html)
    if deferred.blocks:
        folder = Path(config["site_dir"]) / Path(page.file.dest_path).parent
        write_blocks(deferred, folder)
    return deferred.html


def on_env(env: Any, config: Any, files: Any) -> Any:
    """Every page is rendered: stop the build with all problems found, or log them when
    previewing.
    """
    problems = STATE.problems
    if problems:
        if os.environ.get(LENIENT):
            for line in report(problems).splitlines():
                log.warning(line)
        else:
            raise PluginError(report(problems))
    return env
