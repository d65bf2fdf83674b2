"""The runner's fault kinds of issue 27 (items 6-8, 10-16 and the smaller ones), for `faults.py`.

Each kind drives `course run` (a real process) on the trial's project and counts, beside what
`faults.py` counts, what its fault could leave: processes that left the step's process group
(listed by pid in `$MARKS/pids`, or found by an unusual command line), `.tmp-` folders and stray
temporary files under `build/`, lines a transcript lost, a newest run chosen wrongly.

    runner_kinds(Kind, MARK) -> [Kind, ...]
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from course.errors import RecordError
from course.record.files import dump_json
from course.record.store import Store
from course.run.procfs import command_line, stat_fields

LAB = "echo-server"
COURSE = [sys.executable, "-m", "course"]
PIDS = 'echo $! >> "$MARKS/pids"'
LINES = 200
LOUD_LINES = 100_000
WIDE = 16_000_000
NOTE = r"\n\[\.\.\. [\d,]+ characters \(([\d,]+) lines\) of output not kept.*\]\n"
"""The line a transcript holds in place of what it left out."""


def course(trial: Any, *args: str, timeout: float = 180) -> int:
    """`course --root ROOT ARGS` as a real process; what it printed goes to the trial's output."""
    proc = subprocess.Popen(
        [*COURSE, "--root", str(trial.root), *args],
        env=trial.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        out += f"\n(bench: killed after {timeout:g} s)"
    trial.output += out
    return proc.returncode


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in "ZX"


def end_left(pids: list[int], seconds: float = 8) -> int:
    """How many of these processes are still alive after `seconds`; they are ended then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return len(left)


def listed(trial: Any) -> list[int]:
    path = trial.marks / "pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def by_command(*commands: str) -> list[int]:
    found = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return [pid for pid in found if command_line(pid) in commands]


def transcript(trial: Any, step: str) -> str:
    """The step's transcript in the newest run ('' when there is none)."""
    runs = Store(trial.root / "build").runs(LAB)
    try:
        return runs[-1].transcript(step) if runs else ""
    except RecordError:
        return ""


def unfinished(trial: Any) -> int:
    """`.tmp-` folders and half-written files a run left under build/."""
    build = trial.root / "build"
    return sum(1 for p in build.rglob("*") if p.name.startswith(".tmp-") or p.name.endswith(".tmp"))


def leave(trial: Any) -> None:
    course(trial, "run", LAB, "--force")  # a trial after the first would reuse the step
    trial.extra_left += end_left(listed(trial))


def timeout_inside(trial: Any) -> None:
    course(trial, "run", LAB)
    trial.extra_left += end_left(by_command("timeout 3071 sleep 3071", "sleep 3071"))
    if "start" not in transcript(trial, "inner"):  # the transcript was kept
        trial.extra_lost += 1


def late_writer(trial: Any) -> None:
    course(trial, "run", LAB, "--force")
    trial.extra_left += end_left(listed(trial))
    kept = set(transcript(trial, "count").splitlines())
    trial.lines_lost += sum(1 for i in range(1, LINES + 1) if f"line {i}" not in kept)


def loud(trial: Any) -> None:
    course(trial, "run", LAB, "--force", timeout=600)
    text = transcript(trial, "loud")
    note = re.search(
        r"\n\[\.\.\. [\d,]+ characters \(([\d,]+) lines\) of output not kept.*\]\n", text
    )
    dropped = int(note.group(1).replace(",", "")) if note else 0
    body = text.split("\n", 1)[1] if text else ""  # after the command
    kept = body.count("\n") - (2 if note else 0)
    # every line the step printed (the wide one, 100,000, 'took') is kept or counted as left out
    trial.lines_lost += max(0, LOUD_LINES + 2 - kept - dropped)
    took = re.search(r"^took ([\d.]+)$", text, re.MULTILINE)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"  output volume: the step measured itself at {took.group(1) if took else '?'} s; "
        f"largest child so far {peak:.0f} MiB resident",
        file=sys.stderr,
    )


