"""Two runs of a lesson side by side: values moved beyond their spread or within noise, sizes and
counts changed, lab inputs, host and engine changes, claims broken (`record/noise.py` classes the
values).

The page-side comparisons (claims, checks' revealed answers, figures) come from a callable that
evaluates the lesson's pages against one run (`pages.evaluate.evaluate_pages`); pages that could
not be evaluated on a run are named, never left out silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import RecordError
from ..pages.evaluate import KEPT, PageSide
from ..record.changes import part_changes
from ..record.models import Run, Value
from ..record.noise import DEFAULT_TOLERANCE, Rules, Verdict, classify
from ..record.store import Store
from ..record.units import SCALE, convert


@dataclass
class ValueChange:
    """One captured value in both runs."""

    name: str
    old: Value | None
    new: Value | None
    verdict: Verdict = Verdict("unchanged")

    @property
    def relative(self) -> float | None:
        """(new - old) / |old| for numbers of one dimension; None when not comparable."""
        if self.old is None or self.new is None:
            return None
        a, b = self.old.value, self.new.value
        if isinstance(a, str) or isinstance(b, str) or not same_dimension(self.old, self.new):
            return None
        b = convert(b, self.new.unit, self.old.unit)
        if a == 0:
            return 0.0 if b == 0 else float("inf")
        return (b - a) / abs(a)

    @property
    def differs(self) -> bool:
        """Whether the value differs between the runs at all (noise included)."""
        old, new = self.old, self.new
        return (old.value, old.unit) != (new.value, new.unit) if old and new else old != new

    def sort_key(self) -> tuple[int, float]:
        """Added, removed and changed text first, then by how far the number moved."""
        rel = self.relative
        if rel is None:
            return (0, 0.0) if self.differs else (2, 0.0)
        return (1, -abs(rel))


def same_dimension(a: Value, b: Value) -> bool:
    """Whether two values' units measure one thing (ms and s; not ms and tok/s)."""
    return SCALE.get(a.unit, ("?",))[0] == SCALE.get(b.unit, ("!",))[0]


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
    line: int | None = None
    """The line of the page where the claim is written."""

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
    inputs: list[tuple[str, str]] = field(default_factory=list)
    """(step, what of its lab inputs changed): its definition, its input files."""
    tolerance: float = DEFAULT_TOLERANCE
    """How far a timed value without a recorded spread may move within noise."""
    rules: Rules = field(default_factory=Rules)
    """What the lab declares about its values (`pages.evaluate.rules_of`): the noise between
    hosts, for all values and by pattern; the values that vary from run to run."""

    @property
    def between_hosts(self) -> float:
        """The lab's declared noise between hosts (a fraction; lab.yml `noise.between_hosts`)."""
        return self.rules.between_hosts

    @property
    def notes_line(self) -> str | None:
        """'note: "vocab 4096" → "vocab 8192"' when either run has a note."""
        if self.notes == (None, None):
            return None
        old, new = (f'"{n}"' if n is not None else "—" for n in self.notes)
        return f"note: {old} → {new}"

    def count(self, kind: str) -> int:
        """How many values have this verdict ('moved', 'noise', 'changed', 'unchanged'...)."""
        return sum(1 for c in self.values if c.verdict.kind == kind)

    @property
    def without_spread(self) -> int:
        """How many values that differ were judged by the tolerance, for want of a spread."""
        return sum(1 for c in self.values if c.verdict.no_spread)

    @property
    def within_hosts(self) -> int:
        """How many values had their quartiles apart but moved within the noise between hosts."""
        return sum(1 for c in self.values if c.verdict.between_hosts)

    @property
    def within_hosts_by_pattern(self) -> int:
        """How many of `within_hosts` a `noise.values` pattern allowed (not `between_hosts`)."""
        return sum(
            1 for c in self.values if c.verdict.between_hosts and self.rules.host_noise(c.name)[1]
        )

    @property
    def facts(self) -> int:
        """How many values not judged are facts of the host (a build's date and duration)."""
        return sum(
            1 for c in self.values if c.verdict.kind == "chance" and c.name in self.rules.facts
        )

    @property
    def all_hold(self) -> bool:
        """Whether every claim holds on the new run, and every page could be evaluated on it."""
        new = f"on {self.new}:"
        return all(c.holds_now for c in self.claims) and not any(new in u for u in self.unread)


