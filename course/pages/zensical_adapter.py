"""The glue between Zensical and the pages: a macros module for Zensical's own mkdocs-macros, a
Jinja extension, and a Markdown extension. Zensical runs no MkDocs hooks; what MkDocs' hooks do
during a page happens here, and what they do around the build, in the site's build
(`course/site/after.py`).

`course build --engine zensical` writes a configuration that names this module three times:

    plugins: [macros: {module_name: course.pages.zensical_adapter,
                       j2_extensions: [course.pages.zensical_adapter.PageUndefined]}]
    markdown_extensions: [..., course.pages.zensical_adapter]

Zensical calls `define_env` before each page's macros (with that page), renders the page's
Jinja with the macros bound to it, then goes on with the Markdown extensions: `makeExtension`'s
preprocessor, right after the macros, adds the lesson header and the page's structured data and
published meta; its postprocessor, on the page's HTML before the search index reads it, sends
folded code to files of their own. The build sets `STATE.root` (the project) and
`STATE.site_dir` before it starts Zensical, in this process.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import jinja2.ext
from markdown import Extension, Markdown  # type: ignore[import-untyped,unused-ignore]
from markdown.postprocessors import Postprocessor  # type: ignore[import-untyped,unused-ignore]
from markdown.preprocessors import Preprocessor  # type: ignore[import-untyped,unused-ignore]

from ..errors import PageError
from .cards import card_name
from .context import PageContext
from .deferred import defer_folded_code, write_blocks
from .lessons import split_front_matter
from .macros import MACROS
from .publishing import card_for, opengraph, page_additions, published_url
from .render import collecting_undefined, hint
from .state import STATE, after_macros, open_page

CONTEXT = "rendering_context"
"""The name Zensical registers its page context preprocessor under (its page and config)."""


def _project() -> tuple[Path, Path]:
    """The project and the site folder of the build under way."""
    if STATE.root is None or STATE.site_dir is None:
        raise PageError(
            "course.pages.zensical_adapter runs inside `course build --engine zensical`, which "
            "writes Zensical's configuration and runs the steps around it; build with that"
        )
    return STATE.root, STATE.site_dir


def _context(page: Any) -> PageContext:
    """The context of a page Zensical renders (its `path` in docs/, `url`, `meta`)."""
    root, site_dir = _project()
    src = str(page.path)
    source = root / "docs" / src
    text = source.read_text(encoding="utf-8") if source.is_file() else None
    return open_page(root, src, dict(page.meta or {}), str(page.url), site_dir, text)


def define_env(env: Any) -> None:
    """Zensical's macros entry point, called before each page's macros: every registered macro,
    bound to that page."""
    ctx = _context(env.page)
    STATE.rendering = ctx.src  # for PageUndefined: Zensical renders the page's Jinja next

    def bind(name: str) -> Any:
        method = MACROS[name]

        def call(*args: Any, **kwargs: Any) -> str:
            return method(ctx, *args, **kwargs)

        call.__name__ = name
        call.__doc__ = method.__doc__
        return call

    for name in MACROS:
        env.macro(bind(name), name)


class PageUndefined(jinja2.ext.Extension):
    """A misspelt macro or name in the page being rendered becomes a problem of that page,
    collected like every other (Zensical makes the Jinja environment before `define_env`; the
    page's source is read after it)."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        """Point the environment's Undefined at the page whose macros run now."""
        ctx = STATE.pages.get(STATE.rendering or "")
        if ctx is not None:
            self.environment.undefined = collecting_undefined(ctx)
        return source


def _page(md: Markdown) -> tuple[Any, dict[str, Any]]:
    """The page Zensical renders with this Markdown instance, and the site's configuration."""
    context = md.preprocessors[CONTEXT] if CONTEXT in md.preprocessors else None
    if context is None:
        raise PageError(f"{__name__} needs Zensical's {CONTEXT!r} preprocessor (its page)")
    return context.page, context.config


_SYNTAX = re.compile(
    r"\A# _Macro Syntax Error_\n.*?^_Line (\d+)_: \*\*(.*?)\*\*$", re.DOTALL | re.M
)
_RENDERING = re.compile(r"\A# _Macro Rendering Error_\n.*?^_(\w+)_: (.*?)$", re.DOTALL | re.M)


def _dropped(ctx: PageContext) -> int:
    """The blank lines between the front matter and the body, which Zensical drops before the
    macros (so its line numbers start after them)."""
    text = (ctx.root / "docs" / ctx.src).read_text(encoding="utf-8")
    _, body = split_front_matter(text)
    if body == text:
        return 0
    return body[: len(body) - len(body.lstrip())].count("\n")


def _failed(ctx: PageContext, markdown: str) -> bool:
    """Whether Zensical's macros could not render the page (they then put their report in its
    place): if so, the error becomes a problem of the page, told as `render_page` tells it."""
    syntax, rendering = _SYNTAX.match(markdown), _RENDERING.match(markdown)
    if syntax:
        where = f"line {int(syntax.group(1)) + _dropped(ctx)} (after the front matter)"
        name, message = "TemplateSyntaxError", syntax.group(2)
    elif rendering:
        where, name, message = "(template)", rendering.group(1), rendering.group(2)
    else:
        return False
    message = html.unescape(message)
    ctx.problem(where, f"{name}: {message}{hint(message)}")
    return True


class _AfterMacros(Preprocessor):  # type: ignore[misc,unused-ignore]
    """The page's Markdown once its macros ran: the lesson header, the structured data, and the
    meta a course page carries (description, search, sitemap date, OpenGraph)."""

    def run(self, lines: list[str]) -> list[str]:
        page, config = _page(self.md)
        root, _ = _project()
        src = str(page.path)
        markdown = "\n".join(lines)
        ctx = STATE.pages.get(src)
        if ctx is not None and _failed(ctx, markdown):
            return []  # the build fails with the page's problems
        if ctx is not None:  # its macros ran (a page may say `render_macros: false`)
            markdown, data = after_macros(ctx, markdown)
            if data:
                page.meta["course_jsonld"] = data
        page_additions(root, src, page.meta)  # its sitemap date is put in after the build
        url = published_url(config.get("site_url"))
        if url is not None:
            card = card_for(root, src, page.title, page.meta, config)
            name = card_name(str(page.url))
            STATE.cards[name] = card
            description = str(page.meta.get("description") or config.get("site_description") or "")
            address = urljoin(url, str(page.url))
            page.meta["course_og"] = opengraph(root, src, card, name, address, description, url)
        return markdown.split("\n")


_SCHEME = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|/|#)")
_URL_ATTRIBUTE = re.compile(r'(\s(?:href|src)=")([^"]*)(")')


def from_source(url: str, src: str) -> str:
    """A URL relative to page `src`'s own URL (as MkDocs leaves the pages' raw HTML, and as the
    macros write it) as Zensical reads every relative URL of a page: relative to the page's
    source file, which lies one folder above its URL unless it is an index page."""
    name = src.rsplit("/", 1)[-1]
    if name == "index.md" or _SCHEME.match(url):
        return url
    if url.startswith("../"):
        return url[3:]
    return f"{name.removesuffix('.md')}/{url}"


class _RawLinks(Postprocessor):  # type: ignore[misc,unused-ignore]
    """The links of the page's raw HTML (the macros', the author's) made relative to its source
    file, before they are put back into the page (at 30); links written in Markdown are already
    (and the blocks of `markdown="1"` HTML, parsed as Markdown, are kept as elements)."""

    def __init__(self, md: Markdown) -> None:
        super().__init__(md)
        self.done = 0
        """Blocks already made relative (the table of contents runs the postprocessors on every
        heading before the page's own run)."""

    def run(self, text: str) -> str:
        page, _ = _page(self.md)
        src = str(page.path)
        blocks = self.md.htmlStash.rawHtmlBlocks
        start, self.done = self.done, len(blocks)
        for i in range(start, len(blocks)):
            block = blocks[i]
            if isinstance(block, str):
                blocks[i] = _URL_ATTRIBUTE.sub(
                    lambda m: m.group(1) + from_source(m.group(2), src) + m.group(3), block
                )
        return text


class _DeferCode(Postprocessor):  # type: ignore[misc,unused-ignore]
    """The page's folded code blocks go to files of their own (`deferred.py`)."""

    def run(self, text: str) -> str:
        page, _ = _page(self.md)
        _, site_dir = _project()
        deferred = defer_folded_code(text)
        if not deferred.blocks:
            return text
        write_blocks(deferred, site_dir / str(page.url))
        shown = deferred.html
        for name in deferred.blocks:  # the link that opens a block without JavaScript
            shown = shown.replace(
                f'<a href="{name}">', f'<a href="{from_source(name, page.path)}">'
            )
        return shown


class CourseExtension(Extension):  # type: ignore[misc,unused-ignore]
    """The Markdown extension around a page's macros."""

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 - Python-Markdown's name
        """Register the preprocessor right after the macros (35), and the postprocessors."""
        md.preprocessors.register(_AfterMacros(md), "course_after_macros", 34)
        md.postprocessors.register(_RawLinks(md), "course_raw_links", 31)
        md.postprocessors.register(_DeferCode(md), "course_deferred", 0)


def makeExtension(**kwargs: Any) -> CourseExtension:  # noqa: N802 - Python-Markdown's name
    """Python-Markdown's entry point for `markdown_extensions: [course.pages.zensical_adapter]`."""
    return CourseExtension(**kwargs)
