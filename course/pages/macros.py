"""The macros a page calls, as a registry: name -> function of the page's context.

The engines' macros (through their adapters) and the HTML-less renderer (`render.py`) bind the same
functions to a page. A macro never raises: a problem (unknown value, missing record, failing
claim...) is collected with the page and the call, a visible marker takes its place, and the build
fails once, listing them all. Only the project's own errors are turned into page problems; any
other exception is a bug and propagates.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable
from typing import Any, TypeVar

import jinja2
import markdown as md  # type: ignore[import-untyped,unused-ignore]
from pydantic import ValidationError

from ..errors import CourseError, PageError
from ..lab.files import lab_files
from ..record.quantity import ExprError, Quantity
from .checks import Check, ShownCheck, ShownOption, check_html
from .claims import check_claim, claim_html
from .context import FigureData, PageContext
from .faq import glossary_html
from .figures import figure as draw_or_reuse
from .format import decimals_for, format_number, recorded_text, spread_note
from .widgets import (
    TERMINAL_COLUMNS,
    WIDE_LINES_FAIL,
    WidgetError,
    figure_html,
    fold_command,
    listing_markdown,
    load_drawer,
    script_failure,
    select_lines,
    split_transcript,
    stale_acceptances,
    terminal_html,
    wide_lines,
    wide_message,
)
from .widgets import (
    line_count as count_lines,
)

Macro = Callable[..., str]
F = TypeVar("F", bound=Callable[..., str])
MACROS: dict[str, Macro] = {}
"""Macro name -> function(ctx, *args, **kwargs)."""
RAW: dict[str, Macro] = {}
"""Macro name -> the function itself, raising instead of collecting (for a macro inside one)."""
ANSWERABLE = (CourseError, ValidationError)
"""What a macro turns into a page problem: the project's errors and invalid page data."""


