"""The glue between MkDocs and the pages: mkdocs-macros' `define_env` and its page hooks, and the
MkDocs hooks. The one module of `course/pages/` that imports MkDocs.

`macros/__init__.py` re-exports the macros' entry points, `macros/hooks.py` the hooks. Each hook
hands MkDocs' objects to the engine-neutral functions of `state.py`, `deferred.py` and
`publishing.py`. Problems found while rendering are collected in `STATE` and, once every page has
been rendered (`on_env`), the build stops with all of them; under `course serve`
(COURSE_LENIENT=1) they are logged and the marked page is served.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from mkdocs.exceptions import PluginError

from .cards import card_name, write_card
from .context import PageContext
from .deferred import defer_folded_code, write_blocks
from .lessons import learners_pages, navigation
from .macros import MACROS
from .publishing import (
    CARDS_CACHE,
    card_for,
    crosses,
    opengraph,
    page_additions,
    published_url,
    reading_times,
    site_files,
)
from .render import collecting_undefined
from .state import LENIENT, STATE, after_macros, open_page, report

log = logging.getLogger("mkdocs.course")


def _root(config: Any) -> Path:
    return Path(config.config_file_path).resolve().parent


def context_for(env: Any) -> PageContext:
    """The PageContext of the page mkdocs-macros is rendering now."""
    page = env.page
    ctx = STATE.pages.get(page.file.src_uri)
    if ctx is not None:
        return ctx
    config = env.conf
    source = page.file.abs_src_path
    text = Path(source).read_text(encoding="utf-8") if source else None  # for lines
    return open_page(
        _root(config),
        page.file.src_uri,
        dict(page.meta or {}),
        page.url,
        Path(config.site_dir),
        text,
    )


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
    env.markdown, data = after_macros(context_for(env), env.markdown)
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


def on_nav(nav: Any, config: Any, files: Any) -> Any:
    """Cut previous/next wherever they would cross between the learners' and the authors' side."""
    learners = learners_pages(Path(config["docs_dir"]))
    for page in nav.pages:
        src = page.file.src_uri
        if page.next_page is not None and crosses(src, page.next_page.file.src_uri, learners):
            page.next_page = None
        if page.previous_page is not None and crosses(
            src, page.previous_page.file.src_uri, learners
        ):
            page.previous_page = None
    return nav


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Per page: out of the search index when it is an authors' page, its summary as its
    description, and a lesson's sitemap date from the run it shows."""
    date = page_additions(_root(config), page.file.src_uri, page.meta)
    if date:
        page.update_date = date
    return markdown


def on_page_context(context: Any, page: Any, config: Any, nav: Any) -> Any:
    """On a published site: the page's social card, drawn (or reused), and its OpenGraph data."""
    url = published_url(config.get("site_url"))
    if url is None:
        return context
    root = _root(config)
    card = card_for(root, page.file.src_uri, page.title, page.meta, config)
    name = card_name(page.url)
    write_card(card, Path(config["site_dir"]) / name, STATE.cards_cache or root / CARDS_CACHE)
    description = str(page.meta.get("description") or config.get("site_description") or "")
    address = page.canonical_url or urljoin(url, page.url)
    page.meta["course_og"] = opengraph(
        root, page.file.src_uri, card, name, address, description, url
    )
    return context


def on_post_page(output: str, page: Any, config: Any) -> str:
    """The landing page's reading times, from the words of the lesson pages once rendered."""
    return reading_times(output)


def on_post_build(config: Any) -> None:
    """On a published site: robots.txt and the feed of lessons re-run."""
    url = published_url(config.get("site_url"))
    if url is not None:
        site_files(_root(config), Path(config["site_dir"]), url, config)
