"""`course run`: execute a lab's steps in a scratch copy of its folder and record the run.

Each step runs in its own process group on a pseudo-terminal; background services are polled
until ready; every process group is ended on success, failure, timeout and Ctrl-C. Where the
steps run (this machine or a host over SSH) is a target's business (`targets.py`); the record is
always written here.
"""

from __future__ import annotations

import re
import shutil
import signal
import string
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .capture import capture_values
from .display import Display
from .engines import first_on_path, overlay
from .errors import RunError, StepFailed
from .host import gpu_slug
from .lab import LoadedLab, RunStep, StartStep, StopStep, load_lab, step_command, step_kind
from .plan import Plan, StepPlan, make_plan
from .records import Failure, Record, Run, RunStatus, RunWriter, StepRecord, Store, Value, now_iso
from .targets import (
    ConnectionLost,
    Host,
    Process,
    SshSettings,
    Workspace,
    install_command,
    lab_requirements,
    make_target,
)
from .terminal import Redactor, clean, tail, transcript

POLL = 0.05
TAIL_LINES = 20


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM during a run."""


@dataclass
class Service:
    """A background service that a start step left running."""

    step: StartStep
    proc: Process
    record: StepRecord
    env: dict[str, str]


@dataclass
class Options:
    """How `course run` was asked to run."""

    force: bool = False
    only: str | None = None
    from_step: str | None = None
    dry_run: bool = False
    quiet: bool = False
    on: str | None = None
    """Where to run: None or 'local', or ssh://[user@]host[:port]."""
    ssh: SshSettings = field(default_factory=SshSettings)
    """How to reach an SSH host."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables every step gets (on a remote host, the only ones sent from here)."""
    setup: bool = False
    """Install the lab's requirements on the host first, and record how long it took."""
    resume: bool = False
    """Continue the newest run, which did not finish, from its first unfinished step."""
    engine: list[str] = field(default_factory=list)
    """Engine releases to run with instead of the installed ones (pip specs, e.g. transformers==5.24.0)."""
    wheels: Path | None = None
    """Where to install `engine` from, offline (a folder of wheels); default: the package index."""


@dataclass
class Context:
    """Everything the steps of one run share."""

    loaded: LoadedLab
    writer: RunWriter
    host: Host
    ws: Workspace
    display: Display
    base_env: dict[str, str]
    services: dict[str, Service] = field(default_factory=dict)


def lab_path(root: Path, lesson: str) -> Path:
    """Where a lesson's recipe lives."""
    return root / "lab" / lesson / "lab.yml"


def run_lesson(root: Path, lesson: str, options: Options, console: Console) -> Run | Plan | None:
    """Run a lesson's lab and record it; the finished run, the plan (dry run), or None (nothing to do)."""
    loaded = load_lab(lab_path(root, lesson))
    store = Store(root / "build")
    resumed = _resumed_run(store, lesson) if options.resume else None
    on = options.on
    if resumed is not None and on is None:
        on = resumed.record.options.get("on")  # the host the resumed run ran on
    target = make_target(on, options.ssh)
    folder = None
    if options.engine:
        if on not in (None, "local"):
            raise RunError("--engine works for runs on this machine only (not with --on)")
        folder = overlay(root, loaded.lab.python, options.engine, options.wheels)
    with first_on_path(folder), target.connect() as host:
        return _run_on(host, root, loaded, store, resumed, options, console)


def _resumed_run(store: Store, lesson: str) -> Run:
    """The newest run of a lesson, which must not have finished; RunError otherwise."""
    with store.lock(lesson):
        pass  # taking the lock turns what a killed run left into a failed run
    runs = store.runs(lesson)
    if not runs:
        raise RunError(f"--resume: '{lesson}' has no run to resume")
    newest = runs[-1]
    if newest.record.status == "ok":
        raise RunError(f"--resume: the newest run of '{lesson}', {newest.run_id}, finished; nothing to resume")
    return newest


