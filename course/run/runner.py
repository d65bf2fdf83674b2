"""`course run`: execute a lab's steps in a scratch copy of its folder and record the run.

Each step runs in its own process group on a pseudo-terminal (`steps.py` holds the step kinds);
every process group is ended on success, failure, timeout, Ctrl-C, SIGTERM and a closed terminal,
and ends by itself if the runner is killed outright (`process.tied_popen`); the next run of the
lesson then ends what is left and removes the scratch folder (`lock.py`). Where the steps run is
the target's business: the caller hands in a function that turns `--on` into a `Target`; the
record is always written here.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from ..errors import CourseError, RecordError, RunError, StepFailed
from ..lab.load import LoadedLab, load_lab
from ..lab.schema import step_command, step_kind
from ..record.files import describe, now_iso
from ..record.masking import Redactor
from ..record.models import Failure, Record, Run, RunStatus, StepRecord
from ..record.store import Store
from ..record.writer import RunWriter
from .builds import carry_reused, ensure, record_step, releases, split_engine_specs, step_env
from .display import Display, summary_table
from .engines import overlay
from .host import gpu_slug
from .install import set_up
from .lessons import lab_path
from .lock import lesson_lock
from .options import Interrupted, Options
from .plan import Plan, StepPlan, make_plan
from .process import become_subreaper
from .python import behind, steps_path
from .python import refusal as refused
from .signals import signals_as_interrupt
from .steps import (
    Context,
    end_services,
    execute,
    inside,
    kill_services,
    mark_failed,
)
from .target import ConnectionLost, Host, HostReport, Target

TargetFactory = Callable[[str | None], Target]


def run_lesson(
    root: Path, lesson: str, options: Options, console: Console, targets: TargetFactory
) -> Run | Plan | None:
    """Run a lesson's lab and record it; the finished run, the plan (dry run), or None (nothing to
    do). An OSError (a full disk, a read-only folder) is a RunError naming the path.
    """
    try:
        return _run_lesson(root, lesson, options, console, targets)
    except OSError as exc:
        raise RunError(f"course run {lesson}: {describe(exc)}") from None


def _run_lesson(
    root: Path, lesson: str, options: Options, console: Console, targets: TargetFactory
) -> Run | Plan | None:
    loaded = load_lab(lab_path(root, lesson))
    store = Store(root / "build")
    become_subreaper()  # the steps' orphans come back to us, to be collected, not left as zombies
    for damaged in store.damaged_runs(lesson):
        console.print(f"[yellow]warning:[/] {damaged.message()}", highlight=False, soft_wrap=True)
    resumed = _resumed_run(store, lesson, console) if options.resume else None
    on = options.on
    if resumed is not None and on is None:
        on = resumed.record.options.get("on")  # the host the resumed run ran on
    extra_env: dict[str, str] = {}
    asked, pip_specs = split_engine_specs(loaded, options.engine)
    if (options.engine or loaded.lab.builds) and on not in (None, "local"):
        raise RunError("--engine and builds work for runs on this machine only (not with --on)")
    if pip_specs:
        folder = overlay(root, loaded.lab.python, pip_specs, options.wheels)
        before = os.environ.get("PYTHONPATH")
        extra_env["PYTHONPATH"] = str(folder) + (os.pathsep + before if before else "")
    versions = releases(loaded, asked)
    with targets(on).connect() as host:
        return _run_on(host, root, loaded, store, resumed, options, console, extra_env, versions)


def _resumed_run(store: Store, lesson: str, console: Console) -> Run:
    """The newest run of a lesson, which must not have finished; RunError otherwise."""
    with lesson_lock(store, lesson, _say(console)):
        pass  # taking the lock turns what a killed run left into a failed run
    runs = store.runs(lesson)
    if not runs:
        raise RunError(f"--resume: '{lesson}' has no run to resume")
    newest = runs[-1]
    if newest.record.status == "ok":
        raise RunError(
            f"--resume: the newest run of '{lesson}', {newest.run_id}, finished; nothing to resume"
        )
    return newest


def _run_on(
    host: Host,
    root: Path,
    loaded: LoadedLab,
    store: Store,
    resumed: Run | None,
    options: Options,
    console: Console,
    extra_env: dict[str, str],
    versions: dict[str, str],
) -> Run | Plan | None:
    lab, lesson = loaded.lab, loaded.lab.lesson
    step_envs = {k: v for s in lab.steps for k, v in getattr(s, "env", {}).items()}
    redact = Redactor.from_environment({**options.env, **step_envs})
    # the host query starts processes: let it run while the history is read
    with ThreadPoolExecutor(max_workers=1) as pool:
        query = pool.submit(host.facts, lab.python, lab.engine, loaded.folder, extra_env)
        history = [resumed] if resumed is not None else store.runs(lesson)
        facts = query.result()
    engine = {**facts.engine, **versions}
    plan = _plan(loaded, history, engine, facts, options)
    refusal = _no_python(loaded, facts, host) or refused(
        loaded, plan, facts, None if options.setup else engine, host.label
    )
    if not refusal and not options.older_engine and not options.setup:
        installed = {k: v for k, v in facts.engine.items() if k not in versions}
        kind = facts.host.gpu.name if facts.host.gpu else "none"
        refusal = behind(loaded, plan, history, installed, kind)
    if options.dry_run:
        if refusal:
            console.print(
                f"[yellow]note:[/] a run here would be refused: {refusal}", highlight=False
            )
        return plan
    if refusal:
        raise RunError(f"refused, nothing was run: {refusal}")  # before anything, set-up included
    setup = None
    if options.setup:
        setup = set_up(host, loaded, options, console, redact)
        facts = host.facts(lab.python, lab.engine, loaded.folder, extra_env)  # what it installed
        engine = {**facts.engine, **versions}
        plan = _plan(loaded, history, engine, facts, options)
        refusal = refused(loaded, plan, facts, engine, host.label)
        if refusal:
            raise RunError(f"refused after --setup, no step was run: {refusal}")
    if not plan.to_run:
        source = {p.source.run_id for p in plan.steps if p.source}
        console.print(
            f"Nothing to do: every step of '{lesson}' is reused from {', '.join(sorted(source))}"
            " (use --force to run it again)."
        )
        return None
    if resumed is not None:
        first = next((p.step.id for p in plan.steps if p.action == "run"), None)
        console.print(f"Resuming {resumed.run_id} from step '{first}'", highlight=False)
    started = datetime.now(UTC)
    with signals_as_interrupt(console) as signals:
        with lesson_lock(store, lesson, _say(console)) as lock:
            gpu = facts.host.gpu.model_dump() if facts.host.gpu else None
            slug = gpu_slug(gpu)
            run_id = store.new_run_id(lesson, started, slug)
            record = Record(
                lesson=lesson, title=lab.title, run_id=run_id, status="running", started=now_iso(),
                lab_file=f"lab/{lesson}/lab.yml",
                host=facts.host.model_copy(update={"setup": setup}), engine=engine,
                note=options.note,
                options={"force": options.force, "only": list(options.only) or None,
                         "from": options.from_step, "on": host.label,
                         "resume": resumed.run_id if resumed else None,
                         "engine": list(options.engine)},
            )  # fmt: skip
            writer = RunWriter(store, record)
            t0 = time.monotonic()
            display = Display(console, redact, options.quiet)
            with host.workspace(loaded.folder, lesson, loaded.included) as ws, display:
                lock.folder(ws.scratch)
                env = {**_base_env(host, options, lesson, run_id), **extra_env}
                if host.label == "local":  # lab.yml's python: as the steps' python3
                    env.update(steps_path(loaded, ws.scratch, env.get("PATH", os.defpath)))
                ctx = Context(loaded, writer, host, ws, display, env, redact)
                ctx.track = lambda proc: lock.group(*proc.group) if proc.group else None
                failure: Failure | None = None
                try:
                    used = {name for sp in plan.to_run for name in sp.step.uses}
                    wanted = {n: v for n, v in versions.items() if n in used}
                    _build(ctx, root, wanted, slug, options.wheels)
                    carry_reused(plan, set(versions) - set(wanted), writer)
                    _execute(ctx, plan)
                    end_services(ctx)
                except StepFailed as exc:
                    failure = Failure(step=exc.step_id, message=redact(str(exc)))
                    raise
                except Interrupted as exc:
                    failure = Failure(step=_current(record), message=f"interrupted ({exc})")
                    raise
                except BaseException as exc:
                    said = (
                        str(exc) if isinstance(exc, CourseError) else f"{type(exc).__name__}: {exc}"
                    )
                    message = redact(said)
                    failure = Failure(step=_current(record), message=message)
                    raise
                finally:
                    signals.clean_up()  # a second Ctrl-C must not cut this short
                    try:
                        kill_services(ctx)
                    except RecordError as exc:  # its log could not be written (a full disk)
                        failure = failure or Failure(step=_current(record), message=str(exc))
                    record.seconds = round(time.monotonic() - t0, 3)
                    done = {r.id for r in record.steps}
                    for sp in plan.steps:
                        if sp.step.id not in done:
                            record.steps.append(_base_record(sp, redact, "not-run"))
                    if failure is not None:
                        _finish(writer, "failed", failure)
                status: RunStatus = "ok" if plan.complete() else "partial"
                run = _finish(writer, status)
    console.print(summary_table(run))
    return run


def _no_python(loaded: LoadedLab, facts: HostReport, host: Host) -> str | None:
    """Why the lab's interpreter cannot run its steps on the host, or None when it can."""
    if facts.host.python != "not found":
        return None
    return (
        f"{loaded.display_path()}: python: '{loaded.lab.python}' is not found on {host.label} "
        "(or does not run); name the lab's interpreter there, such as python3"
    )