@contextlib.contextmanager
def small_build(trial: Any, room: int, read_only: bool = False) -> Iterator[bool]:
    """The trial's build/ moved onto a small file system of its own, with `room` bytes free (or
    read-only) for the block, then moved back; False when it cannot be mounted (needs root)."""
    build = trial.root / "build"
    keep = Path(tempfile.mkdtemp(prefix="bench-build-"))
    shutil.copytree(build, keep / "build", symlinks=True)
    used = sum(p.stat().st_size + 4096 for p in build.rglob("*") if p.is_file())
    size = used + room + 64 * 1024
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(build)],
                      check=False, capture_output=True).returncode != 0:  # fmt: skip
        shutil.rmtree(keep)
        yield False
        return
    try:
        shutil.copytree(keep / "build", build, symlinks=True, dirs_exist_ok=True)
        free = os.statvfs(build).f_bavail * os.statvfs(build).f_frsize
        with (build / ".filler").open("wb") as fh:
            fh.write(b"\0" * max(0, free - room))
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(build)], check=True)
        yield True
    finally:
        after = Path(tempfile.mkdtemp(prefix="bench-build-"))
        shutil.copytree(build, after / "build", symlinks=True, ignore=lambda d, n: [".filler"])
        subprocess.run(["umount", "-l", str(build)], check=True)
        shutil.rmtree(build)
        shutil.copytree(after / "build", build, symlinks=True)
        shutil.rmtree(after)
        shutil.rmtree(keep)


def disk_full(trial: Any) -> None:
    with small_build(trial, 200 * 1024) as mounted:
        if not mounted:
            trial.output += "(skipped: mounting a small file system needs root)"
            return
        course(trial, "run", LAB)
        trial.extra_temp += unfinished(trial)


def read_only_build(trial: Any) -> None:
    with small_build(trial, 0, read_only=True) as mounted:
        if not mounted:
            trial.output += "(skipped: mounting a file system needs root)"
            return
        course(trial, "run", LAB)


def read_only_lab(trial: Any) -> None:
    lab = trial.root / "lab" / LAB
    every = [lab, *lab.rglob("*")]
    for path in every:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
    try:
        course(trial, "run", LAB)
    finally:
        for path in every:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def link_loop(trial: Any) -> None:
    lab = trial.root / "lab" / LAB
    for name in ("l1", "l2"):
        os.symlink(".", lab / name)
    try:
        course(trial, "run", LAB, "--dry-run", timeout=60)
    finally:
        for name in ("l1", "l2"):
            (lab / name).unlink()


def python9(trial: Any) -> None:
    path = trial.root / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text().replace("title: faults\n", "title: faults\npython: python9\n"))
    course(trial, "run", LAB)


def one_second(trial: Any) -> None:
    """Ten runs in one second, as an older runner numbered them (-2 ... -11) and as this one does
    (-02 ... -10, the second after): the newest must be the last one made. Removed afterwards."""
    store = Store(trial.root / "build")
    folder = store.lesson_dir(LAB)
    good = store.newest_good(LAB)
    assert good is not None
    made = ["2099-01-01T000000Z-cpu"] + [f"2099-01-01T000000Z-cpu-{n}" for n in range(2, 12)]
    second = datetime(2099, 1, 1, 0, 0, 1, tzinfo=UTC)
    try:
        for index in range(len(made) + 10):
            if index >= len(made):  # this runner's ten runs of the next second
                made.append(store.new_run_id(LAB, second, "cpu"))
            copy = good.record.model_copy(update={"run_id": made[index]})
            (folder / made[index]).mkdir()
            (folder / made[index] / "run.json").write_text(dump_json(copy.model_dump(mode="json")))
        order = [r.run_id for r in store.runs(LAB)][-len(made) :]
        chosen = store.newest_good(LAB)
        trial.extra_lost += order != made or chosen is None or chosen.run_id != made[-1]
        trial.output += (
            f"(ten runs in one second: the newest taken to be {chosen and chosen.run_id})"
        )
    finally:
        for run_id in made:
            shutil.rmtree(folder / run_id, ignore_errors=True)


