"""One page being built: its front matter, the run it shows, its lab and data, the problems found.

A `PageContext` is state only; the macros that read it are in `macros.py`, and the page as a whole
(header, structured data, rendering without HTML) in `render.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CourseError, PageError
from ..lab.load import LoadedLab, load_lab
from ..record.expression import Expression
from ..record.models import Run
from ..record.quantity import ExprError, Quantity
from ..record.store import Store
from .choose import missing_run_mark, page_run
from .claims import ClaimResult
from .faq import PageData, data_file, load_page_data
from .lessons import LessonMeta
from .outline import Outline, load_outline


@dataclass(frozen=True)
class Problem:
    """One thing that stops the build: the page, the macro call and what was expected."""

    page: str
    call: str
    message: str

    def __str__(self) -> str:
        return f"{self.page}: {self.call}: {self.message}"


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
    figure_cache: Path | None = None
    """Where drawn figures are kept between builds (`<cache>/figures`); None: draw every time."""
    given_run: Run | None = None
    """The run to show instead of the chosen one (`course diff` evaluates a page on two runs)."""
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What `course check` warns about on this page without failing (a terminal line too wide,
    where `widgets.WIDE_LINES_FAIL` is off)."""
    placed_checks: list[str] = field(default_factory=list)
    claim_results: list[ClaimResult] = field(default_factory=list)
    """Every claim checked on the page, in order (for `course diff`)."""
    within: list[str] = field(default_factory=list)
    """What the macros run now sit in, innermost last ("check 'grows' in docs/x.yml"): a problem
    of a macro inside a data file's string names it."""
    reveals: dict[str, str] = field(default_factory=dict)
    """Check id -> the measured answer a predict check reveals, as HTML (for `course diff`)."""
    words: int | None = None
    """Words of prose once the macros ran (the header's reading time; the landing page's)."""
    headline: str | None = None
    """The front matter's headline number, formatted (the social card shows it)."""
    _outline: Outline | None = None
    _run: Run | None = None
    _lab: LoadedLab | None = None
    _data: PageData | None = None

    @property
    def page(self) -> str:
        """The page as messages name it."""
        return f"docs/{self.src}"

    def problem(self, call: str, message: str) -> None:
        """Collect a problem; one that repeats an earlier message of the page is left out.

        A missing run is reported once, at the first call that needed it, not by every call.
        """
        missing = missing_run_mark(self.meta.lesson) if self.meta.lesson else None
        if missing and missing in message and any(missing in p.message for p in self.problems):
            return
        if all(p.message != message for p in self.problems):
            self.problems.append(Problem(self.page, call, message))

    @property
    def lesson(self) -> str:
        """The page's lesson; PageError when its front matter names none."""
        if not self.meta.lesson:
            raise PageError("this page names no lesson: add `lesson: <name>` to its front matter")
        return self.meta.lesson

    @property
    def outline(self) -> Outline:
        """The course outline (docs/course.yml) of the page's project."""
        if self._outline is None:
            self._outline = load_outline(self.root / "docs")
        return self._outline

    @property
    def run(self) -> Run:
        """The run the page shows: the one given, else the one `choose.page_run` picks."""
        if self._run is None:
            self._run = self.given_run or page_run(
                Store(self.root / "build"), self.lesson, self.meta.run
            )
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

    @property
    def data_label(self) -> str:
        """Where the page's checks, FAQ and glossary are written, as messages name it."""
        if data_file(self.root / "docs", self.src).is_file():
            return f"docs/{Path(self.src).with_suffix('.yml').as_posix()}"
        return f"the front matter of {self.page}"

    @contextmanager
    def inside(self, what: str) -> Iterator[None]:
        """Run macros on behalf of `what` (a check, a question): their problems name it."""
        self.within.append(what)
        try:
            yield
        finally:
            self.within.pop()

    def lookup(self, reference: str) -> Quantity:
        """`step.name` of the page's run as a Quantity (a timed value with its spread)."""
        step, dot, name = reference.partition(".")
        if not dot:
            raise ExprError(f"{reference!r} is not a recorded value (expected step.name)")
        try:
            recorded = self.run.value(step, name)
        except CourseError as exc:  # a missing run or value: the claim or macro says which
            raise ExprError(f"{exc}{self._minus_hint(step, name)}") from None
        if recorded.type == "str" or isinstance(recorded.value, str):
            return Quantity(float("nan"), "none", (reference,), False, str(recorded.value))
        integral = recorded.type == "int"
        return Quantity(
            float(recorded.value), recorded.unit, (reference,), integral, spread=recorded.spread
        )

    def _minus_hint(self, step: str, name: str) -> str:
        """For `4096-size.layers`, read as step '4096-size': the subtraction it probably is."""
        steps = {s.id for s in self.run.record.steps}
        if step in steps or "-" not in step:
            return ""
        for cut in range(len(step)):
            head, rest = step[:cut], step[cut + 1 :]
            if step[cut] == "-" and rest in steps:
                return f" (to subtract, put spaces around '-': '{head} - {rest}.{name}')"
        return ""

    def evaluate(self, expression: str) -> Quantity:
        """An expression over recorded values that gives a value, not a condition."""
        result = Expression.parse(expression).evaluate(self.lookup)
        if isinstance(result, bool):
            raise ExprError(f"{expression!r} is a condition; use claim() for conditions")
        return result

    def holds(self, condition: str) -> bool:
        """A condition over recorded values."""
        result = Expression.parse(condition).evaluate(self.lookup)
        if not isinstance(result, bool):
            raise ExprError(f"'when: {condition}' gives a number, not true or false")
        return result

    def to_root(self) -> str:
        """The relative path from this page to the site root ('' or '../' ...)."""
        return "../" * self.url.count("/")


