"""Helpers the test modules share (imported as `support`; tests never import each other).

make_project(dst)    the repository's site machinery plus the fixture lesson and its records
make_timed_project(dst)   the same plus `timed-sum`, a CPU lab whose timings carry their spread
write_timed_run(root, run_id, values)   a good run of `timed-sum` with these values
serving(folder)      a folder served over HTTP on 127.0.0.1 for the length of a block
free_port()          a TCP port nobody listens on right now
fresh_clone(dst)     the repository's files as a clone has them (no site, no caches)
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import re
import shutil
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course.package.expected import compare_files
from course.record.models import HashParts, HostFacts, Record, Spread, StepRecord, Value
from course.record.store import Store
from course.record.writer import RunWriter

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SITE_FIXTURE = FIXTURES / "site"
COURSE = [sys.executable, "-m", "course"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ZENSICAL = importlib.util.find_spec("zensical") is not None
"""Whether Zensical is installed (the `site` extra does not bring it)."""
NO_ZENSICAL = (
    "Zensical is not installed here: pip install zensical==0.0.73 (the site extra does not "
    "bring it) to build and test the site with it"
)
RUN = "2026-11-20T090000Z-h200"
"""The fixture lesson's newest good run."""
OLDER = "2026-11-19T090000Z-h200"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

CourseRun = Callable[..., subprocess.CompletedProcess[str]]


def course_at(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`course --root ROOT ARGS...` as a real process with a bare environment (wide tables)."""
    return subprocess.run(
        [*COURSE, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
    )


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_clone(dst: Path) -> Path:
    """The repository's files as a clone has them (written now): tracked, and new files not
    ignored; no site, no caches, no records made here."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            (dst / name).write_bytes(source.read_bytes())
    return dst


@dataclass(frozen=True)
class Published:
    """The repository published from a fresh clone by the CLI (conftest.py's `repo_published`)."""

    root: Path  # the clone (fresh_clone)
    done: subprocess.CompletedProcess[str]  # `course publish --site-url URL --to out/` there
    url: str  # the address published for: a local port, which `repo_site` serves

    @property
    def site_dir(self) -> Path:
        return self.root / "out"


def make_project(dst: Path) -> Path:
    """A project folder: the repository's site machinery and the fixture lesson, records
    included.
    """
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "mkdocs.yml", dst / "mkdocs.yml")
    for name in ("macros", "overrides", "docs"):
        shutil.copytree(REPO / name, dst / name, ignore=_IGNORE, dirs_exist_ok=True)
    # the fixture's lessons only: the repository's own lesson pages need records the fixture lacks
    for page in (dst / "docs").rglob("*.md"):
        if "lesson:" in page.read_text(encoding="utf-8").split("\n---", 1)[0]:
            page.unlink()
    shutil.copytree(SITE_FIXTURE, dst, ignore=_IGNORE, dirs_exist_ok=True)
    # the course's facts (prices, cards) and the lab kit, as in the repository
    shutil.copytree(REPO / "lab" / "common", dst / "lab" / "common", ignore=_IGNORE)
    return dst


TIMED_FIXTURE = FIXTURES / "timed"


def make_timed_project(dst: Path) -> Path:
    """The fixture project plus lesson `timed-sum` (no records yet): a lab that times summing
    numbers with repeats and writes each timing with its spread, and a page with claims on it."""
    make_project(dst)
    shutil.copytree(TIMED_FIXTURE, dst, ignore=_IGNORE, dirs_exist_ok=True)
    return dst


def timed(median: float, low: float, q1: float, q3: float, high: float, n: int = 15) -> Value:
    """A timed value in ms, recorded with its spread."""
    spread = Spread(n=n, min=low, q1=q1, q3=q3, max=high)
    return Value(value=median, type="float", unit="ms", spread=spread)


def write_timed_run(
    root: Path,
    run_id: str,
    values: dict[str, Value],
    script_sha: str = "a" * 64,
    host: HostFacts | None = None,
    before: list[StepRecord] | None = None,
) -> Path:
    """A finished good run of `timed-sum` with these values, written as `course run` writes one
    (RunWriter), after the steps `before` (a build step); its folder."""
    parts = HashParts(
        definition="d" * 64, inputs={"sum_times.py": script_sha}, engine={}, gpu="none"
    )
    step = StepRecord(id="time", kind="run", command="python3 sum_times.py", status="ok",
                      exit_code=0, values=values, hash=script_sha, hash_parts=parts)  # fmt: skip
    record = Record(
        lesson="timed-sum", title="Summing numbers", run_id=run_id, status="running",
        started=f"{run_id[:10]}T09:00:00Z", lab_file="lab/timed-sum/lab.yml",
        host=host or HostFacts(cpu="Intel Xeon (16 cores)"), engine={},
        steps=[*(before or []), step],
    )  # fmt: skip
    return RunWriter(Store(root / "build"), record).finish("ok").folder


