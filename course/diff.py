"""Two runs of a lesson side by side: values moved, host and engine changes, claims broken.

The page-side comparisons (claims, checks' revealed answers, figures) come from a callable that
evaluates the lesson's pages against one run (`pages.evaluate.evaluate_pages`); pages that could
not be evaluated on a run are named, never left out silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from .errors import RecordError
from .pages.evaluate import KEPT, PageSide
from .pages.format import change as change_text
from .pages.format import recorded
from .record.models import Run, Value
from .record.store import Store


@dataclass
class ValueChange:
    """One captured value in both runs."""

    name: str
    old: Value | None
    new: Value | None

    @property
    def relative(self) -> float | None:
        """(new - old) / |old| for numbers of one unit; None when not comparable."""
        if self.old is None or self.new is None or self.old.unit != self.new.unit:
            return None
        a, b = self.old.value, self.new.value
        if isinstance(a, str) or isinstance(b, str):
            return None
        if a == 0:
            return 0.0 if b == 0 else float("inf")
        return (b - a) / abs(a)

    @property
    def moved(self) -> bool:
        """Whether the value differs between the runs."""
        return (self.old.value if self.old else None) != (self.new.value if self.new else None)

    def sort_key(self) -> tuple[int, float]:
        """Added, removed and changed text first, then by how far the number moved."""
        rel = self.relative
        if rel is None:
            return (0, 0.0) if self.moved else (2, 0.0)
        return (1, -abs(rel))


@dataclass
class ClaimOutcome:
    """One claim of one page, checked on both runs."""

    page: str
    text: str
    condition: str
    held_before: bool
    holds_now: bool
    values_before: dict[str, str] = field(default_factory=dict)
    values_now: dict[str, str] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        """Held on the old run, fails on the new one."""
        return self.held_before and not self.holds_now


PagesEvaluator = Callable[[Run], PageSide]


@dataclass
class Report:
    """Everything `course diff` says."""

    lesson: str
    old: str
    new: str
    values: list[ValueChange]
    host: list[tuple[str, str, str]]
    engine: list[tuple[str, str, str]]
    claims: list[ClaimOutcome] = field(default_factory=list)
    reveals: list[tuple[str, str, str]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    """Pages or figures that could not be evaluated on one of the runs, each with why."""
    notes: tuple[str | None, str | None] = (None, None)
    """The two runs' notes (`course run --note`)."""

    @property
    def notes_line(self) -> str | None:
        """'note: "vocab 4096" → "vocab 8192"' when either run has a note."""
        if self.notes == (None, None):
            return None
        old, new = (f'"{n}"' if n is not None else "—" for n in self.notes)
        return f"note: {old} → {new}"

    @property
    def all_hold(self) -> bool:
        """Whether every claim holds on the new run, and every page could be evaluated on it."""
        new = f"on {self.new}:"
        return all(c.holds_now for c in self.claims) and not any(new in u for u in self.unread)


def pick_runs(store: Store, lesson: str, run_a: str | None, run_b: str | None) -> tuple[Run, Run]:
    """The two runs to compare: as named, or the two newest good runs."""
    if run_a and run_b:
        return store.get(lesson, run_a), store.get(lesson, run_b)
    good = [r for r in store.runs(lesson) if r.good]
    if run_a:
        newer = good[-1] if good else None
        if newer is None or newer.run_id == run_a:
            raise RecordError(f"'{lesson}': no newer good run to compare {run_a} with")
        return store.get(lesson, run_a), newer
    if len(good) < 2:
        found = ", ".join(r.run_id for r in good) or "none"
        raise RecordError(
            f"'{lesson}' needs two good runs to compare (good runs: {found}); name them explicitly"
        )
    return good[-2], good[-1]


def _values(run: Run) -> dict[str, Value]:
    return {f"{s.id}.{n}": v for s in run.record.steps for n, v in s.values.items()}


def _flat(data: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(data, dict):
        out: dict[str, str] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): "—" if data is None else str(data)}


