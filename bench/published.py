"""The fault kinds of what gets published (issue 27, items 1-5 and 9), for bench/faults.py.

Each drives real `course run` and `course build` processes: on the echo-server lab of the trial
(masking, non-finite numbers), or on a copy of the pages' fixture site (tests/support.py) made in
the trial's marks folder (a hostile value on a page, a dotfile in a lab, a killed build).
"""

from __future__ import annotations

import base64
import html.parser
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import add_hostile_step, make_project, make_two_lesson_project

from course.run.procfs import group_members, processes

REPO = Path(__file__).resolve().parents[1]
COURSE = [sys.executable, "-m", "course"]
SECRET = "s3cr3t-Value-42"
"""The trials' HF_TOKEN (bench/faults.py)."""
PREFIX = "x" * 50
"""Printed before the secret into `base64`, so that its 76-column wrap cuts the secret's part."""


def course(trial: Any, root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*COURSE, "--root", str(root), *args],
        env={**trial.env, "COLUMNS": "400"},
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def through(trial: Any, root: Path, *args: str) -> int:
    proc = course(trial, root, *args)
    out, _ = proc.communicate(timeout=600)
    trial.output += out
    return proc.returncode


class Markup(html.parser.HTMLParser):
    """Counts what a recorded value would have become: scripts, handlers, javascript: links,
    emphasis made from its asterisks."""

    def __init__(self) -> None:
        super().__init__()
        self.found = 0
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if any(k.startswith("on") for k in values) or any(
            (v or "").strip().lower().startswith("javascript:") for v in values.values()
        ):
            self.found += 1
        self._in = tag

    def handle_data(self, data: str) -> None:
        if self._in == "script" and "window.injected" in data:
            self.found += 1
        if self._in == "strong" and data == "b":
            self.found += 1


def site(trial: Any, two: bool = False) -> Path:
    root = (make_two_lesson_project if two else make_project)(trial.marks / "site")
    for lab in (root / "lab").glob("*/lab.yml"):  # the fixture's GPU step runs here, on the CPU
        lab.write_text(lab.read_text().replace("    needs: gpu\n", ""))
    return root


def hostile_page(trial: Any) -> None:
    """Items 1-2: a step captures a script and Markdown as text; the page shows both."""
    root = site(trial)
    add_hostile_step(root, "<script>window.injected = 1</script>")  # no image: a PDF prints
    assert through(trial, root, "run", "tiny-cache") == 0, trial.output
    through(trial, root, "build")
    for path in (root / "site").rglob("*.html"):
        parser = Markup()
        parser.feed(path.read_text())
        trial.scripts += parser.found


def zip_secrets(root: Path) -> int:
    found = 0
    for path in (root / "site" / "downloads").glob("*.zip"):
        with zipfile.ZipFile(path) as archive:
            data = b"".join(archive.read(n) for n in archive.namelist())
        found += sum(leak.encode() in data for leak in (SECRET, "hf_" + "Zx" * 16))
    return found


def dotfile(trial: Any) -> None:
    """Item 3: an untracked .env and a token pasted into a lab file."""
    root = site(trial)
    lab = root / "lab" / "tiny-cache"
    (lab / ".env").write_text(f"MY_API_KEY={SECRET}\n")
    (lab / "token.py").write_text(f'EXAMPLE = "hf_{"Zx" * 16}"\n')
    through(trial, root, "build")
    trial.extra_leaks += zip_secrets(root)


def apart_leaks(root: Path) -> int:
    """Item 4: the secret whole, in UTF-16, split over two lines, or in wrapped base64."""
    encoded = base64.b64encode(f"{PREFIX}:{SECRET}".encode()).decode()[68:88]
    found = 0
    for path in (root / "build").rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        joined = data.decode(errors="replace").replace("\n", "")
        found += any(f.encode("utf-16-le") in data for f in (SECRET, SECRET[1:]))
        found += (
            SECRET in joined or encoded in joined or SECRET[8:] in data.decode(errors="replace")
        )
    return found


