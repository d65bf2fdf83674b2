"""Every fault the runner handles, N times each, and a soak of consecutive runs.

Each trial runs `course run` (a real process) on a copy of the fixture lab `echo-server`, with a
service up and a step that meets the fault, then looks for what the fault left behind:

    processes left   live processes of the run's process groups (each step writes its `$$`),
                     and the runner itself, once the run had a few seconds to end
    temp left        scratch folders under the temporary folder that the trial left
    good runs lost   the good run made before the trials is gone, changed, or no longer chosen
    secrets leaked   a secret (or its base64 or URL-encoded form, a token-shaped string, a file
                     from outside the lab) found in any record or in what the runner printed
    false masks      a plain value masked: "warm: false" with TOKENIZERS_PARALLELISM=false set,
                     its capture, or a kept JSON file that masking made invalid
    lines lost       lines a step printed that its transcript neither holds nor counts as left
                     out (`runner_faults.py`: the runner's kinds of issue 27)
    scripts injected a recorded text value that became markup on the built page: a <script> or
                     an element with an on… handler, a javascript: link, Markdown emphasis

Then the soak: SOAK consecutive runs of the lab, service included, in this process (so that a
leak of the runner's own descriptors or threads would pile up), with open descriptors,
threads, processes and temporary folders counted before and after.

    .venv/bin/python bench/faults.py [--runs 3] [--soak 200] [--only KIND ...]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from fault_host import SshServer  # noqa: E402
from published import published_kinds  # noqa: E402
from runner_faults import runner_kinds  # noqa: E402

from course.record.store import Store  # noqa: E402
from course.run.process import GUARD, WATCHER  # noqa: E402
from course.run.procfs import command_line, group_members, processes  # noqa: E402

LAB = "echo-server"
COURSE = [sys.executable, "-m", "course"]
SECRET = "s3cr3t-Value-42"
HUB = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm01234567"
OUTSIDE = "OUTSIDE-CONTENT-7731"
SHAPES = ["sk-proj-Ab3dEf6hIj9kLmN0pQrStU", "ghp_" + "A1b2" * 9, "AKIAIOSFODNN7EXAMPLE"]
LEAKS = [
    SECRET,
    HUB,
    base64.b64encode(f"user:{SECRET}".encode()).decode(),
    quote(f"{SECRET}/x", safe=""),
    OUTSIDE,
    *SHAPES,
]
PRIVATE = Path(tempfile.mkdtemp(prefix="bench-faults-tmp-"))
"""The runners' temporary folder (TMPDIR): what they leave there is theirs alone, not another
program's that happens to share /tmp."""
MARK = 'echo $$ >> "$MARKS/pgids"; '

BASE = """\
lesson: echo-server
title: faults
steps:
  - id: prepare
    run: {mark}python3 prepare.py
    inputs: [prepare.py, numbers.txt]
    capture:
      largest: {{regex: 'largest is ([\\d,]+)', type: int}}
  - id: server
    start: {mark}pwd > "$MARKS/scratch"; exec python3 server.py
    ready: {{url: "http://127.0.0.1:${{PORT}}/health"}}
    deadline: 20
    inputs: [server.py]
  - id: mask
    run: |
      {mark}echo "warm: $TOKENIZERS_PARALLELISM"; echo "token $HF_TOKEN and $HUB_TOKEN"
      echo "basic $(printf 'user:%s' "$HF_TOKEN" | base64)"
      printf '{{"warm": %s, "t": "%s"}}' "$TOKENIZERS_PARALLELISM" "$HF_TOKEN" > mask.json
    inputs: []
    files: [mask.json]
    capture:
      warm: {{regex: 'warm: (\\w+)', type: str}}
  - id: query
    run: {mark}python3 client.py $(cat numbers.txt)
    inputs: [client.py, numbers.txt]
    files: [results/client.json]
    capture:
      sum: {{regex: 'sum of squares: ([\\d,]+)', type: int}}
{fault}  - id: stop-server
    stop: server
  - id: words
    run: {mark}python3 words.py
    inputs: [words.py, words.txt]
    capture:
      longest: {{regex: 'longest has (\\d+) letters', type: int}}
"""

LONG = f"""\
  - id: long
    run: {MARK}touch "$MARKS/long"; sleep 120 & sleep 120
"""


