"""The kinds of step a lab can have, as a registry: `run` a command, `start` a service, `stop` it.

Each kind is a function `(context, step, record) -> None` that runs the step on the run's host,
writes its transcript, and collects what it captured and kept; it raises StepFailed naming the
lab file, the step and what was expected.
"""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..errors import StepFailed
from ..lab.load import LoadedLab
from ..lab.schema import AnyStep, RunStep, StartStep, StopStep, step_kind
from ..record.masking import MaskError, Redactor
from ..record.models import StepRecord
from ..record.writer import RunWriter
from .capture import capture_values
from .display import Display
from .target import Host, Process, Workspace
from .terminal import clean, tail, transcript

POLL = 0.05
TAIL_LINES = 20


@dataclass
class Service:
    """A background service that a start step left running."""

    step: StartStep
    proc: Process
    record: StepRecord
    env: dict[str, str]


@dataclass
class Context:
    """Everything the steps of one run share."""

    loaded: LoadedLab
    writer: RunWriter
    host: Host
    ws: Workspace
    display: Display
    base_env: dict[str, str]
    redact: Redactor
    services: dict[str, Service] = field(default_factory=dict)
    track: Callable[[Process], None] = lambda proc: None
    """Told of every process a step starts (the lock records its process group)."""

    def spawn(self, step_id: str, command: str, env: dict[str, str], source: str) -> Process:
        """Start a step's command in the lab folder, its output streamed under `source`."""
        prefix = f"[{step_id}] " if source.startswith("service:") else ""
        proc = self.host.spawn(
            command, self.ws.path, env, lambda t: self.display.output(source, t, prefix)
        )
        self.track(proc)
        return proc

    def end(self, step_id: str, proc: Process, grace: float = 3.0) -> None:
        """End a step's processes; say which ones it had to end outside the step's group."""
        proc.end(grace)
        if proc.stragglers:
            count = len(proc.stragglers)
            noun = "process" if count == 1 else "processes"
            shown = self.redact(", ".join(proc.stragglers))
            self.display.note(
                f"step '{step_id}': ended {count} {noun} it left running outside its process "
                f"group: {shown}",
                "yellow",
            )
            proc.stragglers = []  # said once

    def fail(self, step_id: str, what: str, output: str) -> StepFailed:
        """The error for a failed step: the lab file, the step, what was expected, its last
        lines.
        """
        lines = [self.redact(line) for line in tail(output, TAIL_LINES)]
        return StepFailed(self.loaded.display_path(), step_id, self.redact(what), lines)

    def step_env(self, step: RunStep | StartStep) -> dict[str, str]:
        """The variables a step's command gets: the run's, its id, then its own."""
        env = dict(self.base_env)
        env["COURSE_STEP"] = step.id
        env.update(step.env)
        return env


S = TypeVar("S", bound=AnyStep)
StepKind = Callable[[Context, AnyStep, StepRecord], None]
STEP_KINDS: dict[str, StepKind] = {}
"""Step kind ('run', 'start', 'stop') -> the function that executes it."""


def kind(
    name: str, model: type[S]
) -> Callable[[Callable[[Context, S, StepRecord], None]], StepKind]:
    """Register the function that executes steps of one kind (and of one schema model)."""

    def register(func: Callable[[Context, S, StepRecord], None]) -> StepKind:
        def checked(ctx: Context, step: AnyStep, rec: StepRecord) -> None:
            if not isinstance(step, model):
                raise TypeError(f"step '{step.id}' is not a {name} step")
            func(ctx, step, rec)

        STEP_KINDS[name] = checked
        return checked

    return register


def mark_failed(ctx: Context, rec: StepRecord, exc: StepFailed) -> None:
    """Put a step's failure in its record: the step named by the error (a service that died while
    another step ran, a service whose captures failed at its stop) and the step that was running."""
    record = ctx.writer.record
    owner = next((r for r in record.steps if r.id == exc.step_id), None)
    if owner is not None:
        owner.status, owner.error = "failed", exc.what
    if owner is not rec:
        rec.error = f"ended because step '{exc.step_id}' failed: {exc.what}"


def execute(ctx: Context, step: AnyStep, rec: StepRecord) -> None:
    """Run one step through the function registered for its kind."""
    STEP_KINDS[step_kind(step)](ctx, step, rec)


def check_services(ctx: Context, current: str) -> None:
    """Fail the run when a service died before its stop step."""
    for sid, service in ctx.services.items():
        code = service.proc.poll()
        if code is not None:
            ctx.end(sid, service.proc)
            raise ctx.fail(
                sid,
                f"the service died (exit status {code}) while step '{current}' ran; "
                "it should keep running until its stop step",
                service.proc.output,
            )


@kind("run", RunStep)
def run_command(ctx: Context, step: RunStep, rec: StepRecord) -> None:
    """Run a command to its end (or its timeout), watching the services meanwhile."""
    proc = ctx.spawn(step.id, step.run, ctx.step_env(step), step.id)
    try:
        code = None
        while code is None:
            # with services up, look at them often; otherwise sleep until the exit or the timeout
            limit = POLL if ctx.services else max(0.0, min(1.0, step.timeout - proc.seconds) + 0.01)
            code = proc.wait(limit)
            if code is None and proc.seconds > step.timeout:
                ctx.end(step.id, proc)
                raise ctx.fail(
                    step.id,
                    f"timed out after {step.timeout:g} s (timeout: {step.timeout:g} s)",
                    proc.output,
                )
            check_services(ctx, step.id)
    except BaseException:
        ctx.end(step.id, proc)
        text = ctx.redact(transcript(step.run, proc.output))
        rec.transcript = ctx.writer.write_transcript(step.id, text)
        raise
    ctx.end(step.id, proc)  # anything the command left running, in its group or outside
    rec.exit_code = code
    rec.transcript = ctx.writer.write_transcript(
        step.id, ctx.redact(transcript(step.run, proc.output))
    )
    if code != 0:
        raise ctx.fail(
            step.id, f"the command exited with status {code} (expected 0): {step.run}", proc.output
        )
    collect(ctx, step, rec, proc.output)


