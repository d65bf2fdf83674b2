"""The authors' view of the records: how fresh each lesson's numbers are, and every run so far.

`freshness()` lists each lesson of the outline with its newest good run (date, GPU, engine
versions, age), what needs attention (pages pinned behind it, a newer run that failed, no run at
all, a newer engine release on the package index as `course outdated` last found and kept in
`.cache/releases.json`: the build never asks the index itself), then, per lesson, the time and
peak GPU memory of each step, longest first, like sphinx-gallery's execution-times page. A step's
peak memory is the value it captured as `peak_gpu_memory` (unit B); a step that captured none
shows "—".

`run_histories()` shows every recorded run of every lesson, newest first.
"""

from __future__ import annotations

import html
import os
from datetime import UTC, date, datetime

from ..record.models import Run, StepRecord, run_order
from ..record.releases import Releases, is_newer, load_releases
from ..record.store import Store
from ..record.units import convert
from . import facts
from .choose import newest_page_run
from .context import PageContext
from .format import duration, format_number
from .history import runs_table
from .lessons import scan
from .macros import macro
from .outline import Lesson

PEAK = "peak_gpu_memory"
"""The value a step captures to report its peak GPU memory (in B or another unit of bytes)."""


def today() -> date:
    """The build's date: SOURCE_DATE_EPOCH when set (a reproducible build), else today (UTC)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return moment.date()


def age_text(run: Run, on: date) -> str:
    """'today', '1 day', '12 days' since the run started."""
    days = (on - datetime.fromisoformat(run.record.started).date()).days
    return "today" if days <= 0 else f"{days} day{'s' if days != 1 else ''}"


def peak_text(step: StepRecord) -> str:
    """The step's captured peak GPU memory in GiB, or '—'."""
    found = step.values.get(PEAK)
    if found is None or isinstance(found.value, str):
        return "—"
    gib = convert(float(found.value), found.unit if found.unit != "none" else "B", "GiB")
    return f"{format_number(gib, 2)}\u00a0GiB"


def _notes(
    lesson: Lesson,
    runs: list[Run],
    newest: Run | None,
    pinned: list[tuple[str, str, str]],
    releases: Releases | None = None,
) -> list[str]:
    """What needs an author's attention; `pinned` is (page, lesson, run) of every pinned page."""
    notes = []
    if not lesson.written:
        notes.append("no page yet (coming)")
    if newest is None:
        notes.append(f"no good run: `course run {lesson.id}` on a GPU machine")
    elif runs and runs[-1].run_id != newest.run_id:
        last = runs[-1]
        elsewhere = f" on {last.gpu_name}" if last.gpu_name != newest.gpu_name else ""
        notes.append(f"newer run {last.run_id} {last.record.status}{elsewhere}")
    for src, pinned_lesson, run_id in pinned:
        if pinned_lesson == lesson.id and newest and run_order(run_id) < run_order(newest.run_id):
            notes.append(f"docs/{src} is pinned behind, to {run_id}")
    if newest is not None and releases is not None:
        for name, recorded in sorted(newest.record.engine.items()):
            known = releases.engines.get(name)
            if known is not None and is_newer(known.newest, recorded):
                notes.append(
                    f"newer release: {name} {known.newest} (checked on {releases.checked_on})"
                )
    return notes


@macro
def freshness(ctx: PageContext) -> str:
    """Each lesson's newest good run (on its lab's card: the one its page shows unpinned), its
    age and warnings, then each step's time and peak GPU memory."""
    store = Store(ctx.root / "build")
    on = today()
    pinned = [
        (entry.src, entry.meta.lesson, entry.meta.run)
        for entry in scan(ctx.root / "docs")
        if entry.meta.lesson and entry.meta.run
    ]
    releases = load_releases(ctx.root)
    rows, sections = [], []
    for lesson in ctx.outline.lessons:
        runs = store.runs(lesson.id)
        newest = newest_page_run(store, lesson.id)  # on its lab's card
        notes = (
            "; ".join(html.escape(n) for n in _notes(lesson, runs, newest, pinned, releases)) or "—"
        )
        name = html.escape(f"{lesson.number} {lesson.title}")
        if newest is None:
            rows.append(f"<tr><td>{name}</td>" + "<td>—</td>" * 5 + f"<td>{notes}</td></tr>")
            continue
        cells = [
            name,
            f"<code>{html.escape(newest.run_id)}</code>",
            html.escape(facts.checked_on(newest)),
            html.escape(facts.gpu_name(newest) or "no GPU"),
            html.escape(facts.engine_text(newest)),
            html.escape(age_text(newest, on)),
            notes,
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        sections.append(_steps(lesson, newest))
    head = ["lesson", "newest good run", "date", "GPU", "engine", "age", "needs attention"]
    summary = _table(head, rows, "Freshness of every lesson")
    return summary + "\n\n" + "\n\n".join(sections)


def _steps(lesson: Lesson, run: Run) -> str:
    """A lesson's steps, longest first: time, share of the run, peak GPU memory."""
    steps = sorted(run.record.steps, key=lambda s: -(s.seconds or 0.0))
    total = sum(s.seconds or 0.0 for s in steps)
    rows = []
    for step in steps:
        seconds = step.seconds or 0.0
        share = f"{format_number(100 * seconds / total, 0)}\u00a0%" if total else "—"
        status = step.status + (f" from {step.reused_from}" if step.reused_from else "")
        cells = [
            f"<code>{html.escape(step.id)}</code>",
            html.escape(step.title or ""),
            "GPU" if step.needs == "gpu" else "any",
            html.escape(status),
            html.escape(duration(seconds)),
            share,
            peak_text(step),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    rows.append(
        f"<tr><td><strong>all steps</strong></td><td></td><td></td><td></td>"
        f"<td><strong>{html.escape(duration(total))}</strong></td><td></td><td></td></tr>"
    )
    head = ["step", "what it does", "needs", "status", "time", "share", "peak GPU memory"]
    heading = f"## {lesson.number} {lesson.title} {{ #{lesson.id} }}"
    intro = f"Run <code>{html.escape(run.run_id)}</code>, {html.escape(facts.checked_on(run))}."
    return f"{heading}\n\n{intro}\n\n" + _table(head, rows, f"Steps of {lesson.number}")


def _table(head: list[str], rows: list[str], label: str) -> str:
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return (
        '<div class="course-history md-typeset__scrollwrap" tabindex="0" role="region" '
        f'aria-label="{html.escape(label, quote=True)}"><div class="md-typeset__table"><table>'
        f"<thead>{header}</thead><tbody>{''.join(rows)}</tbody></table></div></div>"
    )


@macro
def run_histories(ctx: PageContext) -> str:
    """Every recorded run of every lesson in the outline, newest first."""
    store = Store(ctx.root / "build")
    sections = []
    for lesson in ctx.outline.lessons:
        runs = store.runs(lesson.id)
        if not runs:
            continue
        newest = newest_page_run(store, lesson.id)
        heading = f"## {lesson.number} {lesson.title} {{ #{lesson.id} }}"
        shown = newest.run_id if newest else None
        table = runs_table(runs, shown, {}, f"Runs of {lesson.number}", authors=True)
        shown_mark = table.replace(" (this page)", " (the page's)")  # its newest good on its card
        sections.append(f"{heading}\n\n{shown_mark}")
    return "\n\n".join(sections) or "No lesson has a recorded run yet."
