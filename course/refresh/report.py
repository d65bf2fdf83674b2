"""What a move to an engine release did, from the records in build/: for each lesson using the
engine, its newest run on the release against the good run before it (`course.diff`), the claims
that now fail with the page and line of each, the pins moved, the sentences to read again; and one
Markdown report for a pull request's description, `build/refresh-<date>.md`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..diff import ClaimOutcome, Report, compare, render_markdown
from ..lab.load import LoadedLab
from ..pages.evaluate import evaluate_pages, rules_of
from ..pages.lessons import PageEntry, lesson_pages
from ..record.models import Run
from ..record.store import Store
from .outdated import engines_of
from .pins import Place, lesson_files, mentions, pinned_at, ranges_leaving_out, rewrite_pins


@dataclass
class Outcome:
    """One lesson after the move."""

    loaded: LoadedLab
    old: Run | None
    """The good run before, on another release."""
    new: Run | None
    """The newest run on the release (a good one first)."""
    diff: Report | None = None
    failing: list[tuple[ClaimOutcome, Place | None]] = field(default_factory=list)
    moved: list[Place] = field(default_factory=list)
    """Pins of the release before, moved to this one now."""
    pins: list[Place] = field(default_factory=list)
    """Every pin of this release in the lesson's files."""
    prose: list[Place] = field(default_factory=list)
    ranges: list[Place] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)
    """Pages that pin a run of another release (page, run id): the lab's pins stay as they are."""

    @property
    def lesson(self) -> str:
        """The lesson's name."""
        return self.loaded.lab.lesson

    @property
    def blocked(self) -> bool:
        """Whether the lesson stands in the way of publishing: a claim fails on its new run (a
        failed run changes no page: its pages keep the run before)."""
        return bool(self.failing) or bool(self.diff and not self.diff.all_hold)

    def result(self, version: str) -> str:
        """A few words for the summary table."""
        if self.new is None:
            return f"no run on {version} yet"
        if not self.new.good:
            failure = self.new.record.failure
            step = f" at step `{failure.step}`" if failure and failure.step else ""
            return f"**{self.new.record.status}**{step}"
        if self.diff is None:
            return "first run (nothing to compare)"
        moved, changed, noise = (self.diff.count(k) for k in ("moved", "changed", "noise"))
        claims = len(self.diff.claims)
        fails = sum(1 for c in self.diff.claims if not c.holds_now)
        verdict = f"**{fails} of {claims} claims fail**" if fails else f"all {claims} claims hold"
        return (
            f"{moved} values moved beyond noise, {changed} sizes or counts changed, {noise} "
            f"within noise; {verdict}"
        )


def claim_place(root: Path, claim: ClaimOutcome) -> Place | None:
    """Where a claim is written: its page and the line its condition starts on."""
    path = root / claim.page
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    at = text.find(claim.condition)
    if at < 0:
        return None
    line = text.count("\n", 0, at) + 1
    return Place(claim.page, line, text.splitlines()[line - 1].strip())


def on_release(runs: list[Run], name: str, version: str) -> tuple[Run | None, Run | None]:
    """(the good run before the release, the newest run on it: a good one if there is one)."""
    moved = [r for r in runs if r.record.engine.get(name) == version]
    new = next((r for r in reversed(moved) if r.good), moved[-1] if moved else None)
    old = next(
        (
            r
            for r in reversed(runs)
            if r.good
            and r.record.engine.get(name) != version
            and (new is None or r.run_id < new.run_id)
        ),
        None,
    )
    return old, new


def outcome(
    root: Path, loaded: LoadedLab, name: str, version: str, rewrite: bool, pages: list[PageEntry]
) -> Outcome:
    """Compare, find failing claims and stale sentences, and (`rewrite`) move the pins; `pages`
    are the course's lesson pages."""
    old, new = on_release(Store(root / "build").runs(loaded.lab.lesson), name, version)
    found = Outcome(loaded, old, new)
    if new is None or not new.good:
        return found
    lesson = loaded.lab.lesson
    if old is not None:
        pages_of = lambda run: evaluate_pages(root, lesson, run)  # noqa: E731 - one use, one line
        found.diff = compare(old, new, pages_of, rules_of(root, lesson))
        found.failing = [(c, claim_place(root, c)) for c in found.diff.claims if not c.holds_now]
    files = lesson_files(root, loaded)
    before = old.record.engine.get(name) if old else None
    found.held = pinned_pages(root, lesson, pages, name, version)
    if before and before != version:
        if rewrite and not found.held:  # a page still showing the old release keeps its pins
            found.moved = rewrite_pins(root, files, name, before, version)
        found.prose = mentions(root, files, name, before)
    found.pins = pinned_at(root, files, name, version)
    found.ranges = ranges_leaving_out(root, files, name, version)
    return found


def pinned_pages(
    root: Path, lesson: str, pages: list[PageEntry], name: str, version: str
) -> list[tuple[str, str]]:
    """The lesson's own page (the outline's, with its number; not another page reading the same
    records) when its front matter pins a run not on `version` of `name`."""
    store = Store(root / "build")
    held = []
    for entry in pages:
        if entry.meta.lesson != lesson or not entry.meta.run or not entry.meta.number:
            continue
        if store.get(lesson, entry.meta.run).record.engine.get(name) != version:
            held.append((f"docs/{entry.src}", entry.meta.run))
    return held