def _changes(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    keys = sorted(set(old) | set(new))
    return [(k, old.get(k, "—"), new.get(k, "—")) for k in keys if old.get(k) != new.get(k)]


def compare(old: Run, new: Run, pages: PagesEvaluator | None = None) -> Report:
    """Compare two runs of one lesson."""
    a, b = _values(old), _values(new)
    values = sorted(
        (ValueChange(n, a.get(n), b.get(n)) for n in sorted(set(a) | set(b))),
        key=ValueChange.sort_key,
    )
    report = Report(
        lesson=new.record.lesson,
        old=old.run_id,
        new=new.run_id,
        values=values,
        host=_changes(_flat(old.record.host), _flat(new.record.host)),
        engine=_changes(_flat(old.record.engine), _flat(new.record.engine)),
        notes=(old.record.note, new.record.note),
    )
    if pages is not None:
        before, now = pages(old), pages(new)
        earlier = {(p, c, t): (h, v) for p, t, c, h, v in before.claims}
        for page, text, condition, holds, read in now.claims:
            held, read_before = earlier.get((page, condition, text), (True, {}))
            report.claims.append(
                ClaimOutcome(page, text, condition, held, holds, read_before, read)
            )
        report.claims.sort(key=lambda c: (not c.broken, c.holds_now, c.page))
        for key in sorted(set(before.reveals) | set(now.reveals)):
            if before.reveals.get(key) != now.reveals.get(key):
                report.reveals.append(
                    (key, before.reveals.get(key, "—"), now.reveals.get(key, "—"))
                )
        report.unread = before.unread + now.unread
        moved = {c.name for c in values if c.moved} | _kept_files_moved(old, new)
        report.figures = sorted(f for f, uses in now.figures.items() if moved & set(uses))
    return report


def _kept_files_moved(old: Run, new: Run) -> set[str]:
    """The kept files (`file:step/path`) whose content differs between two runs."""

    def hashes(run: Run) -> dict[str, str]:
        return {f"{KEPT}{s.id}/{f.path}": f.sha256 for s in run.record.steps for f in s.files}

    before, after = hashes(old), hashes(new)
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def shown(value: Value | None) -> str:
    """A value with its unit, as the diff prints it."""
    return "—" if value is None else recorded(value.value, value.unit)


def percent(rel: float | None) -> str:
    """A relative change as a signed percentage (the one number format: `pages.format`)."""
    return change_text(rel)


def render_console(report: Report, console: Console, all_values: bool = False) -> None:
    """The diff as rich tables in the terminal."""
    console.print(f"[bold]{report.lesson}[/]: {report.old} → {report.new}")
    if report.notes_line:
        console.print(report.notes_line, highlight=False, markup=False)
    for title, rows in (("Host", report.host), ("Engine", report.engine)):
        if rows:
            table = Table(title=title, title_justify="left")
            for col in ("", "old", "new"):
                table.add_column(col)
            for row in rows:
                table.add_row(*row)
            console.print(table)
    table = Table(title="Values (most moved first)", title_justify="left")
    for col in ("value", "old", "new", "change"):
        table.add_column(col, justify="right" if col != "value" else "left")
    for change in report.values:
        if change.moved or all_values:
            table.add_row(
                change.name, shown(change.old), shown(change.new), percent(change.relative)
            )
    console.print(table)
    unchanged = sum(1 for c in report.values if not c.moved)
    console.print(f"{len(report.values) - unchanged} values moved, {unchanged} unchanged")
    if report.claims:
        table = Table(title="Claims (held before and fail now first)", title_justify="left")
        for col in ("page", "claim", "before", "now", "values now"):
            table.add_column(col)
        for c in report.claims:
            now = "[green]holds" if c.holds_now else "[bold red]FAILS"
            before = "holds" if c.held_before else "failed"
            read = ", ".join(f"{k} = {v}" for k, v in c.values_now.items())
            table.add_row(c.page, c.text, before, now, read)
        console.print(table)
    for key, old, new in report.reveals:
        console.print(f"check {key}: revealed answer {old} → {new}")
    for figure in report.figures:
        console.print(f"figure will change: {figure}")
    for why in report.unread:
        console.print(f"[bold red]not evaluated:[/] {why}", highlight=False)
    broken = sum(1 for c in report.claims if not c.holds_now)
    console.print(
        f"{len(report.claims) - broken} of {len(report.claims)} claims hold on {report.new}"
    )


def render_markdown(report: Report) -> str:
    """The diff as Markdown, for a pull request."""
    lines = [f"## `course diff {report.lesson}`: {report.old} → {report.new}", ""]
    lines += [report.notes_line, ""] if report.notes_line else []
    for title, rows in (("Host", report.host), ("Engine", report.engine)):
        if rows:
            lines += [f"### {title}", "", "| | old | new |", "| --- | --- | --- |"]
            lines += [f"| {k} | {o} | {n} |" for k, o, n in rows] + [""]
    lines += [
        "### Values (most moved first)",
        "",
        "| value | old | new | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| `{c.name}` | {shown(c.old)} | {shown(c.new)} | {percent(c.relative)} |"
        for c in report.values
        if c.moved
    ]
    lines.append("")
    if report.claims:
        lines += ["### Claims", "", "| page | claim | before | now |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {c.page} | {c.text} | {'holds' if c.held_before else 'failed'} | "
            f"{'holds' if c.holds_now else '**fails**'} |"
            for c in report.claims
        ]
        lines.append("")
    if report.reveals:
        lines += ["### Checks whose revealed answer changes", ""]
        lines += [f"- {k}: {o} → {n}" for k, o, n in report.reveals] + [""]
    if report.figures:
        lines += ["### Figures that will change", ""] + [f"- {f}" for f in report.figures] + [""]
    if report.unread:
        lines += ["### Not evaluated", ""] + [f"- {u}" for u in report.unread] + [""]
    return "\n".join(lines)


def to_json(report: Report) -> str:
    """The diff as JSON, for a script."""
    data = {
        "lesson": report.lesson,
        "old": report.old,
        "new": report.new,
        "notes": {"old": report.notes[0], "new": report.notes[1]},
        "values": [
            {
                "name": c.name,
                "old": c.old.model_dump() if c.old else None,
                "new": c.new.model_dump() if c.new else None,
                "relative": c.relative,
                "moved": c.moved,
            }
            for c in report.values
        ],
        "host": [dict(zip(("field", "old", "new"), row, strict=False)) for row in report.host],
        "engine": [
            dict(zip(("package", "old", "new"), row, strict=False)) for row in report.engine
        ],
        "claims": [asdict(c) | {"broken": c.broken} for c in report.claims],
        "reveals": [
            dict(zip(("check", "old", "new"), row, strict=False)) for row in report.reveals
        ],
        "figures": report.figures,
        "not_evaluated": report.unread,
        "all_claims_hold": report.all_hold,
    }
    return json.dumps(data, indent=2, sort_keys=True, default=str)
