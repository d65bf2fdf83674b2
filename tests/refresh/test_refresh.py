"""`course outdated` and `course refresh` against a package index served on 127.0.0.1 (PEP 691 JSON
and the HTML form), holding real wheels of a small engine: 1.0, 2.0 (which needs a helper package
the host lacks), a yanked 2.5 and a pre-release 3.0rc1. The fixture lesson runs on 1.0, then moves
to the newest release; its decode speed drops and two of its claims fail."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support import COURSE, LESSON, free_port, make_project

from course.pages.lessons import PageEntry, read_meta
from course.pages.render import render_page
from course.record.store import Store
from course.site import check_site

JSON_FORM = "application/vnd.pypi.simple.v1+json"


DECODE = '''"""Decoding speed, as the engine gives it."""
import tinyengine

print("model: tiny")
print("short: 312.4 tok/s")
print(f"long: {tinyengine.LONG} tok/s")
print("per token at 4096: 4.958 ms")
'''
PYPROJECT = """[project]
name = "tiny-cache-lab"
version = "1.0"
dependencies = ["numpy", "tinyengine==1.0"]

[project.optional-dependencies]
old = ["tinyengine>=1,<2"]
"""
README = 'Install the engine: `pip install "tinyengine==1.0"`.\n'


def wheel(folder: Path, name: str, version: str, code: str, requires: list[str]) -> Path:
    """A real pure-Python wheel of `name` at `version`."""
    stem = f"{name}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{name}/__init__.py": code,
        f"{stem}.dist-info/METADATA": meta,
        f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{stem}.dist-info/RECORD"] = (
        "".join(f"{n},,\n" for n in files) + f"{stem}.dist-info/RECORD,,\n"
    )
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for entry, text in files.items():
            archive.writestr(entry, text)
    return path


def make_index(root: Path) -> Path:
    """simple/<project>/ as JSON (index.json) and HTML (index.html), files/ beside it."""
    files = root / "files"
    files.mkdir(parents=True)
    releases = {
        "tinyengine": [
            (wheel(files, "tinyengine", "1.0", "LONG = 201.7\n", []), False),
            (
                wheel(
                    files, "tinyengine", "2.0", "from tinyhelper import LONG\n", ["tinyhelper>=2"]
                ),
                False,
            ),
            (wheel(files, "tinyengine", "2.5", "LONG = 1.0\n", []), "broken"),
            (wheel(files, "tinyengine", "3.0rc1", "LONG = 1.0\n", []), False),
        ],
        "tinyhelper": [(wheel(files, "tinyhelper", "2.0", "LONG = 150.0\n", []), False)],
    }
    for project, found in releases.items():
        page = root / "simple" / project
        page.mkdir(parents=True)
        entries = [
            {
                "filename": path.name,
                "url": f"../../files/{path.name}",
                "hashes": {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
                "yanked": yanked,
            }
            for path, yanked in found
        ]
        data = {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
        (page / "index.json").write_text(json.dumps(data), encoding="utf-8")
        links = "".join(
            f'<a href="{e["url"]}#sha256={e["hashes"]["sha256"]}"'
            f"{' data-yanked=' + chr(34) + 'broken' + chr(34) if e['yanked'] else ''}>"
            f"{e['filename']}</a>\n"
            for e in entries
        )
        (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n", encoding="utf-8")
    return root


class IndexHandler(http.server.SimpleHTTPRequestHandler):
    """A static index that answers a project page in the form the client asks for (PEP 691)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/simple/") and self.path.endswith("/"):
            wants_json = JSON_FORM in self.headers.get("Accept", "")
            name, kind = ("index.json", JSON_FORM) if wants_json else ("index.html", "text/html")
            path = Path(self.directory) / self.path.strip("/") / name
            if not path.is_file():
                self.send_error(404)
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


def checked_on(project: Path) -> str:
    """The day the kept answer of the package index was taken (UTC), as the pages show it."""
    checked = json.loads((project / ".cache" / "releases.json").read_text())["checked"]
    return str(datetime.fromisoformat(checked.replace("Z", "+00:00")).astimezone(UTC).date())