def outcomes(
    root: Path, lessons: list[LoadedLab], name: str, version: str, rewrite: bool = True
) -> list[Outcome]:
    """Every lesson that uses the engine."""
    pages = lesson_pages(root / "docs")
    return [
        outcome(root, loaded, name, version, rewrite, pages)
        for loaded in lessons
        if name in engines_of(loaded)
    ]


def _run_text(run: Run | None, name: str) -> str:
    if run is None:
        return "—"
    return f"`{run.run_id}` ({name} {run.record.engine.get(name) or '—'})"


def _failure(run: Run) -> list[str]:
    failure = run.record.failure
    message = failure.message if failure else f"the run is {run.record.status}"
    shown = message.strip().splitlines()
    return ["```text", *shown[:1], *(["…"] if len(shown) > 13 else []), *shown[1:][-12:], "```"]


def markdown(found: list[Outcome], name: str, version: str, carried: list[str]) -> str:
    """The report, for a pull request's description."""
    today = datetime.now(UTC).date().isoformat()
    befores = sorted({o.old.record.engine.get(name) or "—" for o in found if o.old})
    lines = [
        f"# {name} {' / '.join(befores) or '—'} → {version}",
        "",
        f"Made on {today} by `course refresh` from the records in `build/`: each lesson that uses "
        f"{name}, its newest run on {version} against the good run before it.",
        "",
        "| lesson | before | after | result |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {o.lesson} | {_run_text(o.old, name)} | {_run_text(o.new, name)} "
        f"| {o.result(version)} |"
        for o in found
    ]
    if carried:
        lines += ["", "Installed beside the host's packages with "
                  + " ".join(f"`--engine {s}`" for s in carried) + "."]  # fmt: skip
    failing = [(o, c, p) for o in found for c, p in o.failing]
    if failing:
        lines += ["", f"## Claims that fail on {version}", "",
                  "Each sentence needs an author: its page and line, its condition and the values "
                  "it read now.", ""]  # fmt: skip
        for _, c, place in failing:
            where = f"`{place}`" if place else f"`{c.page}`"
            read = ", ".join(f"{k} = {v}" for k, v in c.values_now.items())
            lines.append(f"- {where}: “{c.text}” (`{c.condition}`; {read})")
    broken = [o for o in found if o.new is not None and not o.new.good]
    if broken:
        lines += [
            "",
            f"## Labs that do not run on {version}",
            "",
            "Fix the lab to run on both releases, or pin the old one and say why.",
            "",
        ]
        for o in broken:
            assert o.new is not None
            lines += [f"- **{o.lesson}**, run `{o.new.run_id}`:", "", *_failure(o.new), ""]
    lines += _pins(found, name, version)
    prose = [(o, p) for o in found for p in o.prose]
    if prose:
        lines += ["", "## Sentences that name the release before", "",
                  "Read each again: it may state a fact of that release.", ""]  # fmt: skip
        lines += [f"- `{p}`: {p.text}" for _, p in prose]
    blocked = [o.lesson for o in found if o.blocked]
    lines += ["", "## Publishing", ""]
    if blocked:
        lines.append(f"Blocked by {', '.join(blocked)}: `course build` and `course publish` fail "
                     "while a claim fails, and `course check` lists each one.")  # fmt: skip
    else:
        lines.append("No claim fails: `course check`, then `course publish`.")
    diffs = [o for o in found if o.diff is not None]
    if diffs:
        lines += ["", "## What moved, lesson by lesson"]
        for o in diffs:
            assert o.diff is not None
            lines += ["", f"<details><summary>{o.lesson}: {o.diff.old} → {o.diff.new}</summary>",
                      "", render_markdown(o.diff).strip(), "", "</details>"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _pins(found: list[Outcome], name: str, version: str) -> list[str]:
    lines = ["", "## Pins", ""]
    pins = [p for o in found for p in o.pins]
    moved = {str(p) for o in found for p in o.moved}
    if pins:
        lines += [f"Pinned to {name}=={version} ({len(moved)} moved by this refresh):", ""]
        lines += [f"- `{p}`{' (moved)' if str(p) in moved else ''}: `{p.text}`" for p in pins]
        lines.append("")
    follow = [o for o in found if o.new is not None and o.new.good and not o.held]
    if follow:
        runs = ", ".join(f"{o.lesson} `{o.new.run_id}`" for o in follow if o.new)
        lines.append(
            "The pages' install lines (“Get the files”) and each zip's START-HERE.md are made "
            f"from the record: they follow the newest good run ({runs})."
        )
    held = [(o, page, run) for o in found for page, run in o.held]
    if held:
        lines += ["", "Pins kept: these pages still show a run of another release, so their "
                  "lessons' install lines stay as they are (remove `run:` from the page's "
                  "front matter once its claims hold on the new run, and refresh again):",
                  ""]  # fmt: skip
        lines += [f"- `{page}` shows `{run}` ({o.lesson})" for o, page, run in held]
    ranges = [p for o in found for p in o.ranges]
    if ranges:
        lines += ["", f"Requirements whose range leaves {version} out (widen them by hand):", ""]
        lines += [f"- `{p}`: `{p.text}`" for p in ranges]
    return lines


def write_report(root: Path, text: str) -> Path:
    """`build/refresh-<date>.md`."""
    path = root / "build" / f"refresh-{datetime.now(UTC).date().isoformat()}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