def collect(ctx: Context, step: RunStep | StartStep, rec: StepRecord, output: str) -> None:
    """Captured values and kept files of a finished step; every miss is reported at once.

    Captures read the real output and files; what is recorded is masked.
    """
    wanted = {*step.files, *(c.json_file for c in step.capture.values() if c.json_file)}
    ctx.ws.fetch(sorted(wanted))
    values, misses = capture_values(step.capture, clean(output), ctx.ws.local)
    for name, found in values.items():
        rec.values[name] = found.model_copy(update={"value": ctx.redact.value(found.value)})
    for rel in step.files:
        source = inside(ctx.ws.local, rel)
        if source is None:
            misses.append(f"file '{rel}' (listed under files) is outside the lab folder")
        elif not source.is_file():
            misses.append(f"file '{rel}' (listed under files) {_not_a_file(source)}")
        else:
            try:
                mask = functools.partial(ctx.redact.kept_file, name=rel)
                kept = ctx.writer.keep_file(step.id, source, rel, mask)
                rec.files.append(kept)
            except MaskError as exc:
                misses.append(str(exc))
    if misses:
        raise ctx.fail(step.id, "; ".join(misses), output)


def _not_a_file(path: Path) -> str:
    """Why a kept path cannot be kept: it is missing, or not a regular file."""
    if path.is_dir():
        return "is a folder, not a file (list the files in it)"
    if path.exists():
        return "is not a regular file (a FIFO, socket or device); only files are kept"
    return "was not produced"


def inside(folder: Path, rel: str) -> Path | None:
    """`folder/rel` with every link followed, or None when that leaves the folder."""
    path = (folder / rel).resolve()
    return path if path.is_relative_to(folder.resolve()) else None


@kind("start", StartStep)
def start_service(ctx: Context, step: StartStep, rec: StepRecord) -> None:
    """Start a background service and wait until it is ready (a URL answers, or a log line)."""
    env = ctx.step_env(step)
    prefix = f"[{step.id}] "
    ready = step.ready
    url = string.Template(ready.url).safe_substitute(env) if ready.url else None
    if url is not None:
        # an answer from a process that is not ours (an earlier run's orphan) would pass for ours
        taken = ctx.host.port_in_use(url)
        if taken:
            raise ctx.fail(
                step.id,
                f"its readiness URL {url} is on this host and {taken}; end that process or give "
                "the service another port, then run again",
                "",
            )
    proc = ctx.spawn(step.id, step.start, env, f"service:{step.id}")
    ctx.services[step.id] = Service(step, proc, rec, env)
    expected = f"GET {url} to answer 2xx" if url else f"a line matching {ready.log!r}"
    last = "no answer yet"
    while True:
        code = proc.poll()
        if code is not None:
            raise ctx.fail(
                step.id,
                f"the service exited with status {code} before it was ready "
                f"(waiting for {expected})",
                proc.output,
            )
        if url is not None:
            ok, last = ctx.host.http_ready(url)
            ok = ok and proc.poll() is None  # an answer counts only while our service lives
        else:
            ok = re.search(ready.log or "", clean(proc.output), re.MULTILINE) is not None
        if ok:
            ctx.display.note(f"{prefix}ready after {proc.seconds:.2f} s")
            return
        if proc.seconds > step.deadline:
            raise ctx.fail(
                step.id,
                f"the service was not ready after its deadline of {step.deadline:g} s "
                f"(waited for {expected}; last: {last})",
                proc.output,
            )
        time.sleep(POLL)


@kind("stop", StopStep)
def stop_service(ctx: Context, step: StopStep, rec: StepRecord) -> None:
    """End a service started earlier, recording its log and captures under its start step."""
    service = ctx.services.pop(step.stop, None)
    if service is None:
        raise ctx.fail(step.id, f"service '{step.stop}' is not running", "")
    finish_service(ctx, service)


def finish_service(ctx: Context, service: Service) -> None:
    """End a service's process group and record its log and captures under its start step."""
    ctx.end(service.step.id, service.proc, grace=5.0)
    rec, step = service.record, service.step
    rec.exit_code = service.proc.poll()
    text = ctx.redact(transcript(step.start, service.proc.output))
    rec.transcript = ctx.writer.write_transcript(step.id, text)
    try:
        collect(ctx, step, rec, service.proc.output)
    except StepFailed as exc:
        rec.status, rec.error = "failed", exc.what
        raise
    finally:
        ctx.writer.save()


def end_services(ctx: Context) -> None:
    """End every service a run never stopped, recording its log and captures."""
    for sid in list(ctx.services):
        finish_service(ctx, ctx.services.pop(sid))


def kill_services(ctx: Context) -> None:
    """After a failure: end every service still up and keep its log; nothing is captured."""
    for sid in list(ctx.services):
        service = ctx.services.pop(sid)
        ctx.end(sid, service.proc, grace=2.0)
        text = ctx.redact(transcript(service.step.start, service.proc.output))
        service.record.transcript = ctx.writer.write_transcript(sid, text)
