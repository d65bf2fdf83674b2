"""However the runner dies, nothing of its run outlives it: real runs, killed for real, and the
survivors looked for by process group in /proc."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import COURSE, CourseRun, free_port

from course.record.store import Store
from course.run.process import GUARD, WATCHER, group_members
from course.run.procfs import command_line, processes, start_time

LAB = "echo-server"


def add_steps(project: Path, text: str) -> None:
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text() + "\n" + text)


def lingering_run(project: Path, marks: Path) -> None:
    """The fixture lab plus a second service and a step that leaves a child and waits."""
    add_steps(
        project,
        f"""\
  - id: server2
    start: echo $$ > {marks}/server2.pgid; pwd > {marks}/scratch; exec python3 server.py
    ready: {{log: "^listening"}}
    env: {{PORT: "{free_port()}"}}
  - id: long
    run: echo $$ > {marks}/long.pgid; sleep 120 & sleep 120
""",
    )


def start_runner(project: Path, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PORT": str(free_port())}
    return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
        [*COURSE, "--root", str(project), "run", LAB],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    time.sleep(0.3)  # the step's children start


def groups(marks: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(marks.glob("*.pgid"))]


def survivors(pgids: list[int], seconds: float = 6) -> dict[int, list[int]]:
    """The live processes of these groups once they had `seconds` to go."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(group_members(g) for g in pgids):
        time.sleep(0.05)
    return {g: group_members(g) for g in pgids if group_members(g)}


def scratch_of(marks: Path) -> Path:
    return Path((marks / "scratch").read_text().strip()).parent


def test_kill_9_of_the_runner_leaves_no_process_and_no_scratch(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lingering_run(project, marks)
    runner = start_runner(project)
    wait_for(marks / "long.pgid")
    pgids = groups(marks)
    assert len(pgids) == 2 and all(group_members(g) for g in pgids)
    scratch = scratch_of(marks)
    assert scratch.is_dir()
    runner.kill()  # SIGKILL: the runner runs no clean-up of its own
    runner.communicate(timeout=30)
    assert survivors(pgids) == {}, "a process of the killed run outlived it"
    deadline = time.monotonic() + 5
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not scratch.exists(), f"the scratch folder {scratch} outlived the run"
    # the next run turns the killed run into a failed one, and says so
    (marks / "long.pgid").unlink()
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(lab.read_text().replace("sleep 120 & sleep 120", "true"))
    done = course("run", LAB)
    assert done.returncode == 0, done.stderr
    assert "killed before it ended, is kept as a failed run" in done.stderr
    killed, good = Store(project / "build").runs(LAB)
    assert killed.record.status == "failed" and good.record.status == "ok"


def test_the_next_run_ends_what_a_dead_run_left_checked_by_start_time(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lingering_run(project, marks)
    # an unrelated process group, which the lock will name with another start time (a reused pid)
    innocent = subprocess.Popen(["sleep", "120"], start_new_session=True)
    runner = start_runner(project)
    wait_for(marks / "long.pgid")
    pgids = groups(marks)
    scratch = scratch_of(marks)
    # the watchers, the scratch folder's guard and the runner all die at once (the OOM killer,
    # `kill -9 -1`): nothing of the run is left to clean up after it
    helpers = [
        pid
        for pid, state, _, group in processes()
        if state != "Z"
        and (
            (group in pgids and WATCHER in command_line(pid))
            or (GUARD in command_line(pid) and str(scratch) in command_line(pid))
        )
    ]
    assert len(helpers) == 3, helpers  # one watcher per group, one guard
    for pid in helpers:
        os.kill(pid, signal.SIGKILL)
    runner.kill()
    runner.communicate(timeout=30)
    time.sleep(0.5)
    assert all(group_members(g) for g in pgids), "the groups should have outlived their watchers"
    assert scratch.is_dir()
    lock = project / "build" / LAB / ".lock"
    held = json.loads(lock.read_text())
    assert sorted(g for g, _ in held["groups"][-2:]) == sorted(pgids)
    assert held["folders"] == [str(scratch)]
    held["groups"].append([innocent.pid, (start_time(innocent.pid) or 0) + 1])
    lock.write_text(json.dumps(held))
    try:
        (marks / "long.pgid").unlink()
        done = course("run", LAB, "--only", "words")
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        assert f"An earlier run of '{LAB}' (pid {runner.pid}) died without cleaning up" in said
        for pgid in pgids:
            assert f"ended its process group {pgid} (" in said
        assert "python3 server.py" in said, said
        assert f"removed its scratch folder {scratch}" in said, said
        assert survivors(pgids, seconds=1) == {}
        assert not scratch.exists()
        assert innocent.poll() is None, "a process that only reuses a recorded pid was ended"
        assert str(innocent.pid) not in said
    finally:
        innocent.kill()
        innocent.wait()


def test_closing_the_terminal_ends_the_run_like_sigterm(project: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lingering_run(project, marks)
    env = {**os.environ, "PORT": str(free_port()), "COLUMNS": "100"}
    pid, terminal = pty.fork()  # the runner in a session of its own, on a terminal
    if pid == 0:
        os.execve(sys.executable, [*COURSE, "--root", str(project), "run", LAB], env)
    try:
        deadline = time.monotonic() + 60
        while not (marks / "long.pgid").exists():
            assert time.monotonic() < deadline
            try:  # keep the terminal's buffer drained, as a terminal window would
                os.read(terminal, 65536)
            except OSError:
                break
        time.sleep(0.3)
        pgids = groups(marks)
        assert all(group_members(g) for g in pgids)
    finally:
        os.close(terminal)  # the window closes: the kernel hangs the terminal up (SIGHUP)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 130
    assert survivors(pgids) == {}
    assert not scratch_of(marks).exists()
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.status == "failed" and run.record.failure is not None
    assert run.record.failure.message == "interrupted (SIGHUP: the terminal closed)"
    assert run.record.step("long").error == (
        "interrupted (SIGHUP: the terminal closed) while the step ran"
    )


def test_sigterm_ends_the_run_and_every_group(project: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    lingering_run(project, marks)
    runner = start_runner(project)
    wait_for(marks / "long.pgid")
    pgids = groups(marks)
    runner.terminate()
    _, err = runner.communicate(timeout=30)
    assert runner.returncode == 130 and "interrupted (SIGTERM)" in err
    assert survivors(pgids, seconds=1) == {}, "ended in order: nothing should be left at all"
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.failure is not None and run.record.failure.step == "long"
