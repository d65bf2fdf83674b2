"""`course run --all`: every lesson, one after another here (or on one host), or as SkyPilot
managed jobs.

SkyPilot does the provisioning, the scheduling and the retries after a preemption; this module only
decides which lessons need a run, writes one SkyPilot task per lesson (resources from the lab;
setup: this package and the lab's requirements; run: `course run LESSON` on the node, then the new
records copied to a bucket), launches them, shows their progress, and brings the records back.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import CourseError, RunError
from ..lab.load import LoadedLab, load_lab
from ..lab.schema import Resources
from ..record.models import Run
from ..record.store import Store
from ..run.display import plan_table
from ..run.install import lab_requirements
from ..run.options import Options
from ..run.plan import check_selection, make_plan
from ..run.runner import TargetFactory, run_lesson
from .tasks import import_sky, node_command, write_tasks

POLL_SECONDS = 30.0


@dataclass
class Decision:
    """Whether a lesson needs a run in the fleet, and why."""

    lesson: str
    run: bool
    reason: str
    gpu_hours: float
    """What one run is expected to take: GPUs × (last run + declared set-up) in hours."""


def lessons(root: Path) -> list[str]:
    """Every lesson with a lab.yml under lab/, sorted."""
    return sorted(p.parent.name for p in (root / "lab").glob("*/lab.yml"))


def _norm(name: str) -> str:
    return re.sub(r"[-_.\s]+", "-", name).lower()


def pinned_versions(requirements: list[str], packages: list[str]) -> dict[str, str]:
    """The engine packages that the requirements pin exactly (`name==version`), with their
    versions.
    """
    wanted = {_norm(p): p for p in packages}
    found = {}
    for req in requirements:
        match = re.match(
            r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*(?:;.*)?$", req
        )
        if match and _norm(match.group(1)) in wanted:
            found[wanted[_norm(match.group(1))]] = match.group(2)
    return found


def decide(
    root: Path, loaded: LoadedLab, force: bool = False, options: Options | None = None
) -> Decision:
    """Whether a lesson's steps are all reusable, judged here with the engine and GPU its node will
    have.

    The node's engine versions are not known before it installs them: the newest good run's versions
    are assumed, except for engine packages that the lab's requirements pin exactly.
    """
    lab = loaded.lab
    res = lab.resources or Resources()
    store = Store(root / "build")
    good = store.newest_good(lab.lesson, lab.card)
    declared = lab.setup.install_seconds + lab.setup.download_seconds
    seconds = (good.record.seconds or 0.0) if good else 0.0
    hours = (res.count if res.gpu else 0) * (seconds + declared) / 3600

    def verdict(run: bool, reason: str) -> Decision:
        return Decision(lab.lesson, run, reason, round(hours, 3))

    options = options or Options(force=force)
    check_selection(loaded, options.only, options.from_step)  # before any node starts
    if options.force:
        return verdict(True, "--force")
    if good is None:
        other = store.newest_good(lab.lesson) if lab.card else None
        if other is not None:
            return verdict(
                True, f"no complete run on {lab.card} yet ({other.run_id} ran on {other.gpu_name})"
            )
        return verdict(True, "no complete run yet")
    engine = dict(good.record.engine)
    engine.update(pinned_versions(lab_requirements(loaded.folder), lab.engine))
    engine.update(pinned_versions(options.engine, lab.engine))  # --engine goes with the job
    plan = make_plan(
        loaded, store.runs(lab.lesson), engine, good.gpu_name,
        only=options.only, from_step=options.from_step,
    )  # fmt: skip
    if not plan.to_run:
        return verdict(False, f"every step reusable from {good.run_id}")
    first = plan.to_run[0]
    return verdict(
        True, f"{len(plan.to_run)} of {len(plan.steps)} steps run ({first.step.id}: {first.reason})"
    )


def sky_plan(sky: Any, task: Any) -> str:
    """What SkyPilot's optimizer would pick for a task, or why it cannot say here."""
    dag = sky.Dag()
    dag.add(task)
    quiet = io.StringIO()
    try:
        from sky import optimizer

        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            optimizer.Optimizer.optimize(dag, quiet=True)
    except Exception as exc:  # noqa: BLE001 - no cloud enabled, no catalog: SkyPilot's message says which
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return "not planned: " + re.sub(r"\x1b\[[0-9;]*m", "", message)
    best = task.best_resources
    return f"{best} at ${best.get_cost(3600):.2f}/h" if best is not None else "not planned"


