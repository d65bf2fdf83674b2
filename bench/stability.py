"""How stable a lesson's numbers are from one run to the next: two runs, then `course diff`'s
classification of every value.

    .venv/bin/python bench/stability.py [--root DIR] LESSON... [--runs A B] [--run] [--markdown]

For each lesson it compares two runs: its two newest good runs (on the card its lab asks for,
resources.gpu), or the two named by `--runs`, or (with `--run`) two runs made here, one after the
other, by `course run LESSON --force`. It prints
the values that moved beyond their spread (and how many stayed within noise, how many sizes and
counts changed), the claims that fail on either run, and each step's largest spread: the widest
quartiles of its timed values, relative to their median. `--markdown` prints the same as tables,
for a closing note. Exit status 1 when a claim fails on the newer run, as `course diff`.

    .venv/bin/python bench/stability.py LESSON... --noise [--among RUN RUN ...] [--markdown]

`--noise` answers what lab.yml's `noise:` should declare: over the lesson's good runs (or the
runs named by `--among`, made with nothing changed but the host), how far apart each timed value
came out (the larger run's value over the smaller's, less 1, as `course diff` measures it), and,
for each of the lab's declarations (`between_hosts`, each `noise.values` pattern), the value it
governs that needs the most: the furthest apart two runs put it where their quartiles do not
overlap, with the two runs. It lists the values further apart than their declaration allows
(what `course diff` between those two runs would call moved), and exits 1 when there is one; it
says on how many GPUs (by uuid) the runs were made.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from course.diff import Report, compare, pick_runs, summary  # noqa: E402
from course.diff.show import shown_pair, why  # noqa: E402
from course.pages.choose import lab_card, page_runs  # noqa: E402
from course.pages.evaluate import evaluate_pages, rules_of  # noqa: E402
from course.pages.format import change, significant  # noqa: E402
from course.record.models import Run, Value  # noqa: E402
from course.record.noise import Rules, apart, classify, is_exact, relative_spread  # noqa: E402
from course.record.store import Store  # noqa: E402
from course.record.units import convert  # noqa: E402


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
    first, second = (runs[0], runs[1]) if runs else (None, None)
    old, new = pick_runs(store, lesson, first, second, lab_card(root, lesson))
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


@dataclass
class Apart:
    """One timed value over several runs: how far apart they put it where their quartiles do
    not overlap, which is what a declaration of noise between hosts must allow."""

    name: str
    needs: float
    """The largest `apart` between two runs whose quartiles do not overlap (0: every two
    overlap, within noise whatever the declaration)."""
    runs: tuple[str, str] | None
    """Those two runs."""
    declared: float
    pattern: str | None
    """The `noise.values` pattern that governs the value; None: `between_hosts` does."""

    @property
    def moved(self) -> bool:
        """Whether `course diff` between those two runs would list it as moved."""
        return self.needs > self.declared


@dataclass
class NoiseSeen:
    """How far apart a lesson's timed values came out over its runs, beside its declarations."""

    lesson: str
    runs: list[str]
    gpus: int
    values: list[Apart]

    def governed(self) -> dict[str | None, list[Apart]]:
        """The values by the declaration that governs them (None: `between_hosts`), each group
        neediest first."""
        groups: dict[str | None, list[Apart]] = {}
        for a in sorted(self.values, key=lambda a: -a.needs):
            groups.setdefault(a.pattern, []).append(a)
        return groups

    def beyond(self) -> list[Apart]:
        """The values two runs put further apart than their quartiles and declaration allow."""
        return [a for a in self.values if a.moved]


def noise_seen(root: Path, lesson: str, among: list[str] | None) -> NoiseSeen:
    """Every timed value of the lesson's runs (the named ones, else every good one on its lab's
    card) recorded with its spread in two runs or more, with how far apart the runs put it."""
    store = Store(root / "build")
    named = [store.get(lesson, i) for i in among] if among else page_runs(store, lesson)
    runs = [r for r in named if r.good]
    if len(runs) < 2:
        sys.exit(f"{lesson}: --noise needs two good runs or more, found {len(runs)}")
    rules = rules_of(root, lesson)
    seen: dict[str, list[tuple[Value, str]]] = {}  # name: (value, run id)
    for run in runs:
        for step in run.record.steps:
            for name, value in step.values.items():
                full = f"{step.id}.{name}"
                if value.spread is None or is_exact(value, full in rules.exact):
                    continue
                seen.setdefault(full, []).append((value, run.run_id))
    values = [_apart(name, points, rules) for name, points in seen.items() if len(points) > 1]
    gpus = {r.record.host.gpu.uuid for r in runs if r.record.host.gpu and r.record.host.gpu.uuid}
    return NoiseSeen(lesson, [r.run_id for r in runs], len(gpus), values)