def runner_kinds(kind: Callable[..., Any], mark: str) -> list[Any]:
    """The kinds, built with faults.py's `Kind` and its step mark."""
    server = f"PORT=$PORT2 setsid python3 server.py & {PIDS}; sleep 300"
    return [
        kind(
            "left its process group (setsid, set -m, timeout, new session, service)",
            f"""\
  - id: leave
    run: |
      {mark}setsid sleep 301 & {PIDS}
      (set -m; sleep 302 & {PIDS})
      timeout 303 sleep 303 & {PIDS}
      python3 -c 'import subprocess as s; print(s.Popen(["sleep","304"],start_new_session=1).pid)' >> "$MARKS/pids"
      sleep 0.5
  - id: detached
    start: {mark}{server}
    ready: {{url: "http://127.0.0.1:${{PORT2}}/health"}}
    deadline: 20
  - id: stop-detached
    stop: detached
""",  # noqa: E501
            leave,
            (
                "step 'leave': ended 5 processes it left running outside its process group",
                "step 'detached': ended 1 process it left running outside its process group",
            ),
        ),
        kind(
            "timeout inside a step that times out",
            f"  - id: inner\n    run: '{mark}echo start; timeout 3071 sleep 3071; echo end'\n"
            "    timeout: 1\n",
            timeout_inside,
            ("timed out after 1 s (timeout: 1 s)",),
        ),
        kind(
            "a late writer and the next step's lines",
            f"  - id: late\n    run: {mark}setsid sh -c 'sleep 4; echo late' & {PIDS}; sleep 0.3\n"
            f'  - id: count\n    run: {mark}for i in $(seq 1 {LINES}); do echo "line $i"; done\n',
            late_writer,
            ("step 'late': ended 2 processes it left running outside its process group",),
        ),
        kind(
            "output volume (16 MB line, 100,000 lines)",
            f"""  - id: loud
    run: {mark}python3 -c "import sys,time; t=time.perf_counter(); sys.stdout.write('x'*{WIDE}); print(); [print('line', i) for i in range({LOUD_LINES})]; print('took %.2f' % (time.perf_counter()-t))"
    timeout: 300
""",  # noqa: E501
            loud,
            ("lines not shown here ...]",),
        ),
        kind(
            "disk full in build/",
            f"  - id: big\n    run: {mark}python3 -c \"print('y' * 1_000_000)\"\n",
            disk_full,
            ("No space left on device (the file system mounted at",),
        ),
        kind(
            "read-only build folder",
            f"  - id: any\n    run: {mark}echo any\n",
            read_only_build,
            ("Read-only file system",),
        ),
        kind(
            "read-only lab folder",
            f"  - id: writes\n    run: {mark}mkdir results2 && test $(( 0$(stat -c %a .) & 0200 ))"
            " -ne 0 && echo scratch-writable\n",
            read_only_lab,
            ("scratch-writable",),
        ),
        kind(
            "scratch folder removed by a step",
            f'  - id: remove\n    run: {mark}rm -rf "$PWD"\n  - id: after\n    run: echo after\n',
            expect=("is gone: did a step remove it?",),
        ),
        kind(
            "duplicate keys in lab.yml",
            f"  - id: twice\n    run: {mark}echo first\n    run: {mark}echo second\n",
            expect=("'run' appears twice (first on line",),
        ),
        kind(
            "300-character step id",
            f"  - id: {'a' * 300}\n    run: {mark}true\n",
            expect=("is 300 characters long; at most 64",),
        ),
        kind(
            "link loop in the lab folder (dry run)",
            f"  - id: globbed\n    run: {mark}true\n    inputs: ['**/*.py']\n",
            link_loop,
            ("a folder that holds it: a loop",),
        ),
        kind("python: python9", "", python9, ("python: 'python9' is not found on local",)),
        kind(
            "kept path a folder or a FIFO",
            f"  - id: odd\n    run: {mark}mkdir -p outdir && mkfifo fifo\n"
            "    files: [outdir, fifo]\n",
            expect=("is a folder, not a file", "is not a regular file (a FIFO"),
        ),
        kind(
            "ten runs in one second",
            "",
            one_second,
            ("the newest taken to be 2099-01-01T000001Z-cpu-10",),
        ),
    ]