def _trouble(ctx: Context, exc: OSError | RecordError) -> str:
    """What an OSError during a step means: its path; a scratch folder that a step removed."""
    said = describe(exc) if isinstance(exc, OSError) else str(exc)
    if not ctx.ws.local.is_dir():
        said += f" (the lab's scratch folder {ctx.ws.local} is gone: did a step remove it?)"
    return said


def _finish(writer: RunWriter, status: RunStatus, failure: Failure | None = None) -> Run:
    """Finish the record; when it cannot be written, remove what was written of it and say so."""
    try:
        return writer.finish(status, failure)
    except RecordError as exc:
        writer.discard()
        why = (
            f" It had failed: {failure.message}" if failure and failure.message != str(exc) else ""
        )
        raise RunError(
            f"{exc}. The run {writer.record.run_id} is not recorded: its unfinished folder "
            f"{writer.folder} was removed; earlier runs are untouched.{why}"
        ) from None


def _say(console: Console) -> Callable[[str], None]:
    """Print a sentence of the runner's own, unwrapped (it may name long paths)."""
    return lambda text: console.print(text, highlight=False, soft_wrap=True)


def _current(record: Record) -> str | None:
    return record.steps[-1].id if record.steps else None


def _plan(
    loaded: LoadedLab,
    history: list[Run],
    engine: dict[str, str | None],
    facts: HostReport,
    options: Options,
) -> Plan:
    gpu_name = facts.host.gpu.name if facts.host.gpu else "none"
    return make_plan(
        loaded, history, engine, gpu_name,
        force=options.force, only=options.only, from_step=options.from_step,
    )  # fmt: skip