def _apart(name: str, points: list[tuple[Value, str]], rules: Rules) -> Apart:
    """One value's runs, every two of them: the furthest apart of those whose quartiles do not
    overlap (`classify` with no noise between hosts calls them moved)."""
    declared, pattern = rules.host_noise(name)
    needs, runs = 0.0, None
    for (a, run_a), (b, run_b) in itertools.combinations(points, 2):
        if classify(a, b, declared_free=name in rules.free).kind != "moved":
            continue
        far = apart(float(a.value), convert(float(b.value), b.unit, a.unit))
        if far > needs:
            needs, runs = far, (run_a, run_b)
    return Apart(name, needs, runs, declared, pattern)


def plural(count: int, noun: str) -> str:
    """`1 value`, `2 values`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def noise_text(seen: NoiseSeen) -> str:
    """One lesson's declarations beside what its runs showed, as plain lines."""
    lines = [
        f"{seen.lesson}: {len(seen.runs)} good runs, {seen.runs[0]} … {seen.runs[-1]}, "
        f"on {seen.gpus} GPUs by uuid"
    ]
    for pattern, found in seen.governed().items():
        top, said = found[0], f"noise.values '{pattern}'" if pattern else "between_hosts"
        head = f"  {said} {pct(top.declared)}, {plural(len(found), 'value')}: "
        if top.runs is None:
            lines.append(head + "every two runs overlap in their quartiles")
        else:
            lines.append(
                head + f"the neediest {top.name}, {pct(top.needs)} apart with quartiles apart "
                f"({top.runs[0]} and {top.runs[1]})"
            )
    beyond = seen.beyond()
    lines.append(f"  further apart than declared: {len(beyond)}")
    lines += [f"    {a.name} {pct(a.needs)} (declared {pct(a.declared)})" for a in beyond]
    return "\n".join(lines)


def noise_markdown(results: list[NoiseSeen]) -> str:
    """Every lesson's declarations beside what its runs showed, as one Markdown table."""
    lines = [
        "| lesson | runs | GPUs | declaration | values | neediest | apart | declared |",
        "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |",
    ]
    for seen in results:
        for pattern, found in seen.governed().items():
            top, said = found[0], f"`{pattern}`" if pattern else "between_hosts"
            name = f"`{top.name}`" if top.runs else "none: quartiles overlap"
            lines.append(
                f"| {seen.lesson} | {len(seen.runs)} | {seen.gpus} | {said} | {len(found)} "
                f"| {name} | {pct(top.needs)} | {pct(top.declared)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="+", metavar="LESSON")
    parser.add_argument("--root", type=Path, default=REPO, help="the project (default: this one)")
    parser.add_argument("--runs", nargs=2, metavar=("A", "B"), help="the two runs to compare")
    parser.add_argument("--run", action="store_true", help="make two runs here first")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument(
        "--noise", action="store_true", help="how far apart the runs put each timed value"
    )
    parser.add_argument("--among", nargs="+", metavar="RUN", help="with --noise: these runs")
    args = parser.parse_args()
    if args.runs and (args.run or len(args.lessons) > 1):
        parser.error("--runs names two runs of one lesson, made before (not with --run)")
    if args.among and (not args.noise or len(args.lessons) > 1):
        parser.error("--among names runs of one lesson, for --noise")
    if args.noise:
        seen = [noise_seen(args.root, lesson, args.among) for lesson in args.lessons]
        print(noise_markdown(seen) if args.markdown else "\n\n".join(map(noise_text, seen)))
        sys.exit(1 if any(s.beyond() for s in seen) else 0)
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