def _run_on(host: Host, root: Path, loaded: LoadedLab, store: Store, resumed: Run | None, options: Options,
            console: Console) -> Run | Plan | None:
    lab, lesson = loaded.lab, loaded.lab.lesson
    redact = Redactor.from_environment({**options.env, **{k: v for s in lab.steps for k, v in s.env.items()}})
    setup = _setup(host, loaded, options, console, redact) if options.setup and not options.dry_run else None
    # the host query starts processes: let it run while the history is read
    with ThreadPoolExecutor(max_workers=1) as pool:
        facts_query = pool.submit(host.facts, lab.python, lab.engine, loaded.folder)
        history = [resumed] if resumed is not None else store.runs(lesson)
        facts = facts_query.result()
    gpu, engine = facts["gpu"], facts["engine"]
    gpu_name = gpu["name"] if gpu else "none"
    plan = make_plan(
        loaded, history, engine, gpu_name,
        force=options.force, only=options.only, from_step=options.from_step,
    )
    if options.dry_run:
        return plan
    if not plan.to_run:
        source = {p.source.run_id for p in plan.steps if p.source}
        console.print(f"Nothing to do: every step of '{lesson}' is reused from {', '.join(sorted(source))}"
                      " (use --force to run it again).")
        return None
    missing_gpu = [p.step.id for p in plan.to_run if p.step.needs == "gpu"]
    if missing_gpu and gpu is None:
        where = "this host" if host.label == "local" else host.label
        raise RunError(
            f"{loaded.display_path()}: steps {', '.join(missing_gpu)} need a GPU and {where} has none "
            "(nvidia-smi not found); run them on a GPU host, or pick steps with --only / --from"
        )
    if resumed is not None:
        first = next((p.step.id for p in plan.steps if p.action == "run"), None)
        console.print(f"Resuming {resumed.run_id} from step '{first}'", highlight=False)
    started = datetime.now(UTC)
    with store.lock(lesson):
        run_id = store.new_run_id(lesson, started, gpu_slug(gpu))
        host_block = dict(facts["host"])
        if setup is not None:
            host_block["setup"] = setup
        record = Record(
            lesson=lesson, title=lab.title, run_id=run_id, status="running", started=now_iso(),
            lab_file=f"lab/{lesson}/lab.yml", host=host_block, engine=engine,
            options={"force": options.force, "only": options.only, "from": options.from_step,
                     "on": host.label, "resume": resumed.run_id if resumed else None,
                     "engine": list(options.engine)},
        )
        writer = RunWriter(store, record)
        t0 = time.monotonic()
        with host.workspace(loaded.folder, lesson) as ws, Display(console, redact, options.quiet) as display:
            env = _base_env(host, options, lesson, run_id)
            ctx = Context(loaded, writer, host, ws, display, env)
            failure: Failure | None = None
            try:
                with _signals_as_interrupt():
                    _execute(ctx, plan, redact)
                    _end_services(ctx, redact)
            except StepFailed as exc:
                failure = Failure(step=exc.step_id, message=redact(str(exc)))
                raise
            except Interrupted:
                failure = Failure(step=_current(record), message="interrupted (Ctrl-C or SIGTERM)")
                raise
            except BaseException as exc:
                failure = Failure(step=_current(record), message=redact(f"{type(exc).__name__}: {exc}"))
                raise
            finally:
                _kill_services(ctx, redact)
                record.seconds = round(time.monotonic() - t0, 3)
                done = {r.id for r in record.steps}
                for sp in plan.steps:
                    if sp.step.id not in done:
                        record.steps.append(_base_record(sp, redact, "not-run"))
                if failure is not None:
                    writer.finish("failed", failure)
            status: RunStatus = "ok" if plan.complete() else "partial"
            run = writer.finish(status)
    console.print(summary_table(run))
    return run


def _setup(host: Host, loaded: LoadedLab, options: Options, console: Console, redact: Redactor) -> dict[str, object]:
    """Install the lab's requirements with the host's uv or pip; how long it took, for the record."""
    requirements = lab_requirements(loaded.folder)
    if not requirements:
        console.print(f"--setup: {loaded.display_path()} names no requirements (pyproject.toml, requirements.txt)")
        return {"seconds": 0.0, "requirements": [], "installer": None}
    command = install_command(loaded.lab.python, requirements)
    with Display(console, redact, options.quiet) as display:
        display.note(f"── setup: installing {len(requirements)} requirements on {host.label}", "bold cyan")
        proc = host.spawn(command, None, {**host.environment(), **options.env, "PYTHONUNBUFFERED": "1"},
                          lambda t: display.output("setup", t))
        try:
            code = proc.wait(3600)
        except ConnectionLost as exc:
            raise RunError(f"--setup on {host.label}: {exc}") from None
        finally:
            proc.end()
    output = clean(proc.output)
    if code != 0:
        lines = "\n".join(f"  | {redact(l)}" for l in tail(output, TAIL_LINES))
        raise RunError(f"--setup on {host.label}: installing {', '.join(requirements)} failed "
                       f"(status {code}):\n{lines}")
    installer = re.search(r"^installer: (.+)$", output, re.MULTILINE)
    return {"seconds": round(proc.seconds, 3), "requirements": requirements,
            "installer": installer.group(1).strip() if installer else None}