def pick_runs(
    store: Store, lesson: str, run_a: str | None, run_b: str | None, card: str | None = None
) -> tuple[Run, Run]:
    """The two runs to compare: as named, or the two newest good runs (on a GPU of kind `card`,
    when given: the card the lab asks for)."""
    if run_a and run_b:
        return store.get(lesson, run_a), store.get(lesson, run_b)
    good = store.good_runs(lesson, card)
    if run_a:
        newer = good[-1] if good else None
        if newer is None or newer.run_id == run_a:
            raise RecordError(f"'{lesson}': no newer good run to compare {run_a} with")
        return store.get(lesson, run_a), newer
    if len(good) < 2:
        found = ", ".join(r.run_id for r in good) or "none"
        on = f" on {card} (the card its lab asks for)" if card else ""
        raise RecordError(
            f"'{lesson}' needs two good runs{on} to compare (good runs{' on it' if card else ''}: "
            f"{found}); name them explicitly"
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


def _inputs(old: Run, new: Run) -> list[tuple[str, str]]:
    """Each step whose lab inputs (its definition, its input files) differ between the runs."""
    before = {s.id: s.hash_parts for s in old.record.steps}
    found = []
    for step in new.record.steps:
        parts = before.get(step.id)
        if parts is None:
            found.append((step.id, "a new step"))
            continue
        same_host = step.hash_parts.model_copy(update={"engine": parts.engine, "gpu": parts.gpu})
        if changes := part_changes(same_host, parts).reasons():
            found.append((step.id, "; ".join(changes)))
    ids = {s.id for s in new.record.steps}
    return found + [(step, "no longer in the lab") for step in before if step not in ids]


def compare(
    old: Run,
    new: Run,
    pages: PagesEvaluator | None = None,
    rules: Rules | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Report:
    """Compare two runs of one lesson; `rules` are what lab.yml declares about its values
    (`scales: exact`, `scales: free`, its noise between hosts, for all and by pattern) and its
    builds' dates and durations, `tolerance` is for timed values without a spread
    (`record/noise.py`)."""
    a, b = _values(old), _values(new)
    rules = rules or Rules()

    def verdict(n: str) -> Verdict:
        exact, varies, hosts = n in rules.exact, rules.varies(n), rules.host_noise(n)[0]
        return classify(a.get(n), b.get(n), exact, tolerance, varies, hosts)

    values = sorted(
        (ValueChange(n, a.get(n), b.get(n), verdict(n)) for n in sorted(set(a) | set(b))),
        key=ValueChange.sort_key,
    )
    report = Report(
        lesson=new.record.lesson,
        old=old.run_id,
        new=new.run_id,
        values=values,
        host=_changes(_flat(old.record.host.model_dump()), _flat(new.record.host.model_dump())),
        engine=_changes(_flat(old.record.engine), _flat(new.record.engine)),
        notes=(old.record.note, new.record.note),
        inputs=_inputs(old, new),
        tolerance=tolerance,
        rules=rules,
    )
    if pages is not None:
        before, now = pages(old), pages(new)
        earlier = {(p, c, t): (h, v) for p, t, c, h, v, _ in before.claims}
        for page, text, condition, holds, read, line in now.claims:
            held, read_before = earlier.get((page, condition, text), (True, {}))
            report.claims.append(
                ClaimOutcome(page, text, condition, held, holds, read_before, read, line)
            )
        report.claims.sort(key=lambda c: (not c.broken, c.holds_now, c.page))
        for key in sorted(set(before.reveals) | set(now.reveals)):
            if before.reveals.get(key) != now.reveals.get(key):
                report.reveals.append(
                    (key, before.reveals.get(key, "—"), now.reveals.get(key, "—"))
                )
        report.unread = before.unread + now.unread
        moved = {c.name for c in values if c.differs} | _kept_files_moved(old, new)
        report.figures = sorted(f for f, uses in now.figures.items() if moved & set(uses))
    return report


def _kept_files_moved(old: Run, new: Run) -> set[str]:
    """The kept files (`file:step/path`) whose content differs between two runs."""

    def hashes(run: Run) -> dict[str, str]:
        return {f"{KEPT}{s.id}/{f.path}": f.sha256 for s in run.record.steps for f in s.files}

    before, after = hashes(old), hashes(new)
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
