"""Helpers the test modules share (imported as `support`; tests never import each other).

make_project(dst)    the repository's site machinery plus the fixture lesson and its records
serving(folder)      a folder served over HTTP on 127.0.0.1 for the length of a block
free_port()          a TCP port nobody listens on right now
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import shutil
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SITE_FIXTURE = FIXTURES / "site"
COURSE = [sys.executable, "-m", "course"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
RUN = "2026-11-20T090000Z-h200"
"""The fixture lesson's newest good run."""
OLDER = "2026-11-19T090000Z-h200"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

CourseRun = Callable[..., subprocess.CompletedProcess[str]]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    return dst


LESSON = "tiny-cache"
"""The fixture lesson."""
STEM = "lesson-1.1"
"""The fixture lesson's downloads (`lesson-1.1.pdf`, `.zip`) and the zip's folder: its number."""
LONG_LINE = "lab $ " + " ".join(f"word{i:03d}" for i in range(60)) + " END-OF-THE-LONG-LINE"
LONG_PAGE = f"""

## Long lines

```text
{LONG_LINE}
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
