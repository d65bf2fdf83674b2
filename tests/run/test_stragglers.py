"""Processes that leave a step's process group (setsid, `set -m`, GNU timeout, a new session) are
ended with the step, named, and never read the next step's terminal: real runs, the survivors
looked for by pid in /proc."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from support import CourseRun, free_port

from course.record.store import Store
from course.run.procfs import command_line, port_holders, stat_fields

LAB = "echo-server"

LEAVERS = """\
lesson: echo-server
title: Steps that leave processes behind
steps:
  - id: leave
    run: |
      setsid sleep 301 & echo $! > {marks}/setsid
      (set -m; sleep 302 & echo $! > {marks}/job)
      timeout 303 sleep 303 & echo $! > {marks}/timeout
      python3 -c 'import subprocess as s; print(s.Popen(["sleep","304"],start_new_session=1).pid)' \
        > {marks}/session
      setsid sh -c 'sleep 4; echo late' & echo $! > {marks}/late
      sleep 0.5; echo left
  - id: server
    start: setsid python3 server.py & echo $! > {marks}/server; sleep 300
    ready: {{url: "http://127.0.0.1:${{PORT}}/health"}}
    deadline: 20
  - id: stop-server
    stop: server
  - id: lines
    run: for i in $(seq 1 200); do echo "line $i"; done
"""


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in "ZX"


def running(*commands: str) -> list[int]:
    """Live processes whose command line is one of these."""
    found = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return [pid for pid in found if command_line(pid) in commands and alive(pid)]


def kill(pids: list[int]) -> None:
    """After a failed check: the test leaves nothing running either."""
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def test_processes_outside_the_group_end_with_their_step_and_are_named(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    (project / "lab" / LAB / "lab.yml").write_text(LEAVERS.format(marks=marks))
    port = free_port()
    done = course("run", LAB, env={"PORT": str(port)})
    left = {p.name: int(p.read_text()) for p in marks.iterdir()}
    try:
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        assert "step 'leave': ended 7 processes it left running outside its process group: " in said
        for name, command in [
            ("setsid", "sleep 301"),
            ("job", "sleep 302"),
            ("timeout", "timeout 303 sleep 303"),
            ("session", "sleep 304"),
            ("late", "sh -c sleep 4; echo late"),
        ]:
            assert f"pid {left[name]} ({command})" in said, said
        assert re.search(
            "step 'server': ended 1 process it left running outside its process group: "
            rf"pid {left['server']} \(\S*python3 server.py\)",
            said,
        ), said
        # nothing outlives the run, and the service's port is free again
        assert [name for name, pid in left.items() if alive(pid)] == []
        assert port_holders(port) == (False, [])
        # the next step's transcript has every line (the first step's reader no longer reads it)
        (run,) = Store(project / "build").runs(LAB)
        lines = run.transcript("lines").splitlines()[1:]
        assert lines == [f"line {i}" for i in range(1, 201)]
        assert "late" not in run.transcript("lines")
    finally:
        kill(running(*(f"sleep {n}" for n in range(301, 305)), "timeout 303 sleep 303", "sleep 4"))


def test_a_step_timing_out_while_timeout_runs_inside_it(project: Path, course: CourseRun) -> None:
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(
        "lesson: echo-server\ntitle: t\nsteps:\n  - id: slow\n"
        '    run: "echo start; timeout 317 sleep 317; echo end"\n    timeout: 1\n'
    )
    started = time.monotonic()
    done = course("run", LAB)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "OSError" not in done.stderr
    lab_file = project / "lab" / LAB / "lab.yml"
    assert f"error: {lab_file}: step 'slow' failed: timed out after 1 s (timeout: 1 s)\n" in (
        done.stderr
    )
    assert time.monotonic() - started < 30
    (run,) = Store(project / "build").runs(LAB)
    step = run.record.step("slow")
    assert step.status == "failed" and step.error == "timed out after 1 s (timeout: 1 s)"
    assert run.transcript("slow") == "lab $ echo start; timeout 317 sleep 317; echo end\nstart\n"
    left = running("timeout 317 sleep 317", "sleep 317")
    kill(left)
    assert left == []