@dataclass
class Trial:
    """One run of one fault: the project, its marks, and what the runner printed."""

    root: Path
    marks: Path
    env: dict[str, str]
    output: str = ""
    runner: int | None = None
    """A runner pid still to be checked (it must have exited)."""
    extra_groups: list[int] = field(default_factory=list)
    extra_left: int = 0
    """Processes left outside the run's groups (a remote host's supervisors)."""
    extra_temp: int = 0
    """Folders left outside the runners' temporary folder (a remote host's)."""
    extra_lost: int = 0
    """Good runs lost where the baseline check does not look (a newest run chosen wrongly)."""
    lines_lost: int = 0
    """Lines a step printed that its transcript lost."""
    extra_leaks: int = 0
    """Secrets found where `leaked` does not look (a lesson zip, another encoding)."""
    scripts: int = 0
    """Recorded values that became markup on a built page."""


def course(trial: Trial, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
        [*COURSE, "--root", str(trial.root), *args],
        env=trial.env,
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,
    )


def finish(trial: Trial, proc: subprocess.Popen[str], timeout: float = 120) -> int:
    out, _ = proc.communicate(timeout=timeout)
    trial.output += out or ""
    return proc.returncode


def run_through(trial: Trial, *args: str) -> int:
    return finish(trial, course(trial, "run", LAB, *args))


