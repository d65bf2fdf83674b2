"""A service is ready only when it is ours: a port held by another process is named, and an
answer counts only while our service's process lives."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from support import FIXTURES, CourseRun, free_port

from course.errors import StepFailed
from course.lab.load import load_lab
from course.lab.schema import StartStep
from course.record.masking import Redactor
from course.record.models import HashParts, Record, StepRecord
from course.record.store import Store
from course.record.writer import RunWriter
from course.run.display import Display
from course.run.procfs import local_port, port_message
from course.run.steps import Context, start_service
from course.run.target import LocalHost

LAB = "echo-server"


def serve(port: int) -> subprocess.Popen[bytes]:
    """The fixture's server on a port, as an earlier run's orphan would be."""
    server = subprocess.Popen(
        [sys.executable, str(FIXTURES / "project/lab/echo-server/server.py"), str(port)],
        stdout=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "PORT"},
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)


def test_local_port_knows_this_machine() -> None:
    assert local_port("http://127.0.0.1:8123/health") == 8123
    assert local_port("http://localhost/x") == 80 and local_port("https://[::1]/") == 443
    assert local_port("http://0.0.0.0:9000/") == 9000
    assert local_port("http://192.0.2.1:8123/") is None  # TEST-NET: no address of this machine
    assert local_port("http://example.invalid:8123/") is None


def test_a_port_held_by_another_process_is_named_and_nothing_runs_against_it(
    project: Path, course: CourseRun
) -> None:
    port = free_port()
    assert port_message(port) is None
    orphan = serve(port)
    try:
        message = port_message(port)
        assert message is not None and message.startswith(f"port {port} is in use by pid ")
        assert f"pid {orphan.pid}: {sys.executable} " in message and "server.py" in message
        done = course("run", LAB, env={"PORT": str(port)})
        assert done.returncode == 1
        said = " ".join(done.stderr.split())
        assert (
            f"step 'server' failed: its readiness URL http://127.0.0.1:{port}/health is on this "
            f"host and port {port} is in use by pid {orphan.pid}: " in said
        )
        assert "end that process or give the service another port" in said
        (run,) = Store(project / "build").runs(LAB)
        statuses = {s.id: s.status for s in run.record.steps}
        assert statuses["server"] == "failed" and statuses["query"] == "not-run"
        assert orphan.poll() is None  # not ours: named, not ended
    finally:
        orphan.kill()
        orphan.wait()


class OrphanAnswers(LocalHost):
    """This machine, where something other than the service answers the readiness URL, and only
    once the service's own process has exited (as an orphan holding the port would)."""

    ctx: Context

    def http_ready(self, url: str) -> tuple[bool, str]:
        proc = self.ctx.services["server"].proc
        while proc.poll() is None:
            time.sleep(0.01)
        return True, "status 200"


def test_an_answer_counts_only_while_our_service_lives(project: Path, tmp_path: Path) -> None:
    loaded = load_lab(project / "lab" / LAB / "lab.yml")
    step = loaded.lab.step("server")
    assert isinstance(step, StartStep)
    step = step.model_copy(update={"start": "sleep 0.2; exit 0"})
    record = Record.model_validate(
        {"lesson": LAB, "title": "t", "run_id": "r", "status": "running", "started": "now",
         "lab_file": "lab.yml", "host": {"cpu": "", "os": "", "python": "", "machine": ""},
         "engine": {}}
    )  # fmt: skip
    writer = RunWriter(Store(tmp_path / "build"), record)
    host = OrphanAnswers()
    parts = HashParts(definition="", inputs={}, engine={}, gpu="none")
    rec = StepRecord(
        id="server", kind="start", command=step.start, status="failed", hash="", hash_parts=parts
    )
    env = {**os.environ, "PORT": str(free_port())}
    with host.workspace(loaded.folder, LAB, {}) as ws, Display(Console(), Redactor([])) as shown:
        host.ctx = Context(loaded, writer, host, ws, shown, env, Redactor([]))
        with pytest.raises(StepFailed, match="the service exited with status 0 before it was"):
            start_service(host.ctx, step, rec)
