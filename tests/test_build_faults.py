"""A build that dies leaves no process and, after the next build, no folder; a build that meets an
operating system's error says which lesson and path, without a traceback. Real `course build`
processes, killed for real."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import COURSE, make_two_lesson_project

from course.run.procfs import group_members, processes


def start_build(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*COURSE, "--root", str(root), "build"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def children(pid: int) -> list[int]:
    return [p for p, state, parent, _ in processes() if parent == pid and state != "Z"]


def alive(group: int, seconds: float) -> list[int]:
    """The processes of the build's group (its workers) still alive after `seconds`; killed."""
    deadline = time.monotonic() + seconds
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = group_members(group)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob(".site.*"))


def test_a_killed_build_ends_its_pdf_workers_and_the_next_build_cleans_up(
    tmp_path: Path,
) -> None:
    root = make_two_lesson_project(tmp_path / "project")  # two PDFs: printed by two workers
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        # no PDF kept from the build before (one may finish before its signal): each build prints
        shutil.rmtree(root / ".cache" / "package", ignore_errors=True)
        build = start_build(root)
        deadline = time.monotonic() + 120
        while not children(build.pid):
            assert build.poll() is None and time.monotonic() < deadline, "no PDF worker started"
            time.sleep(0.02)
        time.sleep(0.3)  # every worker forked
        build.send_signal(sig)
        build.wait(timeout=60)
        assert alive(build.pid, 10) == [], f"{sig.name}: workers outlived the build"
        build.communicate(timeout=10)  # no worker holds its stderr open
    assert [n for n in leftovers(root) if n.startswith(".site.building-")]  # the killed one
    done = subprocess.run(
        [*COURSE, "--root", str(root), "build"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert leftovers(root) == []


def test_a_build_folder_whose_builder_lives_is_left_alone(tmp_path: Path) -> None:
    from course.site.build import _remove_stale, _started

    mine = tmp_path / f".site.building-{os.getpid()}-{_started(os.getpid())}-abc"
    gone = tmp_path / ".site.building-999999999-12-abc"  # no such process
    reused = tmp_path / f".site.building-{os.getpid()}-1-abc"  # this pid, another start
    for folder in (mine, gone, reused):
        folder.mkdir()
    _remove_stale(tmp_path / "site")
    assert leftovers(tmp_path) == [mine.name]


@pytest.mark.parametrize("where", ["cache", "site"])
def test_an_os_error_names_the_lesson_and_the_path(tmp_path: Path, where: str) -> None:
    root = make_two_lesson_project(tmp_path / "project")
    blocker = root / ".cache" / "package" if where == "cache" else tmp_path / "file"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where a folder should be\n")
    args = ["--site-dir", str(blocker / "site")] if where == "site" else []
    done = subprocess.run(
        [*COURSE, "--root", str(root), "build", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())
    expected = {
        "cache": "lesson 'tiny-cache' (docs/part-1/tiny.md): reading its page and lab: Not a "
        f"directory: {blocker}/tiny-cache",
        "site": f"the site did not build: File exists: {blocker}",
    }[where]
    assert expected in said, said