def wait_mark(trial: Trial, name: str = "long", seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not (trial.marks / name).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the mark {name} never appeared:\n{trial.output}")
        time.sleep(0.05)
    time.sleep(0.3)


def signalled(sig: signal.Signals) -> Callable[[Trial], None]:
    def fault(trial: Trial) -> None:
        proc = course(trial, "run", LAB)
        wait_mark(trial)
        proc.send_signal(sig)
        finish(trial, proc)

    return fault


def hang_up(trial: Trial) -> None:
    pid, terminal = pty.fork()
    if pid == 0:
        os.chdir(REPO)
        os.execve(sys.executable, [*COURSE, "--root", str(trial.root), "run", LAB], trial.env)
    try:
        while not (trial.marks / "long").exists():
            try:
                os.read(terminal, 65536)
            except OSError:
                break
        time.sleep(0.3)
    finally:
        os.close(terminal)  # the terminal window closes
    os.waitpid(pid, 0)


def helpers_of(trial: Trial) -> list[int]:
    groups = pgids(trial)
    scratch = str(scratch_of(trial))
    return [
        pid
        for pid, state, _, group in processes()
        if state != "Z"
        and (
            (group in groups and WATCHER in command_line(pid))
            or (GUARD in command_line(pid) and scratch in command_line(pid))
        )
    ]


def kill_all(trial: Trial) -> None:
    """The runner and its watchers die at once; the next run must clean up after them."""
    proc = course(trial, "run", LAB)
    wait_mark(trial)
    for pid in helpers_of(trial):
        os.kill(pid, signal.SIGKILL)
    proc.kill()
    finish(trial, proc)
    run_through(trial, "--only", "words")


def concurrent(trial: Trial) -> None:
    first = course(trial, "run", LAB)
    wait_mark(trial)
    second = run_through(trial)
    assert second == 1 and "another run of 'echo-server' is in progress" in trial.output
    first.terminate()
    finish(trial, first)


def port_held(trial: Trial) -> None:
    impostor = subprocess.Popen(
        [sys.executable, "server.py", trial.env["PORT"]],
        cwd=trial.root / "lab" / LAB,
        stdout=subprocess.DEVNULL,
        env={k: v for k, v in trial.env.items() if k != "PORT"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", int(trial.env["PORT"])), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        run_through(trial, "--force")  # the service starts again, on a port already taken
        said = " ".join(trial.output.split())
        assert f"is in use by pid {impostor.pid}" in said, said
    finally:
        impostor.kill()
        impostor.wait()


def outside_paths(trial: Trial) -> None:
    outside = trial.marks / "outside"
    outside.mkdir()
    (outside / "o.json").write_text(json.dumps({"a": OUTSIDE}))
    (outside / "o.txt").write_text(OUTSIDE + "\n")
    run_through(trial)
    run_through(trial, "--only", "../../" + str(outside.relative_to(Path("/").resolve())))


def damaged(trial: Trial) -> None:
    store = Store(trial.root / "build")
    failed = [r for r in store.runs(LAB) if not r.good]
    source = failed[0].folder if failed else store.runs(LAB)[0].folder
    copy = source.with_name("2000-01-01T000000Z-cpu")
    shutil.copytree(source, copy)
    (copy / "run.json").write_text((copy / "run.json").read_text()[:100])
    try:
        code = run_through(trial, "--only", "words")
        assert code == 0 and "damaged record, skipped" in trial.output, trial.output
    finally:
        shutil.rmtree(copy)


def dropped_ssh(server: SshServer | None) -> Callable[[Trial], None]:
    def fault(trial: Trial) -> None:
        assert server is not None
        names = ["MARKS", "PORT", "HF_TOKEN", "HUB_TOKEN", "TOKENIZERS_PARALLELISM"]
        args = [*server.args(), *(a for n in names for a in ("--env", n))]
        proc = course(trial, "run", LAB, *args)
        wait_mark(trial)
        server.drop()
        finish(trial, proc)
        deadline = time.monotonic() + 8  # the host's supervisors end their groups and go
        while time.monotonic() < deadline and (server.supervisors() or server.folders()):
            time.sleep(0.05)
        trial.extra_left += len(server.supervisors())
        trial.extra_temp += len(server.folders())
        for folder in server.folders():
            shutil.rmtree(folder, ignore_errors=True)

    return fault


@dataclass
class Kind:
    """A fault: the step that meets it, how the run is driven into it, and what the runner must
    say about it (in its output, or in the record of the run it failed)."""

    name: str
    step: str
    drive: Callable[[Trial], object] = run_through
    expect: tuple[str, ...] = ()


def said(trial: Trial, kind: Kind) -> bool:
    """Whether the runner said what it must, in its output or in the newest failed record."""
    text = " ".join(trial.output.split())
    folder = trial.root / "build" / LAB
    records = sorted(folder.glob("*/run.json")) + sorted(folder.glob(".tmp-*/run.json"))
    newest = max(records, key=lambda p: p.stat().st_mtime, default=None)
    if newest is not None:
        text += " " + newest.read_text()
    return all(e in text for e in kind.expect)


def kinds(server: SshServer | None) -> list[Kind]:
    never = f"""\
  - id: mute
    start: {MARK}sleep 60
    ready: {{url: "http://127.0.0.1:${{PORT2}}/health"}}
    deadline: 1
"""
    return [
        Kind(
            "non-zero exit",
            f"  - id: broken\n    run: {MARK}sleep 30 & exit 3\n",
            expect=("the command exited with status 3",),
        ),
        Kind(
            "timeout",
            f"  - id: slow\n    run: {MARK}(sleep 60; echo never) & sleep 60\n    timeout: 1\n",
            expect=("timed out after 1 s",),
        ),
        Kind("never ready", never, expect=("was not ready after its deadline of 1 s",)),
        Kind(
            "dies before ready",
            f"  - id: early\n    start: {MARK}exit 2\n    ready: {{log: never}}\n",
            expect=("exited with status 2 before it was ready",),
        ),
        Kind(
            "dies after ready",
            f"  - id: flaky\n    start: {MARK}echo up; sleep 0.3; exit 4\n"
            f"    ready: {{log: '^up'}}\n  - id: waits\n    run: {MARK}sleep 5\n",
            expect=("the service died (exit status 4) while step 'waits' ran",),
        ),
        Kind(
            "missing capture",
            f"  - id: quiet\n    run: {MARK}echo nothing\n    files: [missing.txt]\n"
            "    capture:\n      speed: {regex: 'speed: ([\\d.]+)'}\n",
            expect=("matched nothing", "(listed under files) was not produced"),
        ),
        Kind("Ctrl-C", LONG, signalled(signal.SIGINT), ("interrupted (SIGINT: Ctrl-C)",)),
        Kind("SIGTERM", LONG, signalled(signal.SIGTERM), ("interrupted (SIGTERM)",)),
        Kind("concurrent runs", LONG, concurrent, ("another run of 'echo-server' is in",)),
        Kind("dropped SSH", LONG, dropped_ssh(server), ("dropped while the step ran",)),
        Kind("kill -9 of the runner", LONG, signalled(signal.SIGKILL), ('"status": "running"',)),
        Kind("kill -9 of runner and watchers", LONG, kill_all, ("died without cleaning up",)),
        Kind("terminal closed (SIGHUP)", LONG, hang_up, ("SIGHUP: the terminal closed",)),
        Kind("port held by another process", "", port_held, ("is in use by pid",)),
        Kind(
            "secrets and token shapes",
            f"  - id: shapes\n    run: {MARK}echo {' '.join(SHAPES)}; "
            f'python3 -c \'import urllib.parse as u; print(u.quote("{SECRET}/x", safe=""))\'\n',
        ),
        Kind(
            "paths outside the lab",
            f"  - id: peek\n    run: {MARK}ln -s $MARKS/outside/o.json l.json; "
            "ln -s $MARKS/outside/o.txt k.txt\n    files: [k.txt]\n"
            "    capture:\n      a: {json: l.json, key: a, type: str}\n",
            outside_paths,
            ("'l.json' is outside the lab folder", "'k.txt' (listed under files) is outside"),
        ),
        Kind("damaged record", "", damaged, ("damaged record, skipped",)),
        Kind(
            "GPU step without a GPU",
            f"  - id: on-gpu\n    needs: gpu\n    run: {MARK}true\n",
            expect=("refused, nothing was run", "step on-gpu needs a GPU"),
        ),
        *runner_kinds(Kind, MARK),
        *published_kinds(Kind, MARK),
    ]


def pgids(trial: Trial) -> list[int]:
    path = trial.marks / "pgids"
    found = {int(x) for x in path.read_text().split()} if path.exists() else set()
    return sorted(found | set(trial.extra_groups))


def scratch_of(trial: Trial) -> Path:
    path = trial.marks / "scratch"
    return Path(path.read_text().strip()).parent if path.exists() else PRIVATE / "none"


def temp_folders() -> set[Path]:
    return set(PRIVATE.iterdir())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_lab(root: Path, fault: str) -> None:
    text = BASE.format(mark=MARK, fault=fault)
    (root / "lab" / LAB / "lab.yml").write_text(text)


def left_processes(trial: Trial, seconds: float = 8) -> int:
    groups = pgids(trial)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(group_members(g) for g in groups):
        time.sleep(0.05)
    left = sum(len(group_members(g)) for g in groups)
    for g in groups:  # clean up for the next trial, whatever the verdict
        for pid in group_members(g):
            os.kill(pid, signal.SIGKILL)
    return left


def false_masks(root: Path, before: set[str]) -> int:
    """A plain value masked in a run this trial recorded (where its mask step ran)."""
    bad = 0
    for run in Store(root / "build").runs(LAB):
        if run.run_id in before:
            continue
        step = next((s for s in run.record.steps if s.id == "mask"), None)
        if step is None or step.status not in ("ok",):
            continue
        transcript = (run.folder / (step.transcript or "none")).read_text()
        kept = run.folder / "files/mask/mask.json"
        try:
            valid = json.loads(kept.read_text()) == {"warm": False, "t": "***"}
        except (OSError, ValueError):
            valid = False
        warm = step.values.get("warm")
        if "warm: false" not in transcript or warm is None or warm.value != "false" or not valid:
            bad += 1
    return bad


def leaked(root: Path, output: str) -> bool:
    texts = [output]
    for path in (root / "build").rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode(errors="replace"))
    everything = "\n".join(texts)
    return any(leak in everything for leak in LEAKS)


@dataclass
class Row:
    kind: str
    runs: int = 0
    left: int = 0
    temp: int = 0
    lost: int = 0
    leaks: int = 0
    masks: int = 0
    lines: int = 0
    scripts: int = 0
    handled: int = 0
    seconds: float = 0.0


def trial_env(marks: Path) -> dict[str, str]:
    """What a trial's runner gets: this checkout first on the path, free ports, the secrets."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "COLUMNS": "200",
        "PORT": str(free_port()),
        "PORT2": str(free_port()),
        "MARKS": str(marks),
        "TMPDIR": str(PRIVATE),
        "HF_TOKEN": SECRET,
        "HUB_TOKEN": HUB,
        "TOKENIZERS_PARALLELISM": "false",
    }


def trial(root: Path, kind: Kind, baseline: tuple[str, str], row: Row) -> None:
    marks = Path(tempfile.mkdtemp(prefix="bench-marks-"))
    t = Trial(root, marks, trial_env(marks))
    write_lab(root, kind.step)
    before_runs = {r.run_id for r in Store(root / "build").runs(LAB)}
    temp_before = temp_folders()
    started = time.perf_counter()
    try:
        kind.drive(t)
    finally:
        row.seconds += time.perf_counter() - started
        row.runs += 1
        row.left += left_processes(t) + t.extra_left
        time.sleep(0.2)
        new_temp = temp_folders() - temp_before
        row.temp += len(new_temp) + t.extra_temp
        for p in new_temp:
            shutil.rmtree(p, ignore_errors=True)
        run_id, sha = baseline
        store = Store(root / "build")
        good = store.newest_good(LAB)
        kept = root / "build" / LAB / run_id / "run.json"
        if good is None or good.run_id < run_id or not kept.exists() or digest(kept) != sha:
            row.lost += 1
        row.lost += t.extra_lost
        row.lines += t.lines_lost
        row.leaks += leaked(root, t.output) or t.extra_leaks > 0
        row.scripts += t.scripts
        row.handled += said(t, kind)
        row.masks += false_masks(root, before_runs)
        shutil.rmtree(marks, ignore_errors=True)


def project(base: Path) -> Path:
    root = base / "project"
    shutil.copytree(
        REPO / "tests/fixtures/project", root, ignore=shutil.ignore_patterns("build", "__pycache__")
    )
    return root


def faults(runs: int, only: list[str]) -> list[Row]:
    base = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    server = SshServer.start(base / "sshd") if SshServer.possible() else None
    try:
        root = project(base)
        marks = base / "marks"
        marks.mkdir()
        write_lab(root, "")
        done = subprocess.run(
            [*COURSE, "--root", str(root), "run", LAB],
            env=trial_env(marks),
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        good = Store(root / "build").newest_good(LAB)
        assert good is not None
        baseline = (good.run_id, digest(good.folder / "run.json"))
        rows = []
        for kind in kinds(server):
            if only and not any(o.lower() in kind.name.lower() for o in only):
                continue
            if kind.name == "dropped SSH" and server is None:
                print(f"{kind.name}: skipped (needs sshd and root)", file=sys.stderr)
                continue
            row = Row(kind.name)
            for _ in range(runs):
                trial(root, kind, baseline, row)
            print(f"{kind.name}: done in {row.seconds:.1f} s", file=sys.stderr)
            rows.append(row)
        return rows
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def ours() -> tuple[int, int]:
    """Descendants of this process (live, zombie)."""
    me = os.getpid()
    table = processes()
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, state, parent, _ in table:
        children.setdefault(parent, []).append((pid, state))
    live = zombies = 0
    todo = [me]
    while todo:
        for pid, state in children.get(todo.pop(), []):
            if state == "Z":
                zombies += 1
            else:
                live += 1
            todo.append(pid)
    return live, zombies


def counts() -> dict[str, int]:
    live, zombies = ours()
    helpers = sum(
        1
        for pid, state, _, _ in processes()
        if state != "Z" and (WATCHER in command_line(pid) or GUARD in command_line(pid))
    )
    return {
        "open descriptors (this process)": len(os.listdir("/proc/self/fd")),
        "threads (this process)": threading.active_count(),
        "descendant processes, live": live,
        "descendant processes, zombie": zombies,
        "watchers and guards anywhere": helpers,
        "folders in the runs' temporary folder": len(temp_folders()),
    }


def soak(n: int) -> tuple[dict[str, int], dict[str, int], float]:
    from rich.console import Console

    from course.remote.targets import make_target
    from course.run.options import Options
    from course.run.runner import run_lesson

    base = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    try:
        root = project(base)
        console = Console(file=io.StringIO())
        marks = base / "marks"
        marks.mkdir()
        os.environ.update(trial_env(marks))
        tempfile.tempdir = str(PRIVATE)  # the runs' scratch folders go there
        options = Options(force=True, quiet=True)
        run_lesson(root, LAB, options, console, make_target)  # warm: imports, caches
        start = counts()
        started = time.perf_counter()
        for _ in range(n):
            run = run_lesson(root, LAB, options, console, make_target)
            assert run is not None and getattr(run.record, "status", None) == "ok"
        seconds = time.perf_counter() - started
        time.sleep(0.5)
        return start, counts(), seconds
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    try:
        measure()
    finally:
        shutil.rmtree(PRIVATE, ignore_errors=True)


def measure() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="trials per fault kind")
    parser.add_argument("--soak", type=int, default=200, help="consecutive runs (0: none)")
    parser.add_argument("--only", nargs="*", default=[], help="fault kinds whose name holds this")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = faults(args.runs, args.only) if args.runs else []
    t1 = time.perf_counter()
    if rows:
        print(
            "| fault | runs | handled as expected | processes left | temp folders left "
            "| good runs lost | secrets leaked | false masks | lines lost | scripts injected "
            "| seconds per run |"
        )
        print("| --- " * 11 + "|")
        for r in rows:
            print(
                f"| {r.kind} | {r.runs} | {r.handled} | {r.left} | {r.temp} | {r.lost} "
                f"| {r.leaks} | {r.masks} | {r.lines} | {r.scripts} "
                f"| {r.seconds / max(r.runs, 1):.1f} |"
            )
        print(f"\n{sum(r.runs for r in rows)} trials in {t1 - t0:.0f} s")
    if args.soak:
        start, end, seconds = soak(args.soak)
        print(
            f"\nSoak: {args.soak} consecutive runs of the fixture lab {LAB} (five steps, one of "
            "them a service with a readiness URL; --force) in one process, "
            f"{seconds:.0f} s ({seconds / args.soak:.2f} s a run)\n"
        )
        print("| | at the start | at the end |")
        print("| --- | --- | --- |")
        for key in start:
            print(f"| {key} | {start[key]} | {end[key]} |")


if __name__ == "__main__":
    main()