def _current(record: Record) -> str | None:
    return record.steps[-1].id if record.steps else None


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into Interrupted, so clean-up runs."""

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _base_env(host: Host, options: Options, lesson: str, run_id: str) -> dict[str, str]:
    env = host.environment()
    env.update(options.env)
    env.update(
        COURSE_LESSON=lesson, COURSE_RUN_ID=run_id, PYTHONUNBUFFERED="1", NO_COLOR="1",
        TERM="dumb", COLUMNS="100", LINES="50",
    )
    return env


def _base_record(sp: StepPlan, redact: Redactor, status: str) -> StepRecord:
    step = sp.step
    return StepRecord(
        id=step.id, kind=step_kind(step), title=step.title, command=redact(step_command(step)),  # type: ignore[arg-type]
        needs=step.needs, status=status, hash=sp.hash, hash_parts=sp.parts,  # type: ignore[arg-type]
    )


def _execute(ctx: Context, plan: Plan, redact: Redactor) -> None:
    total = len(plan.steps)
    for index, sp in enumerate(plan.steps, start=1):
        step = sp.step
        record = ctx.writer.record
        if sp.action == "skip":
            rec = _base_record(sp, redact, "skipped")
            rec.error = sp.reason
            record.steps.append(rec)
            ctx.writer.save()
            continue
        if sp.action == "reuse":
            assert sp.source is not None
            _reuse(ctx, sp)
            ctx.display.note(f"── step {index} of {total}: {step.id}: reused from {sp.source.run_id}")
            continue
        ctx.display.step(index, total, step.id, step_kind(step))
        rec = _base_record(sp, redact, "failed")
        rec.started = now_iso()
        record.steps.append(rec)
        ctx.writer.save()
        t0 = time.monotonic()
        try:
            if isinstance(step, RunStep):
                _run_command(ctx, step, rec, redact)
            elif isinstance(step, StartStep):
                _start_service(ctx, step, rec, redact)
            else:
                _stop_service(ctx, step, redact)
        except ConnectionLost as exc:
            raise _fail(ctx, step.id, str(exc), exc.output, redact) from None
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
        target = ctx.ws.local / kept.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sp.source.kept_file(sp.step.id, kept.path), target)
    ctx.ws.push([kept.path for kept in old.files])
    rec = old.model_copy(deep=True)
    rec.status = "reused"
    rec.reused_from = old.reused_from or sp.source.run_id
    rec.hash, rec.hash_parts = sp.hash, sp.parts
    ctx.writer.record.steps.append(rec)
    ctx.writer.save()


def _step_env(ctx: Context, step: RunStep | StartStep) -> dict[str, str]:
    env = dict(ctx.base_env)
    env["COURSE_STEP"] = step.id
    env.update(step.env)
    return env


def _fail(ctx: Context, step_id: str, what: str, output: str, redact: Redactor) -> StepFailed:
    return StepFailed(ctx.loaded.display_path(), step_id, redact(what), [redact(l) for l in tail(output, TAIL_LINES)])


def _check_services(ctx: Context, current: str, redact: Redactor) -> None:
    for sid, service in ctx.services.items():
        code = service.proc.poll()
        if code is not None:
            service.proc.end()
            raise _fail(
                ctx, sid,
                f"the service died (exit status {code}) while step '{current}' ran; "
                f"it should keep running until its stop step",
                service.proc.output, redact,
            )


def _run_command(ctx: Context, step: RunStep, rec: StepRecord, redact: Redactor) -> None:
    proc = ctx.host.spawn(step.run, ctx.ws.path, _step_env(ctx, step), lambda t: ctx.display.output(step.id, t))
    try:
        code = None
        while code is None:
            # with services up, look at them often; otherwise sleep until the exit or the timeout
            limit = POLL if ctx.services else max(0.0, min(1.0, step.timeout - proc.seconds) + 0.01)
            code = proc.wait(limit)
            if code is None and proc.seconds > step.timeout:
                proc.end()
                raise _fail(ctx, step.id, f"timed out after {step.timeout:g} s (timeout: {step.timeout:g} s)",
                            proc.output, redact)
            _check_services(ctx, step.id, redact)
    except BaseException:
        proc.end()
        rec.transcript = ctx.writer.write_transcript(step.id, redact(transcript(step.run, proc.output)))
        raise
    proc.end()  # anything the command left running in its group
    rec.exit_code = code
    text = redact(transcript(step.run, proc.output))
    rec.transcript = ctx.writer.write_transcript(step.id, text)
    if code != 0:
        raise _fail(ctx, step.id, f"the command exited with status {code} (expected 0): {step.run}",
                    proc.output, redact)
    _collect(ctx, step, rec, proc.output, redact)


def _collect(ctx: Context, step: RunStep | StartStep, rec: StepRecord, output: str, redact: Redactor) -> None:
    """Captured values and kept files of a finished step; every miss is reported at once."""
    ctx.ws.fetch(sorted({*step.files, *(c.json_file for c in step.capture.values() if c.json_file)}))
    values, misses = capture_values(step.capture, redact(clean(output)), ctx.ws.local)
    for name, found in values.items():
        found["value"] = redact.value(found["value"])
        rec.values[name] = Value(**found)
    for rel in step.files:
        source = ctx.ws.local / rel
        if not source.is_file():
            misses.append(f"file '{rel}' (listed under files) was not produced")
            continue
        rec.files.append(ctx.writer.keep_file(step.id, source, rel, redact))
    if misses:
        raise _fail(ctx, step.id, "; ".join(misses), output, redact)


def _start_service(ctx: Context, step: StartStep, rec: StepRecord, redact: Redactor) -> None:
    env = _step_env(ctx, step)
    prefix = f"[{step.id}] "
    proc = ctx.host.spawn(step.start, ctx.ws.path, env,
                          lambda t: ctx.display.output(f"service:{step.id}", t, prefix))
    ctx.services[step.id] = Service(step, proc, rec, env)
    ready = step.ready
    expected = f"GET {ready.url} to answer 2xx" if ready.url else f"a line matching {ready.log!r}"
    last = "no answer yet"
    while True:
        code = proc.poll()
        if code is not None:
            raise _fail(ctx, step.id, f"the service exited with status {code} before it was ready "
                        f"(waiting for {expected})", proc.output, redact)
        if ready.url is not None:
            ok, last = ctx.host.http_ready(string.Template(ready.url).safe_substitute(env))
        else:
            assert ready.log is not None
            ok = re.search(ready.log, clean(proc.output), re.MULTILINE) is not None
        if ok:
            ctx.display.note(f"{prefix}ready after {proc.seconds:.2f} s")
            return
        if proc.seconds > step.deadline:
            raise _fail(ctx, step.id, f"the service was not ready after its deadline of {step.deadline:g} s "
                        f"(waited for {expected}; last: {last})", proc.output, redact)
        time.sleep(POLL)


def _stop_service(ctx: Context, step: StopStep, redact: Redactor) -> None:
    service = ctx.services.pop(step.stop, None)
    if service is None:
        raise _fail(ctx, step.id, f"service '{step.stop}' is not running", "", redact)
    _finish_service(ctx, service, redact)


def _finish_service(ctx: Context, service: Service, redact: Redactor) -> None:
    """End a service's process group and record its log and captures under its start step."""
    service.proc.end(grace=5.0)
    rec, step = service.record, service.step
    rec.exit_code = service.proc.poll()
    rec.transcript = ctx.writer.write_transcript(step.id, redact(transcript(step.start, service.proc.output)))
    _collect(ctx, step, rec, service.proc.output, redact)
    ctx.writer.save()