def call_text(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A macro call as a problem names it: `value('a.b', decimals=2)`."""
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if k != "caller"]
    return f"{name}({', '.join(shown)})"


def macro(func: F) -> F:
    """Register a macro; the project's errors it raises become collected problems."""

    @functools.wraps(func)
    def wrapper(ctx: PageContext, *args: Any, **kwargs: Any) -> str:
        try:
            return func(ctx, *args, **kwargs)
        except ANSWERABLE as exc:
            message = str(exc).strip()
            call = call_text(func.__name__, args, kwargs)
            ctx.problem(f"{ctx.within[-1]}: {call}" if ctx.within else call, message)
            name, shown = html.escape(func.__name__), recorded_text(message)
            return f'<span class="course-error">[{name}: {shown}]</span>'

    MACROS[func.__name__] = wrapper
    RAW[func.__name__] = func
    return wrapper  # type: ignore[return-value]


def bound(ctx: PageContext) -> dict[str, Callable[..., str]]:
    """The macros bound to one page."""
    return {name: functools.partial(func, ctx) for name, func in MACROS.items()}


def inline(markdown_text: str) -> str:
    """Markdown of one paragraph as inline HTML (the <p> removed)."""
    rendered = str(md.markdown(markdown_text, extensions=["attr_list", "md_in_html"])).strip()
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<p>") == 1:
        return rendered[3:-4]
    return rendered


_TEXT_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


@functools.lru_cache(maxsize=4096)
def _text_template(text: str) -> jinja2.Template:
    """A data file's string compiled once: a build renders the same strings for the page, its
    checks of the text and its PDF."""
    return _TEXT_ENV.from_string(text)


def render_text(ctx: PageContext, text: str) -> str:
    """A string from the data file with its macros run and its Markdown made inline HTML."""
    try:
        return inline(_text_template(text).render(**bound(ctx)))
    except jinja2.TemplateError as exc:
        raise PageError(f"{type(exc).__name__}: {exc} in {text!r}") from None


def _int_option(name: str, given: object) -> int:
    if isinstance(given, bool) or not isinstance(given, (int, str)):
        raise PageError(f"{name}={given!r}: expected a whole number, such as {name}=2")
    try:
        return int(given)
    except ValueError:
        raise PageError(f"{name}={given!r}: expected a whole number, such as {name}=2") from None


def _number(shown: str, q: Quantity, unit: str | None, percent: bool) -> tuple[float, str]:
    """The number an author asked for and its unit: converted to `unit`, or a ratio as a
    percentage (`shown` names the expression in errors)."""
    if unit is not None:
        if q.unit == "none":
            raise ExprError(f"{shown} has no unit to convert to {unit}")
        q = q.to(unit)
    if percent:
        if q.unit not in ("none", "%"):
            raise ExprError(f"{shown} is in {q.unit}; percent needs a ratio (a / b)")
        return (q.value * 100 if q.unit == "none" else q.value), "%"
    return q.value, q.unit


def shown_number(
    name: str, q: Quantity, unit: str | None, decimals: int | None, percent: bool, times: bool,
    show_unit: bool, separators: bool,
) -> str:  # fmt: skip
    """A quantity as value() and fact() show it: converted, with its decimals and unit."""
    number, shown_unit = _number(name, q, unit, percent)
    suffix = "" if shown_unit == "none" or not show_unit else f"\u00a0{shown_unit}"
    if percent:
        suffix = "\u00a0%"
    if times:
        suffix = "\u00a0×"
    places = decimals_for(number) if decimals is None else _int_option("decimals", decimals)
    return format_number(number, places, separators) + suffix


@macro
def value(
    ctx: PageContext, expression: str, unit: str | None = None, decimals: int | None = None,
    percent: bool = False, times: bool = False, show_unit: bool = True, separators: bool = True,
) -> str:  # fmt: skip
    """A recorded value (or arithmetic on values), formatted, inside a span naming its sources."""
    q, note = ctx.evaluate(expression), ""
    if q.text is not None:
        shown = recorded_text(q.text)
    else:
        shown = shown_number(
            repr(expression), q, unit, decimals, percent, times, show_unit, separators
        )
        if q.spread is not None and not (percent or times):
            shown_unit = _number(repr(expression), q, unit, percent)[1]
            note = f"; {spread_note(q.spread, q.unit, shown_unit)}"
    sources = " ".join(f"{ctx.run.run_id}/{s}" for s in q.sources)
    expr = ""
    if q.sources != (expression.strip(),):
        expr = f' data-expr="{html.escape(expression, quote=True)}"'
    source = html.escape(sources, quote=True)
    steps = sorted({s.split(".", 1)[0] for s in q.sources})
    # a value from a GPU step, or one with repeats, was measured; one from a step that only
    # computes (the arithmetic on paper) was worked out
    needs = {s.id: s.needs for s in ctx.run.record.steps}
    measured = q.spread is not None or any(needs.get(step, "gpu") for step in steps)
    said = (
        f"{'measured' if measured else 'worked out'} in run {ctx.run.run_id},"
        f" step{'s' if len(steps) > 1 else ''} {', '.join(steps)}"
    )
    title = f' title="{html.escape(said + note, quote=True)}"'
    return f'<span class="course-value" data-source="{source}"{expr}{title}>{shown}</span>'


@macro
def terminal(ctx: PageContext, step: str, lines: str | None = None, wide: str | None = None) -> str:
    """A step's prompt, command and recorded output as a terminal (optionally some lines only).
    `wide` names shown output lines wider than a block shows whole that the page accepts: a line
    the lab cannot narrow, such as another program's log, scrolls sideways on the page and wraps
    in the PDF."""
    recorded = ctx.run.record.step(step)
    output = split_transcript(ctx.run.transcript(step), recorded.command)
    keep = select_lines(lines, len(output))
    accepted = select_lines(wide, len(output), "wide") if wide is not None else []
    source = f"{ctx.run.run_id}/{step}"
    command = fold_command(recorded.command)
    options = {k: v for k, v in (("lines", lines), ("wide", wide)) if v is not None}
    call = call_text("terminal", (step,), options)
    for stale in stale_acceptances(output, keep, accepted):  # said, never kept silently
        ctx.problem(call, f"wide={wide!r}: {stale}, not wider than the {TERMINAL_COLUMNS} "
                    "characters a block shows whole: take it out of wide=")  # fmt: skip
    found = wide_lines(command, output, [i for i in keep if i not in accepted])
    if found and WIDE_LINES_FAIL:
        ctx.problem(call, wide_message(found))
    elif found:
        ctx.notes.append(f"{ctx.page}: {call}: {wide_message(found)}")
    return terminal_html(command, output, keep, source, recorded.title or step)


def _lab_file(ctx: PageContext, name: str) -> str:
    folder = (ctx.root / "lab" / ctx.lesson).resolve()
    path = (folder / name).resolve()
    if name in ctx.lab.included:
        return ctx.lab.included[name].read_text(encoding="utf-8")
    if folder not in path.parents or not path.is_file():
        files = ", ".join(lab_files(folder)) if folder.is_dir() else "no lab folder"
        raise WidgetError(f"no file '{name}' in lab/{ctx.lesson}/ (its files: {files})")
    return path.read_text(encoding="utf-8")


@macro
def listing(ctx: PageContext, file: str) -> str:
    """A lab file in full, highlighted, titled with its line count, with a copy button."""
    return listing_markdown(_lab_file(ctx, file), file)


@macro
def line_count(ctx: PageContext, file: str) -> str:
    """A lab file's length for prose: '49 lines'."""
    count = count_lines(_lab_file(ctx, file))
    noun = "line" if count == 1 else "lines"
    source = html.escape(f"lab/{ctx.lesson}/{file}", quote=True)
    return f'<span class="course-value" data-source="{source}">{count:,} {noun}</span>'


NUMBER_FIELD = re.compile(r"\{([^{}:]+?)(?::(\d+)(?:\s+([^{}\s]+))?)?\}")


def numbers_in_text(ctx: PageContext, text: str, markdown: bool = False) -> str:
    """Text with each `{expression}` replaced by its number, for alt text and captions:
    `{limits.peak_tflop_s:0}` (no decimals), `{prefill.ttft_128:1 ms}` (in ms, one decimal),
    `{decode.share:0 %}` (a ratio as a percentage); the number only, the words say the unit.
    A text value comes as it is, or made inert for Markdown and HTML (`markdown`: a caption)."""

    def number(match: re.Match[str]) -> str:
        expression, decimals, unit = match.group(1).strip(), match.group(2), match.group(3)
        q = ctx.evaluate(expression)
        if q.text is not None:
            return recorded_text(q.text) if markdown else q.text
        percent = unit == "%"
        amount, _ = _number(f"{{{expression}}}", q, None if percent else unit, percent)
        places = decimals_for(amount) if decimals is None else int(decimals)
        return format_number(amount, places)

    return NUMBER_FIELD.sub(number, text)


@macro
def figure(ctx: PageContext, name: str, alt: str | None = None, caption: str = "") -> str:
    """A chart from figures/<name>.py drawn with the run's values; alt text is required. Alt text
    and caption may give recorded numbers as `{expression:decimals unit}` (`numbers_in_text`)."""
    if not alt or not alt.strip():
        raise WidgetError(
            f'figure \'{name}\' needs alt text: figure("{name}", alt="what it shows", caption=...)'
        )
    alt, caption = numbers_in_text(ctx, alt), numbers_in_text(ctx, caption, markdown=True)
    script, shown = ctx.root / "figures" / f"{name}.py", f"figures/{name}.py"
    source = f"{ctx.run.run_id}/figures/{name}"
    if ctx.site_dir is None:  # checking only: the script must load and define draw()
        load_drawer(script, shown)
        return f'<figure class="course-figure" data-source="{html.escape(source)}"></figure>'
    target = f"assets/figures/{ctx.lesson}/{name}"
    keep = ctx.figure_cache / ctx.lesson / name if ctx.figure_cache else None
    try:
        drawn, _ = draw_or_reuse(script, shown, FigureData(ctx), ctx.site_dir, target, keep)
    except (WidgetError, ValidationError):
        raise
    except CourseError as exc:  # a value or kept file the script asked for: say which script
        raise WidgetError(f"{shown}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the author's figure script may raise anything
        raise WidgetError(script_failure(exc, script, shown)) from None
    base = ctx.to_root()
    shown_caption = inline(caption) if caption else ""
    return figure_html(
        base + drawn.svg, base + drawn.png, alt, shown_caption, drawn.width, drawn.height, source
    )


@macro
def check(ctx: PageContext, check_id: str) -> str:
    """A knowledge check or a predict-then-measure check declared in the page's data."""
    if check_id not in ctx.data.checks:
        known = ", ".join(ctx.data.checks) or "none declared"
        raise WidgetError(f"no check '{check_id}' in the page's data file (checks: {known})")
    if check_id in ctx.placed_checks:
        raise WidgetError(f"check '{check_id}' is placed twice")
    ctx.placed_checks.append(check_id)
    spec = ctx.data.checks[check_id]
    with ctx.inside(f"check '{check_id}' in {ctx.data_label}"):
        return _check(ctx, check_id, spec)


def _check(ctx: PageContext, check_id: str, spec: Check) -> str:
    """A check's HTML; each failure names the part of the check it is in."""
    rights = [o.right for o in spec.options]
    if all(o.when is not None for o in spec.options):
        rights = [
            _part(f"option #{i + 1}: when", ctx.holds, o.when or "")
            for i, o in enumerate(spec.options)
        ]
        if sum(rights) != 1:
            held = [o.text for o, r in zip(spec.options, rights, strict=True) if r] or ["none"]
            raise WidgetError(
                f"check '{check_id}' needs exactly one option whose 'when' holds for run "
                f"{ctx.run.run_id}; holding: {'; '.join(held)}"
            )
    options = [
        ShownOption(
            _part(f"option #{i + 1}: text", render_text, ctx, o.text),
            _part(f"option #{i + 1}: why", render_text, ctx, o.why),
            r,
        )
        for i, (o, r) in enumerate(zip(spec.options, rights, strict=True))
    ]
    measured = ""
    if spec.measured:
        value_of = RAW["value"]
        measured = _part(
            "measured", value_of, ctx, spec.measured, unit=spec.unit, decimals=spec.decimals,
            percent=spec.percent,
        ) + html.escape(spec.suffix)  # fmt: skip
        ctx.reveals[check_id] = measured
    note = _part("note", render_text, ctx, spec.note) if spec.note else ""
    question = _part("question", render_text, ctx, spec.question)
    return check_html(ShownCheck(check_id, spec.kind, question, options, measured, note))


T = TypeVar("T")


def _part(label: str, make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """One part of a check made; its failure says which part ('measured', 'option #2: why')."""
    try:
        return make(*args, **kwargs)
    except ANSWERABLE as exc:
        raise WidgetError(f"{label}: {exc}") from None


@macro
def claim(
    ctx: PageContext,
    condition: str,
    text: str | None = None,
    caller: Callable[[], str] | None = None,
) -> str:
    """A sentence tied to a condition over values; the build fails when the condition is false."""
    inner = caller() if caller is not None else text
    if inner is None:
        raise WidgetError(
            "a claim needs its sentence: claim(condition, text) or {% call claim(...) %}"
        )
    result = check_claim(condition, inner, ctx.lookup)
    ctx.claim_results.append(result)
    if not result.holds:
        ctx.problem(f"claim({condition!r})", result.message())
    if re.search(r"\n[ \t]*\n", inner):  # Markdown would end the paragraph inside the claim
        ctx.problem(
            f"claim({condition!r})",
            "its words hold a blank line, which ends a paragraph in the middle of the claim: a "
            "claim marks words inside a paragraph (a whole sentence, or a phrase in the middle "
            "of one); keep its words together, or make two claims",
        )
    return claim_html(result, inner)


@macro
def faq(ctx: PageContext, level: int = 3) -> str:
    """The page's questions people ask, each a heading and a short answer."""
    shown = []
    for number, entry in enumerate(ctx.data.faq, 1):
        with ctx.inside(f"faq #{number} in {ctx.data_label}"):
            answer = _part(f"faq #{number}: a", render_text, ctx, entry.a)
            shown.append(f"{'#' * level} {entry.q}\n\n{answer}")
    return "\n\n".join(shown)


@macro
def glossary(ctx: PageContext) -> str:
    """The page's glossary as a definition list."""
    terms = []
    for term, text in ctx.data.glossary.items():
        with ctx.inside(f"glossary '{term}' in {ctx.data_label}"):
            terms.append((term, _part(f"glossary '{term}'", render_text, ctx, text)))
    return glossary_html(terms)