class FigureData:
    """What a figure's `draw(fig, data)` may read, each read noted (docs/writing-a-lesson.md):

        data.value("step.name", unit="MiB")          a recorded value, or an expression, as a float
        data.kept("step", "results/x.json")          the path of a file the step kept, in the record
        data.kept_json("step", "results/x.json")     that file, parsed as JSON
        data.run                                     the whole Run (its record and folder)

    `reads` is what the drawing depends on: the figure cache's key (`figures.py`) and the
    figures `course diff` says will change.
    """

    def __init__(self, context: PageContext) -> None:
        self._context = context
        self.reads: dict[tuple[str, ...], str] = {}
        """(kind, what...) -> what was read: ('value', expr, unit) -> the number and its unit,
        ('file', step, path) -> the kept file's sha256, ('run',) -> the run id."""

    @property
    def run(self) -> Run:
        """The run itself; a figure that reads it is drawn again for every new run."""
        self.reads[("run",)] = self._context.run.run_id
        return self._context.run

    def value(self, reference: str, unit: str | None = None) -> float:
        """A recorded value (or an expression over values) as a float, optionally converted."""
        q = self._context.evaluate(reference)
        q = q.to(unit) if unit else q
        self.reads[("value", reference, unit or "")] = f"{q.value!r} {q.unit}"
        return q.value

    def kept(self, step: str, path: str) -> Path:
        """Where a file that `step` kept (its `files:` in lab.yml) lies in the page's run."""
        run = self._context.run
        kept = {f.path: f for f in run.record.step(step).files}
        if path not in kept:
            listed = ", ".join(sorted(kept)) or "none"
            raise PageError(
                f"step '{step}' of run {run.run_id} kept no file '{path}' (its kept files: "
                f"{listed}; a step keeps the files listed under its `files:` in lab.yml)"
            )
        found = run.kept_file(step, path)
        if not found.is_file():
            raise PageError(f"run {run.run_id}: {found} is missing from the record")
        self.reads[("file", step, path)] = kept[path].sha256
        return found

    def kept_json(self, step: str, path: str) -> Any:
        """A file that `step` kept, parsed as JSON."""
        found = self.kept(step, path)
        try:
            return json.loads(found.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            run_id = self._context.run.run_id
            raise PageError(f"{step}/{path} of run {run_id} is not JSON: {exc}") from None

    def unchanged(self, reads: dict[tuple[str, ...], str]) -> bool:
        """Whether reading the same things from this page's run gives what `reads` holds."""
        probe = FigureData(self._context)
        try:
            for key in reads:
                if key[0] == "value":
                    probe.value(key[1], key[2] or None)
                elif key[0] == "file":
                    probe.kept(key[1], key[2])
                elif key[0] == "run":
                    probe.run  # noqa: B018 - reading it notes it
                else:
                    return False
        except CourseError:
            return False
        return probe.reads == reads
