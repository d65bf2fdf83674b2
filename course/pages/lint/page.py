"""One lesson page checked: its macros rendered once with markers, then every check of its text,
its front matter, its Sources and its data file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from ...errors import FactsError
from ...lab.facts import Facts, load_facts
from ...record.store import Store
from ..claims import plain_text
from ..context import PageContext, Problem
from ..faq import data_file
from ..lessons import PageEntry, split_front_matter
from ..macros import ANSWERABLE
from ..render import render_page
from .checks import fit_counts, same_values, tooling_phrases, typed_copies, units_twice
from .data import data_strings, placed
from .dates import typed_run_dates
from .findings import Finding
from .marked import OK, TYPED_OK, Marks, Prose, Span, marking, marking_macros, plain_prose, unmark
from .marked import prose as to_prose
from .numbers import Known, known_quantities
from .settings import Settings
from .sources import source_addresses
from .tooltips import fact_tooltips

_DATA_MACROS = frozenset({"check", "faq", "glossary"})
"""Macros that print the page's data file: what they print is checked in that file."""


@dataclass
class CheckedPage:
    """A page rendered for `course check`: the problems of its macros and what the checks found."""

    problems: list[Problem] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    context: PageContext | None = None
    """The page as rendered (its run and lab, for the checks of its zip)."""


def check_page(root: Path, entry: PageEntry, settings: Settings) -> CheckedPage:
    """Render a page once (its macros' problems, as the build finds them) and check its text."""
    path = root / "docs" / entry.src
    text = path.read_text(encoding="utf-8")
    _, body = split_front_matter(text)
    first_line = text.count("\n", 0, len(text) - len(body)) + 1
    marks = Marks()
    rendered = render_page(root, entry, how=marking(first_line, marks))
    ctx = rendered.context
    problems = [_unmarked(p) for p in ctx.problems]
    for result in ctx.claim_results:
        result.text = unmark(result.text)
    if not entry.meta.lesson or rendered.text is None:
        return CheckedPage(problems, context=ctx)
    shown = f"docs/{entry.src}"
    try:
        known = known_quantities(ctx)
    except ANSWERABLE:  # no run: the page's problems say so
        known = []
    phrases = settings.tooling.regex()
    data = data_file(root / "docs", entry.src)
    data_text = data.read_text(encoding="utf-8") if data.is_file() else ""
    front = text[: len(text) - len(body)]

    def in_data(span: Span | None, phrase: str) -> bool:
        return (
            span is not None and span.macro in _DATA_MACROS and phrase.lower() in data_text.lower()
        )

    prose = to_prose(shown, rendered.text, marks, first_line)
    header = plain_prose(shown, front, 1)
    findings = [
        *typed_copies(header, known),
        *tooling_phrases(header, phrases),
        *tooling_phrases(
            _lesson_header(shown, rendered.markdown, unmark(rendered.text)),
            phrases,
            lambda span, phrase: phrase.lower() in front.lower(),  # reported in the front matter
        ),
        *typed_copies(prose, known),
        *units_twice(prose),
        *same_values(prose),
        *fit_counts(prose, settings.fit),
        *tooling_phrases(prose, phrases, in_data),
        *typed_run_dates(prose, _run_days(root, ctx.lesson)),
        *source_addresses(shown, body, first_line),
        *fact_tooltips(shown, body, first_line, _facts(root), phrases),
    ]
    if data_text:
        findings += _data_findings(ctx, data, known, settings)
    return CheckedPage(problems, sorted(findings, key=lambda f: (f.file, f.line, f.check)), ctx)


def _run_days(root: Path, lesson: str) -> dict[str, list[str]]:
    """The day (YYYY-MM-DD) of each of the lesson's recorded runs, with their ids."""
    days: dict[str, list[str]] = {}
    for run in Store(root / "build").runs(lesson):
        days.setdefault(run.record.started[:10], []).append(run.run_id)
    return days


def _facts(root: Path) -> Facts | None:
    """The course's facts, or None where there are none (a page using fact() reports it)."""
    try:
        return load_facts(root)
    except FactsError:
        return None


def _lesson_header(shown: str, finished: str | None, body: str) -> Prose:
    """The header the build puts above the page (its facts, cost and progress), as printed by a
    macro at the front matter's first line."""
    at = finished.find(body) if finished else -1
    text = plain_text(finished[:at]) if finished and at > 0 else ""
    return Prose(
        shown, text, [1] * len(text), [False] * len(text), [Span(0, len(text), "lesson_header", 1)]
    )


def _unmarked(problem: Problem) -> Problem:
    return Problem(problem.page, unmark(problem.call), unmark(problem.message))


def _data_findings(
    ctx: PageContext, path: Path, known: list[Known], settings: Settings
) -> list[Finding]:
    """The checks of each readable string of the page's data file, at its line."""
    shown = f"docs/{Path(ctx.src).with_suffix('.yml').as_posix()}"
    lines = path.read_text(encoding="utf-8").split("\n")
    phrases = settings.tooling.regex()
    found: list[Finding] = []
    for string in data_strings(path):
        marks = Marks()
        marked = _render(ctx, string.text, marks)
        if marked is None:
            continue
        prose = to_prose(shown, marked, marks, string.first)
        where = f"{string.label}: "
        for finding in (
            typed_copies(prose, known, where)
            + units_twice(prose, where)
            + same_values(prose, where)
            + fit_counts(prose, settings.fit, where)
            + tooling_phrases(prose, phrases, where=where)
        ):
            found.append(placed(finding, lines, string))
    return found


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


def _render(ctx: PageContext, text: str, marks: Marks) -> str | None:
    """A data file's string with its macros run and marked; None when it cannot be rendered (the
    page's check has reported why)."""
    if "{" not in text:
        return TYPED_OK.sub(OK, text)  # no macro: nothing to run
    before = list(ctx.problems)
    try:
        return _ENV.from_string(TYPED_OK.sub(OK, text)).render(**marking_macros(ctx, marks))
    except (jinja2.TemplateError, *ANSWERABLE):
        return None
    finally:
        ctx.problems[:] = before  # reported once, by the page's own rendering
