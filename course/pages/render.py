"""A page as a whole: its macros rendered against a run, its header, its structured data.

`render_page` is the one way a page's macros are run without mkdocs: `course check`, `course diff`
and the packaging all call it; a build engine runs the same macros through its adapter
(`mkdocs_adapter.py`, `zensical_adapter.py`) and finishes each page with the same `finish`.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..record.models import Run
from . import facts
from . import facts_macro as _facts_macro  # noqa: F401 - registers fact()
from . import freshness as _freshness  # noqa: F401 - registers freshness(), run_histories()
from . import guide as _guide  # noqa: F401 - registers lab_costs(), lab_installs()
from . import history as _history  # noqa: F401 - registers provenance() and run_history()
from . import install as _install  # noqa: F401 - registers get_files()
from . import landing as _landing  # noqa: F401 - registers course_outline()
from . import links as _links  # noqa: F401 - registers lesson_link()
from . import reference as _reference  # noqa: F401 - registers lab_reference()
from .calculators import widget as _calculator  # noqa: F401 - registers calculator()
from .claims import plain_text
from .context import PageContext
from .faq import jsonld
from .format import iso_duration
from .header import lesson_header
from .lessons import PageEntry, page_url, read_meta
from .links import next_block
from .macros import ANSWERABLE, MACROS, bound, call_text, render_text


@dataclass
class RenderedPage:
    """A page's macros run: its context (problems, claims, reveals) and its Markdown, if it
    rendered.
    """

    context: PageContext
    markdown: str | None
    body: str
    """The page's source after the front matter."""
    text: str | None = None
    """What the macros made of the body, before `finish` (marked, when the rendering marks)."""


def _same(text: str) -> str:
    return text


@dataclass(frozen=True)
class Rendering:
    """How `render_page` runs a page's macros: the body as jinja reads it, the macros bound to the
    page, and the text `finish` reads; the page checks (`lint/`) mark lines and macro outputs."""

    source: Callable[[str], str] = _same
    macros: Callable[[PageContext], dict[str, Callable[..., str]]] = field(default=bound)
    plain: Callable[[str], str] = _same


def render_page(
    root: Path,
    entry: PageEntry,
    run: Run | None = None,
    strict: bool = True,
    how: Rendering = Rendering(),  # noqa: B008 - frozen, shared on purpose
) -> RenderedPage:
    """Run a page's macros (without HTML) against its chosen run, or the run given.

    A template error is collected as a problem of the page (with its line), never skipped.
    """
    docs = root / "docs"
    meta, raw, body = read_meta(docs / entry.src, f"docs/{entry.src}")
    ctx = PageContext(root, entry.src, meta, raw, page_url(entry.src), None, given_run=run)
    undefined = collecting_undefined(ctx) if strict else jinja2.Undefined
    env = jinja2.Environment(undefined=undefined, autoescape=False)
    page = {"meta": raw, "title": entry.title, "url": ctx.url}
    try:
        text = env.from_string(how.source(body)).render(page=page, config={}, **how.macros(ctx))
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f"line {line} (after the front matter)" if line else "(template)"
        ctx.problem(where, f"{type(exc).__name__}: {exc}{hint(str(exc))}")
        return RenderedPage(ctx, None, body)
    return RenderedPage(ctx, finish(ctx, how.plain(text)), body, text)


def collecting_undefined(ctx: PageContext) -> type[jinja2.Undefined]:
    """Jinja's Undefined for one page: a misspelt macro call or name is collected as a problem of
    the page, like every other, and a marker takes its place, so one build lists them all."""

    class Collecting(jinja2.StrictUndefined):
        def _collect(self, call: str) -> str:
            name = self._undefined_name or "?"
            message = f"no macro or value named '{name}'{hint(f'{name!r} is undefined')}"
            ctx.problem(call, message)
            return f'<span class="course-error">[{html.escape(name)}: no such macro]</span>'

        def __getattr__(self, name: str) -> Any:
            if name == "jinja_pass_arg" or name.startswith("__"):
                raise AttributeError(name)  # what jinja asks of anything it calls
            return super().__getattr__(name)

        # jinja types these as never returning; here they return the marker
        def __call__(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
            return self._collect(call_text(self._undefined_name or "?", args, kwargs))

        def __str__(self) -> str:  # type: ignore[override]
            return self._collect(f"{{{{ {self._undefined_name} }}}}")

    return Collecting


def hint(error: str) -> str:
    """For an unknown name in a page, the macro it was probably meant to be."""
    match = re.match(r"'(\w+)' is undefined", error)
    if not match:
        return ""
    close = difflib.get_close_matches(match.group(1), list(MACROS), n=1)
    known = f"did you mean {close[0]}()? " if close else ""
    return f" ({known}macros: {', '.join(MACROS)})"


def finish(ctx: PageContext, markdown: str) -> str:
    """After the macros ran: report unplaced checks, format the headline number, and put the
    lesson header on top and the way to the next lesson at the end."""
    headline = ctx.meta.headline
    if headline is not None:
        value = MACROS["value"].__wrapped__  # type: ignore[attr-defined]
        try:
            shown = value(ctx, headline.value, unit=headline.unit, decimals=headline.decimals)
            ctx.headline = plain_text(shown)
        except ANSWERABLE as exc:
            ctx.problem(f"headline: {headline.value!r} (front matter)", str(exc).strip())
    if not ctx.meta.lesson:
        return markdown
    try:
        first = next((line for line in markdown.splitlines() if line.strip()), "")
        if first.startswith("# "):
            ctx.problem(
                first.strip(),
                "a lesson page's header already holds its title (front matter `title:`); "
                "start the page without a '# ' heading",
            )
        for check_id in ctx.data.checks:
            if check_id not in ctx.placed_checks:
                ctx.problem(
                    f'check("{check_id}")',
                    "declared in the page's data but never placed on the page",
                )
        closing = next_block(ctx)
        return (
            lesson_header(ctx, markdown) + "\n\n" + markdown + ("\n\n" + closing if closing else "")
        )
    except ANSWERABLE as exc:
        ctx.problem("(page header)", str(exc))
        return markdown


def structured_data(ctx: PageContext, words: int) -> str:
    """The page's JSON-LD: a LearningResource, plus FAQPage when it has questions."""
    if not ctx.meta.lesson:
        return ""
    try:
        faq = [(e.q, plain_text(render_text(ctx, e.a))) for e in ctx.data.faq]
        seconds = facts.hands_on(ctx.run, ctx.lab).total + 60 * facts.reading_minutes(words)
        return jsonld(
            ctx.meta.title or ctx.lesson,
            ctx.meta.summary or "",
            iso_duration(seconds),
            ctx.run.record.started[:10],
            faq,
        )
    except ANSWERABLE as exc:
        ctx.problem("(structured data)", str(exc))
        return ""