def run_all(
    root: Path,
    options: Options,
    console: Console,
    targets: TargetFactory,
    via: str | None = None,
    bucket: str | None = None,
) -> int:
    """Every lesson: here (or on `--on`) one after another, or as SkyPilot managed jobs; the exit
    status.
    """
    if via == "skypilot":
        return run_skypilot(root, options, console, bucket)
    failed = []
    for lesson in lessons(root):
        console.print(f"[bold]── lesson {lesson}[/]")
        try:
            result = run_lesson(root, lesson, options, console, targets)
        except CourseError as exc:
            console.print(f"[red]{exc}[/]", markup=True, highlight=False)
            failed.append(lesson)
            continue
        if options.dry_run and not isinstance(result, Run) and result is not None:
            console.print(plan_table(result))
    console.print(
        f"{len(lessons(root)) - len(failed)} lessons done, {len(failed)} failed"
        + (f": {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


def run_skypilot(root: Path, options: Options, console: Console, bucket: str | None) -> int:
    """Launch one managed job per lesson that needs a run, follow them, and bring their records
    back.
    """
    loaded = {lesson: load_lab(root / "lab" / lesson / "lab.yml") for lesson in lessons(root)}
    node_command(root, "lesson", options)  # refuse what cannot travel before anything else
    decisions = [decide(root, lab, options.force, options) for lab in loaded.values()]
    chosen = [loaded[d.lesson] for d in decisions if d.run]
    sky = import_sky()
    folder = Path(tempfile.mkdtemp(prefix="course-fleet-"))
    tasks = write_tasks(root, chosen, bucket, folder, options, reveal=not options.dry_run)
    table = Table(
        title=f"Fleet: {len(chosen)} of {len(decisions)} lessons to run", title_justify="left"
    )
    for col in ("lesson", "action", "why", "GPU-hours", "SkyPilot"):
        table.add_column(col)
    for d in decisions:
        planned = sky_plan(sky, tasks[d.lesson]) if d.run and options.dry_run else ""
        table.add_row(
            d.lesson, "run" if d.run else "reuse", d.reason, f"{d.gpu_hours:.2f}", planned
        )
    console.print(table)
    if options.dry_run:
        console.print(f"tasks written and validated by SkyPilot in {folder}", highlight=False)
        return 0
    if not chosen:
        return 0
    if not bucket:
        raise RunError(
            "--via skypilot needs --bucket URL (s3://…, gs://…): the jobs leave their records there"
        )
    try:
        jobs = launch(sky, tasks, console)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # SkyPilot holds the tasks now
    return follow(sky, jobs, root, bucket, console)


def launch(sky: Any, tasks: dict[str, Any], console: Console) -> dict[str, int]:
    """Launch each task as a managed job (SkyPilot retries it when its node is preempted)."""
    jobs = {}
    for lesson, task in tasks.items():
        job_id, _handle = sky.get(sky.jobs.launch(task, name=f"course-{lesson}"))
        jobs[lesson] = job_id[0] if isinstance(job_id, list) else job_id
        console.print(f"launched course-{lesson}: managed job {jobs[lesson]}")
    return jobs


def follow(sky: Any, jobs: dict[str, int], root: Path, bucket: str, console: Console) -> int:
    """One progress table here until every job ends; each ended job's records are synced back."""
    from rich.live import Live

    states: dict[str, str] = {lesson: "PENDING" for lesson in jobs}
    synced: dict[str, Synced] = {}
    by_id = {v: k for k, v in jobs.items()}

    def view() -> Table:
        table = Table(title="SkyPilot managed jobs", title_justify="left")
        for col in ("lesson", "job", "status", "records back"):
            table.add_column(col)
        for lesson, job in jobs.items():
            back = synced.get(lesson)
            table.add_row(lesson, str(job), states[lesson], back.shown() if back else "")
        return table

    with Live(view(), console=console, refresh_per_second=1) as live:
        while len(synced) < len(jobs):
            reply = sky.get(sky.jobs.queue_v2(refresh=False, job_ids=list(jobs.values())))
            records = reply[0] if isinstance(reply, tuple) else reply
            for rec in records:
                job_id = rec["job_id"] if isinstance(rec, dict) else rec.job_id
                status = rec["status"] if isinstance(rec, dict) else rec.status
                lesson = by_id.get(job_id)
                if lesson is None or status is None:
                    continue
                states[lesson] = status.value if hasattr(status, "value") else str(status)
                if status.is_terminal() and lesson not in synced:
                    synced[lesson] = sync_back(sky, bucket, lesson, root)
            live.update(view())
            if len(synced) < len(jobs):
                time.sleep(POLL_SECONDS)
    failed = [
        lesson
        for lesson, state in states.items()
        if state != "SUCCEEDED" or synced[lesson].error is not None
    ]
    console.print(
        f"{len(jobs) - len(failed)} jobs succeeded"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


@dataclass(frozen=True)
class Synced:
    """What came back from the bucket for one lesson: the run ids added, or why nothing could."""

    added: list[str]
    error: str | None = None

    def shown(self) -> str:
        """For the progress table."""
        return f"sync failed: {self.error}" if self.error else ", ".join(self.added) or "none"


def sync_back(sky: Any, bucket: str, lesson: str, root: Path) -> Synced:
    """Copy the lesson's new run folders from the bucket into build/<lesson>/; runs already here are
    kept.
    """
    from sky import cloud_stores

    scratch = Path(tempfile.mkdtemp(prefix=f"course-sync-{lesson}-"))
    source = f"{bucket.rstrip('/')}/{lesson}"
    try:
        command = cloud_stores.get_storage_from_path(source).make_sync_dir_command(
            source, str(scratch)
        )
        subprocess.run(["bash", "-c", command], check=True, capture_output=True)
        target = Store(root / "build").lesson_dir(lesson)
        target.mkdir(parents=True, exist_ok=True)
        added = []
        for run in sorted(
            p for p in scratch.iterdir() if p.is_dir() and not p.name.startswith(".")
        ):
            if not (target / run.name).exists():
                shutil.copytree(run, target / run.name)
                added.append(run.name)
        return Synced(added)
    except (subprocess.CalledProcessError, OSError) as exc:
        return Synced([], str(exc))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