def report_of(project: Path) -> Path:
    """The refresh report `refresh` wrote last: build/refresh-<the day it ran>.md (a suite that
    runs past midnight UTC has two)."""
    return max((project / "build").glob("refresh-*.md"), key=lambda path: path.stat().st_mtime_ns)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = make_index(tmp_path_factory.mktemp("index"))
    handler = functools.partial(IndexHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()
    thread.join(5)


def pip_env(url: str) -> dict[str, str]:
    """pip reads only this index: no configuration files, none of this machine's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": url, "COLUMNS": "250",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, index: str) -> Path:
    """The fixture lesson on tinyengine (its decode speed from the engine), with a second lesson
    that does not use it; recorded once on tinyengine 1.0 from the index."""
    root = make_project(tmp_path_factory.mktemp("refresh") / "project")
    lab = root / "lab" / LESSON
    text = (lab / "lab.yml").read_text().replace("engine: [numpy]", "engine: [numpy, tinyengine]")
    text = text.replace("    needs: gpu\n", "")  # its decode runs here, on the CPU
    (lab / "lab.yml").write_text(
        text.replace("python3 decode.py --tokens 128 4096", "python3 decode.py")
    )
    (lab / "decode.py").write_text(DECODE)
    (lab / "pyproject.toml").write_text(PYPROJECT)
    (lab / "README.md").write_text(README)
    page = root / "docs" / "part-1" / "tiny.md"
    page.write_text(page.read_text() + "\nThese numbers come from tinyengine 1.0.\n")
    plain = root / "lab" / "plain"
    plain.mkdir()
    (plain / "lab.yml").write_text("lesson: plain\ntitle: No engine\nsteps:\n  - id: hello\n"
                                   "    run: echo hello\n")  # fmt: skip
    done = course(root, index, "run", LESSON, "--engine", "tinyengine==1.0")
    assert done.returncode == 0, done.stderr
    return root


def course(root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COURSE, "--root", str(root), *args], capture_output=True, text=True,
                          env=pip_env(url), timeout=180)  # fmt: skip


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_outdated_sees_the_newer_release_and_keeps_the_answer(project: Path, index: str) -> None:
    done = course(project, index, "outdated", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["index"] == index
    rows = {(r["lesson"], r["engine"]): r for r in found["engines"]}
    engine = rows[(LESSON, "tinyengine")]
    # 2.5 is yanked and 3.0rc1 a pre-release: 2.0 is the newest
    assert (engine["recorded"], engine["newest"], engine["outdated"]) == ("1.0", "2.0", True)
    assert rows[(LESSON, "numpy")]["newest"] is None  # not on this index
    kept = json.loads((project / ".cache" / "releases.json").read_text())
    assert kept["engines"]["tinyengine"] == {"package": "tinyengine", "newest": "2.0"}
    # the freshness page reads the kept answer, without the network
    meta, raw, _ = read_meta(project / "docs/authors/freshness.md", "docs/authors/freshness.md")
    page = render_page(project, PageEntry("authors/freshness.md", meta, raw)).markdown or ""
    assert f"newer release: tinyengine 2.0 (checked on {checked_on(project)})" in page


def test_outdated_offline_says_so_in_one_line(project: Path) -> None:
    port = free_port()
    done = course(project, f"http://127.0.0.1:{port}/simple/", "outdated")
    assert done.returncode == 0
    assert done.stdout == ""
    assert done.stderr.startswith(
        f"offline: the package index http://127.0.0.1:{port}/simple/ cannot be reached "
        "(ConnectError: "
    )
    day = checked_on(project)
    assert done.stderr.rstrip().endswith(
        f"nothing checked (the last answer, of {day}, is kept in .cache/releases.json)"
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_wheels_only_fetches_what_the_gpu_host_lacks(
    project: Path, index: str, tmp_path: Path
) -> None:
    host = tmp_path / "host.txt"
    # tinyhelper is there, at a version not known: 1.0 asked nothing of it, 2.0 asks for >=2
    host.write_text("# the GPU host\nnumpy==2.5.2\ntinyengine==1.0\ntinyhelper\n")
    done = course(project, index, "refresh", "--all", "--engine", "tinyengine==2.0",
                  "--wheels-only", "--host-packages", str(host))  # fmt: skip
    assert done.returncode == 0, done.stderr
    wheels = project / ".whl" / "engines"
    assert sorted(p.name for p in wheels.iterdir()) == [
        "tinyengine-2.0-py3-none-any.whl",
        "tinyhelper-2.0-py3-none-any.whl",
    ]
    assert (
        "tinyhelper-2.0-py3-none-any.whl: tinyengine now asks for tinyhelper>=2 (before: "
        "nothing)" in done.stderr
    )
    assert (
        "bash scripts/gpu-host-batch.sh 'tiny-cache --engine tinyengine==2.0 --engine "
        "tinyhelper==2.0 --wheels .whl/engines'"
    ) in done.stdout
    assert "course refresh tiny-cache --engine tinyengine==2.0 --report" in done.stdout


def test_refresh_plans_runs_compares_rewrites_pins_and_reports(project: Path, index: str) -> None:
    store = Store(project / "build")
    before = [r.run_id for r in store.runs(LESSON)]
    done = course(project, index, "refresh", "--all", "--engine", "tinyengine==latest")
    assert done.returncode == 1, done.stderr  # claims fail: the move needs an author
    assert "tinyengine==latest is 2.0 on " + index in done.stderr
    # the plan: the steps whose hash holds the engine run again; a lesson without it is untouched
    assert re.search(r"tiny-cache +│ size +│ +│ run +│ engine tinyengine 1\.0 -> 2\.0", done.stdout)
    assert re.search(
        r"tiny-cache +│ decode +│ +│ run +│ engine tinyengine 1\.0 -> 2\.0", done.stdout
    )
    assert re.search(r"plain +│ +│ +│ untouched +│ does not use tinyengine", done.stdout)
    assert "2 of 2 steps run again in 1 of 2 lessons, 0 reused; expected from the last records" in (
        done.stderr
    )
    new = Store(project / "build").runs(LESSON)[-1]
    assert new.good and new.record.engine["tinyengine"] == "2.0"
    assert new.record.options["engine"] == ["tinyengine==2.0", "tinyhelper==2.0"]
    assert new.record.step("decode").values["tps_long"].value == 150.0

    lab, page = project / "lab" / LESSON, project / "docs" / "part-1" / "tiny.md"
    assert '"tinyengine==2.0"' in (lab / "pyproject.toml").read_text()
    assert (lab / "README.md").read_text() == README.replace("1.0", "2.0")
    report = report_of(project).read_text()
    assert report.startswith("# tinyengine 1.0 → 2.0\n")
    assert f"build/{report_of(project).name}" in done.stdout
    tps = line_of(page, 'claim("within(decode.tps_long, 200, 1)"')
    ratio = line_of(page, 'claim("between(decode.tps_short / decode.tps_long, 1.5, 1.6)"')
    assert (
        f"- `docs/part-1/tiny.md:{tps}`: “Long decoding runs at about 200 tokens a second.” "
        "(`within(decode.tps_long, 200, 1)`; decode.tps_long = 150 tok/s)"
    ) in report
    assert f"- `docs/part-1/tiny.md:{ratio}`: “Short is 1.5 to 1.6 times as fast.”" in report
    assert f"claim fails, docs/part-1/tiny.md:{tps}" in done.stderr
    assert (
        '- `lab/tiny-cache/pyproject.toml:4` (moved): `dependencies = ["numpy", "tinyengine==2.0"]`'
        in report
    )
    assert "- `lab/tiny-cache/README.md:1` (moved)" in report
    assert "- `lab/tiny-cache/pyproject.toml:7`: `tinyengine>=1,<2`" in report  # a range to widen
    mention = line_of(page, "These numbers come from tinyengine 1.0.")
    assert f"- `docs/part-1/tiny.md:{mention}`: These numbers come from tinyengine 1.0." in report
    assert (
        "Installed beside the host's packages with `--engine tinyengine==2.0` `--engine "
        "tinyhelper==2.0`." in report
    )
    assert "| `decode.tps_long` | 201.7 tok/s | 150 tok/s | -25.6 % |" in report
    assert (
        "Blocked by tiny-cache: `course build` and `course publish` fail while a claim fails"
        in report
    )
    # publishing is blocked: the build (and so `course publish`) checks every claim
    _, problems = check_site(project)
    assert any("Long decoding runs at about 200 tokens a second." in p.message for p in problems)

    again = course(project, index, "refresh", LESSON, "--engine", "tinyengine==2.0", "--report")
    assert again.returncode == 1
    assert len(Store(project / "build").runs(LESSON)) == len(before) + 1  # --report runs nothing
    assert "Pinned to tinyengine==2.0 (0 moved by this refresh):" in report_of(project).read_text()


def test_a_page_pinned_to_the_old_release_keeps_the_labs_pins(project: Path, index: str) -> None:
    """While the page shows a run of 1.0 (its `run:`), the lab's files keep tinyengine==1.0: a
    learner installs what the page's numbers were measured with."""
    lab, page = project / "lab" / LESSON, project / "docs" / "part-1" / "tiny.md"
    runs = Store(project / "build").runs(LESSON)
    old = next(r for r in runs if r.record.engine.get("tinyengine") == "1.0")
    text = page.read_text()
    (lab / "pyproject.toml").write_text(PYPROJECT)  # as before the refresh above
    (lab / "README.md").write_text(README)
    page.write_text(
        text.replace(f"lesson: {LESSON}\n", f"lesson: {LESSON}\nrun: {old.run_id}\n", 1)
    )
    try:
        done = course(project, index, "refresh", LESSON, "--engine", "tinyengine==2.0", "--report")
        assert done.returncode == 1, done.stderr  # the new run's claims still fail
        assert (lab / "pyproject.toml").read_text() == PYPROJECT
        assert (lab / "README.md").read_text() == README
        report = report_of(project).read_text()
        assert f"- `docs/part-1/tiny.md` shows `{old.run_id}` ({LESSON})" in report
        assert "(0 moved by this refresh)" in report or "moved)" not in report
    finally:
        page.write_text(text)
