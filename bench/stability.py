"""How stable a lesson's numbers are from one run to the next: two runs, then `course diff`'s
classification of every value.

    .venv/bin/python bench/stability.py [--root DIR] LESSON... [--runs A B] [--run] [--markdown]

For each lesson it compares two runs: its two newest good runs, or the two named by `--runs`, or
(with `--run`) two runs made here, one after the other, by `course run LESSON --force`. It prints
the values that moved beyond their spread (and how many stayed within noise, how many sizes and
counts changed), the claims that fail on either run, and each step's largest spread: the widest
quartiles of its timed values, relative to their median. `--markdown` prints the same as tables,
for a closing note. Exit status 1 when a claim fails on the newer run, as `course diff`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from course.diff import Report, compare, pick_runs, summary  # noqa: E402
from course.diff.show import shown_pair, why  # noqa: E402
from course.pages.evaluate import evaluate_pages, rules_of  # noqa: E402
from course.pages.format import change, significant  # noqa: E402
from course.record.models import Run  # noqa: E402
from course.record.noise import relative_spread  # noqa: E402
from course.record.store import Store  # noqa: E402


@dataclass
class Widest:
    """A step's widest timed value: its quartiles and its range relative to its median."""

    step: str
    value: str
    quartiles: float
    range: float
    n: int


def widest_spreads(run: Run) -> list[Widest]:
    """For each step of a run with timed values, the one whose quartiles are widest."""
    found = []
    for step in run.record.steps:
        timed = [(n, v) for n, v in step.values.items() if relative_spread(v) is not None]
        if not timed:
            continue
        name, value = max(timed, key=lambda item: relative_spread(item[1]) or 0.0)
        assert value.spread is not None and not isinstance(value.value, str)
        width = (value.spread.max - value.spread.min) / abs(value.value)
        found.append(Widest(step.id, name, relative_spread(value) or 0.0, width, value.spread.n))
    return found


def make_runs(root: Path, lesson: str, count: int = 2) -> list[str]:
    """Run the lesson `count` times here with `course run --force`; the new runs' ids."""
    store = Store(root / "build")
    before = {r.run_id for r in store.runs(lesson)} if (root / "build" / lesson).is_dir() else set()
    for _ in range(count):
        command = [sys.executable, "-m", "course", "--root", str(root), "run", lesson, "--force"]
        done = subprocess.run([*command, "--quiet"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"course run {lesson} failed:\n{done.stdout}{done.stderr}")
    return sorted({r.run_id for r in store.runs(lesson)} - before)


def stability(root: Path, lesson: str, runs: list[str] | None) -> tuple[Report, list[Widest]]:
    """The diff of two runs of a lesson, and the newer run's widest spread per step."""
    store = Store(root / "build")
    old, new = pick_runs(store, lesson, *(runs or [None, None]))
    pages = lambda run: evaluate_pages(root, lesson, run)  # noqa: E731 - one use, one line
    report = compare(old, new, pages, rules_of(root, lesson))
    return report, widest_spreads(new)


def pct(share: float) -> str:
    """A share as the one number format writes a percentage."""
    return f"{significant(share * 100)} %"


def failing(report: Report) -> list[str]:
    """The claims that fail on either run, each with where it is and on which runs it fails."""
    lines = []
    for c in report.claims:
        if c.held_before and c.holds_now:
            continue
        runs = " and ".join(
            r for r, ok in ((report.old, c.held_before), (report.new, c.holds_now)) if not ok
        )
        lines.append(f'{c.page}:{c.line or "?"}: "{c.text}" fails on {runs}')
    return lines


def as_text(report: Report, widest: list[Widest]) -> str:
    """One lesson's stability as plain lines."""
    lines = [f"{report.lesson}: {report.old} → {report.new}", f"  {summary(report)}"]
    for c in report.values:
        if c.verdict.kind in ("moved", "changed"):
            old, new = shown_pair(c)
            said = why(c, report) if c.verdict.kind == "moved" else "a size or count"
            lines.append(
                f"  {c.verdict.kind}: {c.name} {old} → {new} ({change(c.relative)}; {said})"
            )
    claims = failing(report)
    lines.append(f"  claims failing: {len(claims)} of {len(report.claims)}")
    lines += [f"    {line}" for line in claims]
    lines.append("  largest spread per step (quartiles, range; relative to the median):")
    lines += [
        f"    {w.step}: {w.value} {pct(w.quartiles)}, {pct(w.range)} (n {w.n})" for w in widest
    ]
    if not widest:
        lines.append("    none: no value of the newer run was recorded with its spread")
    return "\n".join(lines)


def as_markdown(results: list[tuple[Report, list[Widest]]]) -> str:
    """Every lesson's stability as two Markdown tables: one row per lesson, one per step."""
    lines = [
        "| lesson | runs | moved beyond spread | within noise | sizes, counts changed "
        "| claims failing |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for report, _ in results:
        broken = len(failing(report))
        lines.append(
            f"| {report.lesson} | {report.old} → {report.new} | {report.count('moved')} "
            f"| {report.count('noise')} | {report.count('changed')} "
            f"| {broken} of {len(report.claims)} |"
        )
    lines += [
        "",
        "| lesson | step | widest value | quartiles / median | range / median | repeats |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for report, widest in results:
        lines += [
            f"| {report.lesson} | {w.step} | `{w.value}` | {pct(w.quartiles)} | {pct(w.range)} "
            f"| {w.n} |"
            for w in widest
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="+", metavar="LESSON")
    parser.add_argument("--root", type=Path, default=REPO, help="the project (default: this one)")
    parser.add_argument("--runs", nargs=2, metavar=("A", "B"), help="the two runs to compare")
    parser.add_argument("--run", action="store_true", help="make two runs here first")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args()
    if args.runs and (args.run or len(args.lessons) > 1):
        parser.error("--runs names two runs of one lesson, made before (not with --run)")
    results = []
    for lesson in args.lessons:
        runs = make_runs(args.root, lesson)[-2:] if args.run else args.runs
        results.append(stability(args.root, lesson, runs))
    if args.markdown:
        print(as_markdown(results))
    else:
        print("\n\n".join(as_text(report, widest) for report, widest in results))
    sys.exit(0 if all(report.all_hold for report, _ in results) else 1)


if __name__ == "__main__":
    main()