LESSON = "tiny-cache"
"""The fixture lesson."""
STEM = "lesson-1.1"
"""The fixture lesson's downloads (`lesson-1.1.pdf`, `.zip`) and the zip's folder: its number."""
LONG_LINE = "lab $ " + " ".join(f"word{i:03d}" for i in range(60)) + " END-OF-THE-LONG-LINE"
WIDE_LINE = "WIDE " + " ".join(f"{i:>6,}" for i in range(1000, 14 * 1000, 1000)) + " END!"
"""A line exactly as wide as a terminal block shows whole (pages/widgets.TERMINAL_COLUMNS)."""
LONG_PAGE = f"""

## Long lines

```text
{LONG_LINE}
{WIDE_LINE}
```
"""


def make_package_project(dst: Path) -> Path:
    """The pages' fixture project, with a page holding a long line (for the PDF)."""
    make_project(dst)
    tiny = dst / "docs" / "part-1" / "tiny.md"
    tiny.write_text(tiny.read_text(encoding="utf-8") + LONG_PAGE, encoding="utf-8")
    return dst


TWO_LESSONS = """\
parts:
  - number: 1
    title: Fixtures
    lessons:
      - {id: tiny-cache, title: A tiny cache, page: part-1/tiny.md}
      - {id: tiny-two, title: A second tiny lesson}
      - {id: still-to-write, title: A lesson still to write}
authors: [writing-a-lesson.md]
"""
LINKS = """
## Links

As {{ lesson_link("tiny-two") }} (lesson {{ lesson_number("tiny-two") }}) shows, and
{{ lesson_link("tiny-two", text="the next one") }}.
"""


def make_two_lesson_project(dst: Path) -> Path:
    """The fixture project with a second written lesson, `tiny-two` (1.2: a copy of the first,
    with its own lab and records), and a third still coming; the first page links the second."""
    root = make_project(dst)
    shutil.copytree(root / "lab" / LESSON, root / "lab" / "tiny-two")
    lab = root / "lab" / "tiny-two" / "lab.yml"
    lab.write_text(lab.read_text().replace(f"lesson: {LESSON}", "lesson: tiny-two"))
    shutil.copytree(root / "build" / LESSON, root / "build" / "tiny-two")
    (root / "docs" / "course.yml").write_text(TWO_LESSONS, encoding="utf-8")
    page = root / "docs" / "part-1" / "tiny.md"
    text = page.read_text(encoding="utf-8").replace(
        'read_first: ["[Writing a lesson](../writing-a-lesson.md)"]',
        "read_first: [{tiny-two: the same again}, still-to-write, the attention step]",
    )
    page.write_text(text + LINKS, encoding="utf-8")
    (root / "docs" / "part-1" / "tiny-two.md").write_text(
        "---\nsummary: The second one.\n---\n\nShort: {{ value('decode.tps_short') }}.\n",
        encoding="utf-8",
    )
    return root