def apart(trial: Any) -> None:
    through(trial, trial.root, "run", "echo-server", "--from", "apart")
    trial.extra_leaks += apart_leaks(trial.root)


def non_finite(trial: Any) -> None:
    """Item 5: nan and inf fail the step; every run.json stays strict JSON."""
    through(trial, trial.root, "run", "echo-server", "--only", "odd")
    constants: list[str] = []
    for path in (trial.root / "build").rglob("run.json"):
        json.loads(path.read_text(), parse_constant=constants.append)
    if constants:  # not what the kind expects: it is not handled
        trial.output = f"run.json holds {constants}"


def children(pid: int) -> list[int]:
    return [p for p, state, parent, _ in processes() if parent == pid and state != "Z"]


def killed_build(sig: signal.Signals) -> Callable[[Any], None]:
    """Item 9: a build killed while its PDF workers print; what is left, after a next build."""

    def drive(trial: Any) -> None:
        root = site(trial, two=True)
        build = course(trial, root, "build")  # its own process group: the workers join it
        deadline = time.monotonic() + 120
        while not children(build.pid) and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # every worker forked
        build.send_signal(sig)
        try:  # a worker left behind holds the output pipe open: read until the build is gone
            out, _ = build.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            out = ""
        trial.output += out
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and group_members(build.pid):
            time.sleep(0.05)
        left = group_members(build.pid)
        trial.extra_left += len(left)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        build.communicate()
        through(trial, root, "build")
        trial.extra_temp += len(list(root.glob(".site.*")))

    return drive


def os_error(trial: Any) -> None:
    """The build side: a system error is a message naming the lesson and path."""
    root = site(trial)
    (root / ".cache").mkdir()
    (root / ".cache" / "package").write_text("a file where a folder should be\n")
    through(trial, root, "build")
    if "Traceback" in trial.output:  # not a message: it is not handled
        trial.output = "a traceback"


def published_kinds(kind: Callable[..., Any], mark: str) -> list[Any]:
    """The kinds, made with bench/faults.py's `Kind`; `mark` records a step's process group."""
    return [
        kind(
            "script in a recorded value",
            "",
            hostile_page,
            ("lesson page",),
        ),
        kind(
            "dotfile and token in a lab",
            "",
            dotfile,
            ("lab/tiny-cache/.env: a dotfile (it may hold secrets), so not in the zip",),
        ),
        kind(
            "secret split, wrapped, UTF-16, not UTF-8",
            f"""\
  - id: apart
    run: |
      {mark}echo "first: ${{HF_TOKEN:0:8}}"; echo "then: ${{HF_TOKEN:8}}"
      printf '{PREFIX}:%s' "$HF_TOKEN" | base64
      printf '{{"t": "%s"}}' "$HF_TOKEN" | iconv -t UTF-16 > wide.json
    files: [wide.json]
  - id: latin
    run: {mark}printf 'caf\\xe9 %s' "$HF_TOKEN" > latin.txt
    files: [latin.txt]
""",
            apart,
            ("latin.txt: a secret is in it, and it is not UTF-8 text",),
        ),
        kind(
            "nan and inf captured",
            f"""\
  - id: odd
    run: |
      {mark}echo "speed: nan"; echo '{{"t": Infinity}}' > odd.json
    capture:
      speed: {{regex: 'speed: (\\S+)', type: float}}
      t: {{json: odd.json, key: t, type: float}}
""",
            non_finite,
            ("capture 'speed': the value is nan, not a finite number",),
        ),
        kind(
            "build killed (kill -9)",
            "",
            killed_build(signal.SIGKILL),
            ("lesson page",),
        ),
        kind(
            "build interrupted (Ctrl-C)",
            "",
            killed_build(signal.SIGINT),
            ("lesson page",),
        ),
        kind(
            "system error while building",
            "",
            os_error,
            ("reading its page and lab: Not a directory: ",),
        ),
    ]
