"""Which lessons and steps an engine release touches, and what running them is expected to cost.

Each lesson is planned as `course run` would plan it on the host of its newest good run: that run's
engine versions with the new release in place of the old, and its GPU. A step runs when its hash
changes (the engine versions are part of it); the others are reused. The expected time of a step is
what it took in that run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from ..lab.load import LoadedLab
from ..pages.format import duration
from ..record.models import Run, build_step_id
from ..record.store import Store
from ..run.plan import Plan, make_plan
from .outdated import engines_of

ENGINE_WHEELS = Path(".whl") / "engines"
"""Where an engine release's wheels go for the GPU host: beside `.whl/*.whl`, which the GPU-host
scripts install for every run, and apart from them, so that only `--engine` runs use them."""


@dataclass
class LessonPlan:
    """What the release does to one lesson."""

    loaded: LoadedLab
    good: Run | None
    """The newest good run, which the plan starts from."""
    before: str | None
    """The release it recorded."""
    plan: Plan | None
    """None: the lesson does not use the engine."""

    @property
    def lesson(self) -> str:
        """The lesson's name."""
        return self.loaded.lab.lesson

    @property
    def touched(self) -> bool:
        """Whether any step runs again."""
        return self.plan is not None and bool(self.plan.to_run)

    def seconds(self, gpu_only: bool = False) -> float:
        """The steps that run, as long as they took in the newest good run (and the builds they
        use, as long as their build took: a fresh host makes them again)."""
        if self.plan is None or self.good is None:
            return 0.0
        took = {s.id: s.seconds or 0.0 for s in self.good.record.steps}
        steps = [p.step for p in self.plan.to_run if not gpu_only or p.step.needs == "gpu"]
        builds = {build_step_id(name) for s in steps for name in s.uses}
        return sum(took.get(s.id, 0.0) for s in steps) + sum(took.get(b, 0.0) for b in builds)


def plan_lessons(root: Path, lessons: list[LoadedLab], name: str, version: str) -> list[LessonPlan]:
    """Plan each lesson for `name==version`."""
    store = Store(root / "build")
    plans = []
    for loaded in lessons:
        lesson = loaded.lab.lesson
        good = store.newest_good(lesson, loaded.lab.card)
        before = good.record.engine.get(name) if good else None
        if name not in engines_of(loaded):
            plans.append(LessonPlan(loaded, good, before, None))
            continue
        engine = dict(good.record.engine) if good else {}
        engine[name] = version
        plan = make_plan(loaded, store.runs(lesson), engine, good.gpu_name if good else "none")
        plans.append(LessonPlan(loaded, good, before, plan))
    return plans


def plan_table(plans: list[LessonPlan], name: str, version: str) -> Table:
    """Every step of every lesson using the engine: run or reused, why, and its last time."""
    table = Table(title=f"Refresh to {name} {version}", title_justify="left")
    for column in ("lesson", "step", "needs", "action", "why", "last time"):
        table.add_column(column)
    for lp in plans:
        if lp.plan is None:
            table.add_row(lp.lesson, "", "", "untouched", f"does not use {name}", "")
            continue
        took = {s.id: s.seconds for s in lp.good.record.steps} if lp.good else {}
        for sp in lp.plan.steps:
            seconds = took.get(sp.step.id)
            table.add_row(
                lp.lesson, sp.step.id, sp.step.needs or "", sp.action, sp.reason,
                duration(seconds) if seconds is not None else "—",
            )  # fmt: skip
    return table


def summary(plans: list[LessonPlan]) -> str:
    """One sentence: what runs, what is reused, and the expected time."""
    using = [lp for lp in plans if lp.plan is not None]
    steps = [sp for lp in using if lp.plan is not None for sp in lp.plan.steps]
    runs = sum(1 for sp in steps if sp.action == "run")
    total = sum(lp.seconds() for lp in using)
    gpu = sum(lp.seconds(gpu_only=True) for lp in using)
    touched = sum(1 for lp in using if lp.touched)
    return (
        f"{runs} of {len(steps)} steps run again in {touched} of {len(plans)} lessons, "
        f"{len(steps) - runs} reused; expected from the last records: {duration(total)} "
        f"(steps on the GPU: {duration(gpu)})"
    )


def gpu_host_command(plans: list[LessonPlan], specs: list[str], wheels: str) -> str:
    """The command that runs the touched lessons on the GPU host, longest first."""
    jobs = []
    for lp in sorted((p for p in plans if p.touched), key=lambda p: -p.seconds()):
        engine = " ".join(f"--engine {s}" for s in specs)
        jobs.append(shlex.quote(f"{lp.lesson} {engine} --wheels {wheels}"))
    return "bash scripts/gpu-host-batch.sh " + " ".join(jobs)