def _base_env(host: Host, options: Options, lesson: str, run_id: str) -> dict[str, str]:
    env = host.environment()
    env.update(options.env)
    env.update(
        COURSE_LESSON=lesson, COURSE_RUN_ID=run_id, PYTHONUNBUFFERED="1", NO_COLOR="1",
        TERM="dumb", COLUMNS="100", LINES="50",
    )  # fmt: skip
    return env


def _base_record(sp: StepPlan, redact: Redactor, status: str) -> StepRecord:
    step = sp.step
    return StepRecord.model_validate(
        {
            "id": step.id,
            "kind": step_kind(step),
            "title": step.title,
            "command": redact(step_command(step)),
            "needs": step.needs,
            "status": status,
            "hash": sp.hash,
            "hash_parts": sp.parts,
        }  # fmt: skip
    )


def _build(
    ctx: Context, root: Path, versions: dict[str, str], gpu: str, wheels: Path | None
) -> None:
    """Make (or reuse) every build the lab names; record each; put its programs on the PATH."""
    built = []
    for name, version in versions.items():
        made = ensure(root, ctx.loaded, name, version, gpu, ctx.host, ctx.ws, ctx.base_env,
                      ctx.display, wheels)  # fmt: skip
        build = ctx.loaded.lab.builds[name]
        ctx.writer.record.steps.append(record_step(made, build, ctx.writer, ctx.redact))
        ctx.writer.save()
        built.append(made)
    ctx.base_env.update(step_env(built, ctx.base_env))