class _Quiet(http.server.SimpleHTTPRequestHandler):
    not_found: Path | None = None
    """A page to answer with (status 404) for what the folder lacks, as static hosts do."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code != 404 or self.not_found is None:
            super().send_error(code, message, explain)
            return
        body = self.not_found.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]
"""Debian's Chromium as root, asking nothing of the network by itself."""


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright (never a downloaded browser), closed afterwards."""
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


EVERY_BLOCK_LAID_OUT = ".md-typeset > * { content-visibility: visible !important; }"
"""The lesson's large blocks are laid out only near the screen (course.css: content-visibility);
an audit of the whole page (axe's colour contrast reads what is painted) needs them all laid
out, as each is when a reader scrolls to it."""


def lay_out_every_block(page: Any) -> None:
    """Lay out every block of the page open in `page` (a Playwright page), offscreen ones too."""
    page.add_style_tag(content=EVERY_BLOCK_LAID_OUT)


@contextlib.contextmanager
def serving(folder: Path, port: int = 0, not_found: str | None = None) -> Iterator[str]:
    """Serve a folder on a local port (a free one by default) for the duration of the block;
    with `not_found`, that file of the folder answers (404) for every missing address."""
    handler_class = type(
        "_Handler", (_Quiet,), {"not_found": folder / not_found if not_found else None}
    )
    handler = functools.partial(handler_class, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


SCRIPT = "<script>window.injected = 1</script><img src=x onerror='window.injected = 2'>"
MARKDOWN = "[x](javascript:alert(1)) **b** <javascript:alert(2)> $x$ | {{ y }}"
"""Text values a hostile step records: a script, and Markdown with a javascript: link."""
HOSTILE_STEP = """
  - id: hostile
    run: python3 hostile.py
    inputs: [hostile.py]
    capture:
      l: {json: hostile.json, key: l, type: str}
      m: {json: hostile.json, key: m, type: str}
"""
HOSTILE_PAGE = """

## Recorded text

Text: {{ value("hostile.l") }} and {{ value("hostile.m") }}.

{{ figure("tiny_cache", alt="A {hostile.l} {hostile.m}", caption="C {hostile.l} {hostile.m}") }}

{{ run_history(headline=["hostile.l", "hostile.m"]) }}
"""


def add_hostile_step(root: Path, script: str = SCRIPT) -> None:
    """A step `hostile` in the fixture lesson's lab that captures `script` and MARKDOWN as text,
    and a section of its page that shows them (in a value, a caption, alt text, a table)."""
    lab = root / "lab" / LESSON
    values = f"{{'l': {script!r}, 'm': {MARKDOWN!r}}}"
    (lab / "hostile.py").write_text(
        f"import json\njson.dump({values}, open('hostile.json', 'w'))\n"
    )
    (lab / "lab.yml").write_text((lab / "lab.yml").read_text() + HOSTILE_STEP)
    page = root / "docs" / "part-1" / "tiny.md"
    shorter = page.read_text().replace('lines="1-2,11-"', 'lines="1-2,4-"')  # the real output
    page.write_text(shorter + HOSTILE_PAGE)


def inflated(pdf: Path) -> bytes:
    """The PDF's bytes with its compressed streams (object streams included) inflated."""
    data = pdf.read_bytes()
    parts = [data]
    for match in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.DOTALL):
        try:
            parts.append(zlib.decompress(match.group(1)))
        except zlib.error:
            continue
    return b"\n".join(parts)


def run_compare_py(top: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """compare.py (with the files it reads beside it) run in `top`/lab, a lesson folder laid out as
    its zip is, as a learner runs it on a machine without nvidia-smi."""
    for name, data in compare_files().items():
        (top / name).write_bytes(data)
    return subprocess.run(
        [sys.executable, "-I", "compare.py"],
        cwd=top / "lab",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},  # no nvidia-smi: no GPU here
        timeout=60,
    )


ENGINE_524 = Path(__file__).resolve().parents[1] / ".cache" / "test-engines" / "transformers-5.24.0"
"""transformers 5.24.0 beside the project's Python (which keeps 5.17.0 for the labs' tests of
that release): the release the lessons' records are made with."""


def python_524() -> Path | None:
    """A `python` that imports transformers 5.24.0 and huggingface_hub 2.4.0 before the project's
    own packages: installed from the package index into `.cache/test-engines/` the first time (a
    lock keeps parallel workers to one install); None when the index cannot be reached."""
    import fcntl

    wrapper = ENGINE_524 / "bin" / "python"
    if wrapper.exists():
        return wrapper
    ENGINE_524.parent.mkdir(parents=True, exist_ok=True)
    with open(ENGINE_524.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if wrapper.exists():
            return wrapper
        packages = ENGINE_524 / "site"

        def pip(*args: str) -> bool:
            command = [sys.executable, "-m", "pip", "install", "-q", "--target", str(packages)]
            done = subprocess.run([*command, *args], capture_output=True, timeout=600)
            return done.returncode == 0

        ok = pip("--no-deps", "transformers==5.24.0", "huggingface_hub==2.4.0")
        missing = _lacking(packages, ("transformers", "huggingface_hub")) if ok else []
        if missing:  # what they need that the project's Python lacks
            ok = pip(*missing)
        if not ok:
            shutil.rmtree(packages, ignore_errors=True)
            return None
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(
            f'#!/bin/sh\nPYTHONPATH="{packages}${{PYTHONPATH:+:$PYTHONPATH}}" '
            f'exec "{sys.executable}" "$@"\n'
        )
        wrapper.chmod(0o755)
    return wrapper


def _lacking(folder: Path, names: tuple[str, ...]) -> list[str]:
    """The requirements of the distributions `names` installed in `folder` that neither the
    project's Python nor `folder` meets (their extras left out)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    here = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in md.distributions()}
    there = {
        d.metadata["Name"].lower().replace("_", "-"): d.version
        for d in md.distributions(path=[str(folder)])
    }
    lacking = []
    for name in names:
        (info,) = folder.glob(f"{name}-*.dist-info")
        for line in md.Distribution.at(info).requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            key = req.name.lower().replace("_", "-")
            have = there.get(key) or here.get(key)
            if have is None or not req.specifier.contains(have, prereleases=True):
                lacking.append(str(req.name) + str(req.specifier))
    return sorted(set(lacking))