def _end_services(ctx: Context, redact: Redactor) -> None:
    """End every service a run never stopped, recording its log and captures."""
    for sid in list(ctx.services):
        _finish_service(ctx, ctx.services.pop(sid), redact)


def _kill_services(ctx: Context, redact: Redactor) -> None:
    """After a failure: end every service still up and keep its log; nothing is captured."""
    for sid in list(ctx.services):
        service = ctx.services.pop(sid)
        service.proc.end(grace=2.0)
        text = redact(transcript(service.step.start, service.proc.output))
        service.record.transcript = ctx.writer.write_transcript(sid, text)


def plan_table(plan: Plan) -> Table:
    """The dry run's table: what each step would do, and why."""
    gpu = plan.steps[0].parts.gpu if plan.steps else "none"
    table = Table(title=f"Plan (GPU: {gpu})", title_justify="left")
    for col in ("#", "step", "kind", "needs", "action", "why"):
        table.add_column(col)
    for i, sp in enumerate(plan.steps, start=1):
        style = {"run": "bold", "reuse": "green", "skip": "yellow"}[sp.action]
        table.add_row(str(i), sp.step.id, step_kind(sp.step), sp.step.needs or "", f"[{style}]{sp.action}",
                      sp.reason)
    return table


def summary_table(run: Run) -> Table:
    """The table printed after a run."""
    rec = run.record
    table = Table(title=f"{rec.lesson}: run {rec.run_id} — {rec.status}", title_justify="left")
    for col in ("step", "status", "seconds", "values", "files"):
        table.add_column(col)
    for step in rec.steps:
        status = step.status if step.status != "reused" else f"reused ({step.reused_from})"
        secs = f"{step.seconds:.2f}" if step.seconds is not None else ""
        table.add_row(step.id, status, secs, str(len(step.values)), str(len(step.files)))
    return table


def parse_env(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` or `--env NAME` (its value here) as a mapping; RunError for a name not set here."""
    import os

    found: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise RunError(f"--env {item}: '{name}' is not a variable name")
        if not sep:
            if name not in os.environ:
                raise RunError(f"--env {name}: not set here (give --env {name}=VALUE)")
            value = os.environ[name]
        found[name] = value
    return found
