"""What the macros do: one `PageContext` per page, reading its lesson's record and rendering blocks.

Every macro is a method registered in `MACROS`; the mkdocs glue (`course.plugin`) and the
HTML-less checker (`course.site.check_site`) bind the same methods to a page. A macro never
raises: a problem (unknown value, missing record, failing claim...) is collected with the page
and the call, a visible marker takes its place, and the build fails once, listing them all.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import markdown as md  # type: ignore[import-untyped]
from pydantic import ValidationError

from . import facts
from .checks import ShownCheck, ShownOption, check_html
from .claims import ClaimResult, check_claim, claim_html, plain_text
from .errors import CourseError
from .faq import PageData, glossary_html, jsonld, load_page_data
from .lab import LoadedLab, lab_files, load_lab
from .lessons import LessonMeta
from .quantity import ExprError, Expression, Quantity, format_number
from .records import Run, Store
from .widgets import (
    WidgetError,
    draw_figure,
    figure_html,
    line_count,
    listing_markdown,
    load_drawer,
    select_lines,
    split_transcript,
    terminal_html,
)

F = TypeVar("F", bound=Callable[..., str])
MACROS: dict[str, Callable[..., str]] = {}
"""Macro name -> PageContext method."""
_ANSWERABLE = (CourseError, ExprError, WidgetError, ValidationError, ValueError, LookupError)


@dataclass(frozen=True)
class Problem:
    """One thing that stops the build: the page, the macro call and what was expected."""

    page: str
    call: str
    message: str

    def __str__(self) -> str:
        return f"{self.page}: {self.call}: {self.message}"


def _call_text(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if k != "caller"]
    return f"{name}({', '.join(shown)})"


def macro(func: F) -> F:
    """Register a PageContext method as a macro; its errors become collected problems."""

    @functools.wraps(func)
    def wrapper(self: PageContext, *args: Any, **kwargs: Any) -> str:
        try:
            return func(self, *args, **kwargs)
        except _ANSWERABLE as exc:
            message = str(exc).strip()
            self.problem(_call_text(func.__name__, args, kwargs), message)
            return f'<span class="course-error">[{html.escape(func.__name__)}: {html.escape(message)}]</span>'

    MACROS[func.__name__] = wrapper
    return wrapper  # type: ignore[return-value]


def _inline(markdown_text: str) -> str:
    """Markdown of one paragraph as inline HTML (the <p> removed)."""
    rendered = str(md.markdown(markdown_text, extensions=["attr_list", "md_in_html"])).strip()
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<p>") == 1:
        return rendered[3:-4]
    return rendered


@dataclass
class PageContext:
    """One page being built: its front matter, its run, its data, and the problems found."""

    root: Path
    src: str
    """The page's path inside docs/."""
    meta: LessonMeta
    raw_meta: dict[str, Any] = field(default_factory=dict)
    url: str = ""
    """The page's URL relative to the site root (to link assets)."""
    site_dir: Path | None = None
    """Where the site is written; None when only checking (figures are then not drawn)."""
    problems: list[Problem] = field(default_factory=list)
    placed_checks: list[str] = field(default_factory=list)
    claim_results: list[ClaimResult] = field(default_factory=list)
    """Every claim checked on the page, in order (for `course diff`)."""
    reveals: dict[str, str] = field(default_factory=dict)
    """Check id -> the measured answer a predict check reveals, as HTML (for `course diff`)."""
    _run: Run | None = None
    _run_missing: str | None = None
    _lab: LoadedLab | None = None
    _data: PageData | None = None

    # -- what the page reads ---------------------------------------------------------------

    @property
    def page(self) -> str:
        """The page as messages name it."""
        return f"docs/{self.src}"

    def problem(self, call: str, message: str) -> None:
        """Collect a problem; one that repeats an earlier message of the page is left out.

        A missing run is reported once, at the first call that needed it, not by every call.
        """
        repeats = [p for p in self.problems if p.message == message
                   or (self._run_missing is not None and self._run_missing in p.message)]
        if self._run_missing is not None and self._run_missing in message and repeats:
            return
        if all(p.message != message for p in self.problems):
            self.problems.append(Problem(self.page, call, message))

    @property
    def lesson(self) -> str:
        """The page's lesson; PageError when its front matter names none."""
        if not self.meta.lesson:
            raise CourseError("this page names no lesson: add `lesson: <name>` to its front matter")
        return self.meta.lesson

    @property
    def run(self) -> Run:
        """The run the page uses: the pinned one, else the lesson's newest good run."""
        if self._run is None:
            store = Store(self.root / "build")
            if self.meta.run:
                self._run = store.get(self.lesson, self.meta.run)
            else:
                found = store.newest_good(self.lesson)
                if found is None:
                    self._run_missing = (
                        f"no good run of '{self.lesson}' in build/{self.lesson}/ (expected a recorded run: "
                        f"run `course run {self.lesson}` on a GPU machine and commit its build folder)"
                    )
                    raise CourseError(self._run_missing)
                self._run = found
        return self._run

    @property
    def lab(self) -> LoadedLab:
        """The lesson's lab recipe."""
        if self._lab is None:
            self._lab = load_lab(self.root / "lab" / self.lesson / "lab.yml")
        return self._lab

    @property
    def data(self) -> PageData:
        """The page's checks, FAQ and glossary."""
        if self._data is None:
            self._data = load_page_data(self.root / "docs", self.src, self.raw_meta)
        return self._data

    def lookup(self, reference: str) -> Quantity:
        """`step.name` of the page's run as a Quantity."""
        step, name = reference.split(".", 1)
        try:
            recorded = self.run.value(step, name)
        except CourseError as exc:
            raise ExprError(str(exc)) from None
        if recorded.type == "str" or isinstance(recorded.value, str):
            return Quantity(float("nan"), "none", (reference,), False, str(recorded.value))
        return Quantity(float(recorded.value), recorded.unit, (reference,), recorded.type == "int")

    def evaluate(self, expression: str) -> Quantity:
        """An expression over recorded values that gives a value, not a condition."""
        result = Expression.parse(expression).evaluate(self.lookup)
        if isinstance(result, bool):
            raise ExprError(f"{expression!r} is a condition; use claim() for conditions")
        return result

    def to_root(self) -> str:
        """The relative path from this page to the site root ('' or '../' ...)."""
        return "../" * self.url.count("/")

    def render_text(self, text: str) -> str:
        """A string from the data file with its macros run and its Markdown made inline HTML."""
        template = _TEXT_ENV.from_string(text)
        return _inline(template.render(**self.bound()))

    def bound(self) -> dict[str, Callable[..., str]]:
        """The macros bound to this page."""
        return {name: functools.partial(method, self) for name, method in MACROS.items()}

    # -- the macros -------------------------------------------------------------------------

    @macro
    def value(self, expression: str, unit: str | None = None, decimals: int | None = None,
              percent: bool = False, times: bool = False, show_unit: bool = True,
              separators: bool = True) -> str:
        """A recorded value (or arithmetic on values), formatted, inside a span naming its sources."""
        q = self.evaluate(expression)
        if q.text is not None:
            shown = html.escape(q.text)
        else:
            if unit is not None:
                if q.unit == "none":
                    raise ExprError(f"{expression!r} has no unit to convert to {unit}")
                q = q.to(unit)
            number = q.value
            suffix = "" if q.unit == "none" or not show_unit else f"\u00a0{q.unit}"
            if percent:
                if q.unit not in ("none", "%"):
                    raise ExprError(f"{expression!r} is in {q.unit}; percent needs a ratio (a / b)")
                number = number * 100 if q.unit == "none" else number
                suffix = "\u00a0%"
            if times:
                suffix = "\u00a0×"
            if decimals is None:
                decimals = 0 if abs(number - round(number)) < 1e-9 else 1
            shown = format_number(number, int(decimals), separators) + suffix
        sources = " ".join(f"{self.run.run_id}/{s}" for s in q.sources)
        expr = "" if q.sources == (expression.strip(),) else f' data-expr="{html.escape(expression, quote=True)}"'
        return f'<span class="course-value" data-source="{html.escape(sources, quote=True)}"{expr}>{shown}</span>'

    @macro
    def terminal(self, step: str, lines: str | None = None) -> str:
        """A step's prompt, command and recorded output as a terminal (optionally some lines only)."""
        recorded = self.run.record.step(step)
        output = split_transcript(self.run.transcript(step), recorded.command)
        keep = select_lines(lines, len(output))
        return terminal_html(recorded.command, output, keep, f"{self.run.run_id}/{step}",
                             recorded.title or step)

    def _lab_file(self, name: str) -> Path:
        folder = (self.root / "lab" / self.lesson).resolve()
        path = (folder / name).resolve()
        if folder not in path.parents or not path.is_file():
            files = ", ".join(lab_files(folder)) if folder.is_dir() else "no lab folder"
            raise WidgetError(f"no file '{name}' in lab/{self.lesson}/ (its files: {files})")
        return path

    @macro
    def listing(self, file: str) -> str:
        """A lab file in full, highlighted, titled with its line count, with a copy button."""
        return listing_markdown(self._lab_file(file).read_text(encoding="utf-8"), file)

    @macro
    def line_count(self, file: str) -> str:
        """A lab file's length for prose: '49 lines'."""
        count = line_count(self._lab_file(file).read_text(encoding="utf-8"))
        noun = "line" if count == 1 else "lines"
        source = html.escape(f"lab/{self.lesson}/{file}", quote=True)
        return f'<span class="course-value" data-source="{source}">{count:,} {noun}</span>'

    @macro
    def figure(self, name: str, alt: str | None = None, caption: str = "") -> str:
        """A chart from figures/<name>.py drawn with the run's values; alt text is required."""
        if not alt or not alt.strip():
            raise WidgetError(f"figure '{name}' needs alt text: figure(\"{name}\", alt=\"what it shows\", caption=...)")
        draw = load_drawer(self.root / "figures" / f"{name}.py", f"figures/{name}.py")
        source = f"{self.run.run_id}/figures/{name}"
        if self.site_dir is None:
            return f'<figure class="course-figure" data-source="{html.escape(source)}"></figure>'
        try:
            drawn = draw_figure(draw, FigureData(self), self.site_dir, f"assets/figures/{self.lesson}/{name}")
        except _ANSWERABLE:
            raise
        except Exception as exc:  # noqa: BLE001 - a figure's own code may raise anything: the page reports it
            raise WidgetError(f"figures/{name}.py failed: {type(exc).__name__}: {exc}") from None
        base = self.to_root()
        return figure_html(base + drawn.svg, base + drawn.png, alt, _inline(caption) if caption else "",
                           drawn.width, drawn.height, source)

    @macro
    def check(self, check_id: str) -> str:
        """A knowledge check or a predict-then-measure check declared in the page's data."""
        if check_id not in self.data.checks:
            known = ", ".join(self.data.checks) or "none declared"
            raise WidgetError(f"no check '{check_id}' in the page's data file (checks: {known})")
        if check_id in self.placed_checks:
            raise WidgetError(f"check '{check_id}' is placed twice")
        self.placed_checks.append(check_id)
        spec = self.data.checks[check_id]
        rights = [o.right for o in spec.options]
        if all(o.when is not None for o in spec.options):
            rights = [self._holds(o.when or "") for o in spec.options]
            if sum(rights) != 1:
                held = [o.text for o, r in zip(spec.options, rights) if r] or ["none"]
                raise WidgetError(f"check '{check_id}' needs exactly one option whose 'when' holds for run "
                                  f"{self.run.run_id}; holding: {'; '.join(held)}")
        options = [ShownOption(self.render_text(o.text), self.render_text(o.why), r)
                   for o, r in zip(spec.options, rights)]
        measured = ""
        if spec.measured:
            measured = MACROS["value"](self, spec.measured, unit=spec.unit, decimals=spec.decimals,
                                       percent=spec.percent) + html.escape(spec.suffix)
            self.reveals[check_id] = measured
        shown = ShownCheck(check_id, spec.kind, self.render_text(spec.question), options, measured,
                           self.render_text(spec.note) if spec.note else "")
        return check_html(shown)

    def _holds(self, condition: str) -> bool:
        result = Expression.parse(condition).evaluate(self.lookup)
        if not isinstance(result, bool):
            raise ExprError(f"'when: {condition}' gives a number, not true or false")
        return result

    @macro
    def claim(self, condition: str, text: str | None = None, caller: Callable[[], str] | None = None) -> str:
        """A sentence tied to a condition over values; the build fails when the condition is false."""
        inner = caller() if caller is not None else text
        if inner is None:
            raise WidgetError("a claim needs its sentence: claim(condition, text) or {% call claim(...) %}")
        result = check_claim(condition, inner, self.lookup)
        self.claim_results.append(result)
        if not result.holds:
            self.problem(f"claim({condition!r})", result.message())
        return claim_html(result, inner)

    @macro
    def faq(self, level: int = 3) -> str:
        """The page's questions people ask, each a heading and a short answer."""
        return "\n\n".join(f"{'#' * level} {entry.q}\n\n{self.render_text(entry.a)}" for entry in self.data.faq)

    @macro
    def glossary(self) -> str:
        """The page's glossary as a definition list."""
        return glossary_html([(term, self.render_text(text)) for term, text in self.data.glossary.items()])

    @macro
    def provenance(self) -> str:
        """One sentence on how the outputs were made: date, machine, versions, run id."""
        run = self.run
        gpu = facts.gpu_name(run) or "a machine without a GPU"
        host = run.record.host
        details = []
        if isinstance(host.get("gpu"), dict):
            g = host["gpu"]
            details += [f"{label} {g[k]}" for k, label in (("driver", "driver"), ("cuda", "CUDA")) if g.get(k)]
        details += [f"Python {host['python']}"] if host.get("python") else []
        return (
            f'<span class="course-provenance" data-source="{html.escape(run.run_id)}">The outputs on this page '
            f"were recorded by <code>course run {html.escape(self.lesson)}</code> on {facts.checked_on(run)} "
            f"on {'an ' if gpu.startswith('NVIDIA') else ''}{html.escape(gpu)} ({html.escape(', '.join(details))}) with "
            f"{html.escape(facts.engine_text(run))}; run <code>{html.escape(run.run_id)}</code>.</span>"
        )

    @macro
    def run_history(self, headline: list[str] | dict[str, str] | None = None) -> str:
        """Every recorded run of the lesson: date, GPU, engine versions and headline values side by side.

        `headline` lists values (`step.name`), or maps a column label to each.
        """
        runs = Store(self.root / "build").runs(self.lesson)
        labelled = headline if isinstance(headline, dict) else {f"<code>{html.escape(n)}</code>": n
                                                                for n in headline or []}
        names = list(labelled.values())
        for name in names:  # an unknown headline value is the author's typo: say so
            self.lookup(name)
        head = ["run", "date", "status", "GPU", "engine"] + [
            label if not isinstance(headline, dict) else html.escape(label) for label in labelled]
        rows = []
        for run in reversed(runs):
            cells = [f"<code>{html.escape(run.run_id)}</code>" + (" (this page)" if run.run_id == self.run.run_id else ""),
                     html.escape(facts.checked_on(run)), html.escape(run.record.status),
                     html.escape(facts.gpu_name(run) or "no GPU"), html.escape(facts.engine_text(run))]
            for name in names:
                step, value = name.split(".", 1)
                try:
                    recorded = run.value(step, value)
                except CourseError:
                    cells.append("—")
                    continue
                shown = recorded.value
                text = f"{shown:,}" if isinstance(shown, int) else f"{shown:,.4g}" if isinstance(shown, float) else shown
                unit = "" if recorded.unit == "none" else f" {recorded.unit}"
                source = html.escape(f"{run.run_id}/{name}", quote=True)
                cells.append(f'<span class="course-value" data-source="{source}">{html.escape(str(text))}{unit}</span>')
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        header = "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
        return (f'<div class="course-history md-typeset__scrollwrap" tabindex="0" role="region" aria-label="Run history"><div class="md-typeset__table"><table>'
                f"<thead>{header}</thead><tbody>{''.join(rows)}</tbody></table></div></div>")

    # -- the page as a whole ----------------------------------------------------------------

    def finish(self, markdown: str) -> str:
        """After the macros ran: report unplaced checks and put the lesson header on top."""
        if not self.meta.lesson:
            return markdown
        try:
            first = next((line for line in markdown.splitlines() if line.strip()), "")
            if first.startswith("# "):
                self.problem(first.strip(), "a lesson page's header already holds its title (front matter "
                             "`title:`); start the page without a '# ' heading")
            for check_id in self.data.checks:
                if check_id not in self.placed_checks:
                    self.problem(f'check("{check_id}")', "declared in the page's data but never placed on the page")
            from .header import lesson_header

            return lesson_header(self, markdown) + "\n\n" + markdown
        except _ANSWERABLE as exc:
            self.problem("(page header)", str(exc))
            return markdown

    def structured_data(self, words: int) -> str:
        """The page's JSON-LD: a LearningResource, plus FAQPage when it has questions."""
        if not self.meta.lesson:
            return ""
        try:
            steps, install, download = facts.hands_on_seconds(self.run, self.lab)
            faq = [(e.q, plain_text(self.render_text(e.a))) for e in self.data.faq]
            return jsonld(self.meta.title or self.lesson, self.meta.summary or "",
                          facts.iso_duration(steps + install + download + 60 * facts.reading_minutes(words)),
                          self.run.record.started[:10], faq)
        except _ANSWERABLE as exc:
            self.problem("(structured data)", str(exc))
            return ""


class FigureData:
    """What a figure's draw(fig, data) may read: values by name, in a unit of its choosing."""

    def __init__(self, context: PageContext) -> None:
        self._context = context
        self.run = context.run

    def value(self, reference: str, unit: str | None = None) -> float:
        """A recorded value (or an expression over values) as a float, optionally converted."""
        q = self._context.evaluate(reference)
        return q.to(unit).value if unit else q.value


_TEXT_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