def _execute(ctx: Context, plan: Plan) -> None:
    total = len(plan.steps)
    for index, sp in enumerate(plan.steps, start=1):
        step = sp.step
        record = ctx.writer.record
        if sp.action == "skip":
            rec = _base_record(sp, ctx.redact, "skipped")
            rec.error = sp.reason
            record.steps.append(rec)
            ctx.writer.save()
            continue
        if sp.action == "reuse":
            assert sp.source is not None
            _reuse(ctx, sp)
            ctx.display.note(
                f"── step {index} of {total}: {step.id}: reused from {sp.source.run_id}"
            )
            continue
        ctx.display.step(index, total, step.id, step_kind(step))
        rec = _base_record(sp, ctx.redact, "failed")
        rec.started = now_iso()
        record.steps.append(rec)
        ctx.writer.save()
        t0 = time.monotonic()
        try:
            try:
                execute(ctx, step, rec)
            except ConnectionLost as exc:
                raise ctx.fail(step.id, str(exc), exc.output) from None
        except StepFailed as exc:
            mark_failed(ctx, rec, exc)
            raise
        except (OSError, RecordError) as exc:  # a full disk, a read-only build/, a folder gone
            failed = ctx.fail(step.id, _trouble(ctx, exc), "")
            mark_failed(ctx, rec, failed)
            raise failed from None
        except Interrupted as exc:
            rec.error = f"interrupted ({exc}) while the step ran"
            raise
        except Exception as exc:
            rec.error = ctx.redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:  # a failed step keeps how long it ran too
            rec.seconds = round(time.monotonic() - t0, 3)
        rec.status = "ok"
        ctx.writer.save()


def _reuse(ctx: Context, sp: StepPlan) -> None:
    assert sp.source is not None
    old = sp.source.record.step(sp.step.id)
    ctx.writer.copy_step(sp.source, sp.step.id)
    # what the step produced is put back, so later steps find it
    for kept in old.files:
        target = inside(ctx.ws.local, kept.path)
        if target is None:
            raise RunError(
                f"run {sp.source.run_id}: step '{sp.step.id}' kept {kept.path!r}, which leads "
                "outside the lab folder; run the step again with --force"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sp.source.kept_file(sp.step.id, kept.path), target)
    ctx.ws.push([kept.path for kept in old.files])
    rec = old.reused(sp.source.run_id)
    rec.hash, rec.hash_parts = sp.hash, sp.parts
    ctx.writer.record.steps.append(rec)
    ctx.writer.save()
