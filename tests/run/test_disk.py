"""When the disk says no: a full or read-only `build/`, a read-only lab folder, a step that removes
its own scratch folder. Real runs on real (small, mounted) file systems: each is a message naming
the step and the path, earlier runs stay intact, and nothing is left behind."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import CourseRun

from course.record.store import Store

LAB = "echo-server"


@pytest.fixture
def small_build(project: Path) -> Iterator[Path]:
    """The project's build/ on a file system of its own, 256 KiB (mounting needs root)."""
    build = project / "build"
    build.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(build)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a small file system needs root")
    try:
        yield build
    finally:
        subprocess.run(["umount", "-l", str(build)], check=True)


def write_lab(project: Path, steps: str) -> None:
    text = f"lesson: echo-server\ntitle: t\nsteps:\n{steps}"
    (project / "lab" / LAB / "lab.yml").write_text(text)


def fill(build: Path, leave: int) -> None:
    """Fill the file system of `build` up to `leave` bytes free."""
    with (build / "filler").open("ab") as fh:
        room = os.statvfs(build).f_bavail * os.statvfs(build).f_frsize - leave
        fh.write(b"\0" * max(0, room))


def leftovers(build: Path) -> list[str]:
    """Unfinished runs and half-written files under build/."""
    return sorted(
        str(p.relative_to(build))
        for p in build.rglob("*")
        if p.name.startswith(".tmp-") or p.name.endswith(".tmp")
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_full_build_folder_names_the_step_and_the_path(
    project: Path, course: CourseRun, small_build: Path
) -> None:
    write_lab(project, "  - id: small\n    run: echo hi\n")
    assert course("run", LAB).returncode == 0
    (good,) = Store(small_build).runs(LAB)
    kept = digest(good.folder / "run.json")
    write_lab(project, "  - id: small\n    run: echo hi\n  - id: big\n"
              "    run: python3 -c \"print('y' * 200_000)\"\n")  # fmt: skip
    fill(small_build, 64 * 1024)
    done = course("run", LAB, "--force")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    good_now, failed = Store(small_build).runs(LAB)
    transcript = small_build / LAB / f".tmp-{failed.run_id}" / "steps" / "big.txt"
    said = re.search(r"step 'big' failed: (.*)\n", done.stderr)
    assert said is not None, done.stderr
    assert re.fullmatch(
        f"could not write the transcript of step 'big': {re.escape(str(transcript))}: No space "
        rf"left on device \(the file system mounted at {re.escape(str(small_build))} is full: "
        r"[\d,]+ bytes free\)",
        said.group(1),
    ), said.group(1)
    assert failed.record.status == "failed" and failed.record.step("big").status == "failed"
    assert good_now.run_id == good.run_id and digest(good.folder / "run.json") == kept
    assert leftovers(small_build) == []
    # no room at all: the run cannot be recorded; nothing of it is left, earlier runs stay
    fill(small_build, 0)
    done = course("run", LAB, "--force")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: could not write the "), done.stderr
    assert (
        f"No space left on device (the file system mounted at {small_build} is full: 0 bytes free)"
    ) in done.stderr
    assert [r.run_id for r in Store(small_build).runs(LAB)] == [good.run_id, failed.run_id]
    assert digest(good.folder / "run.json") == kept
    assert leftovers(small_build) == []


def test_a_read_only_build_folder_is_a_message(project: Path, course: CourseRun) -> None:
    build = project / "build"
    build.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(build)], check=False
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a file system needs root")
    try:
        done = course("run", LAB)
    finally:
        subprocess.run(["umount", "-l", str(build)], check=True)
    assert done.returncode == 1
    assert done.stderr == f"error: course run {LAB}: {build / LAB}: Read-only file system\n"


def test_a_read_only_lab_folder_gives_a_writable_scratch_copy(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    write_lab(
        project,
        "  - id: make\n    run: mkdir results && stat -c '%a' . lab.yml > results/modes\n"
        "    files: [results/modes]\n",
    )
    lab = project / "lab" / LAB
    for path in [lab, *lab.iterdir()]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
    temp = tmp_path / "temp"
    temp.mkdir()
    try:
        done = course("run", LAB, env={"TMPDIR": str(temp)})
    finally:
        for path in [lab, *lab.iterdir()]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs(LAB)
    assert (run.folder / "files/make/results/modes").read_text() == "755\n644\n"
    assert list(temp.iterdir()) == []


def test_a_step_that_removes_its_own_scratch_folder(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    write_lab(
        project,
        f'  - id: remove\n    run: pwd > {marks}/pwd; rm -rf "$PWD"\n'
        "  - id: after\n    run: echo after\n",
    )
    temp = tmp_path / "temp"
    temp.mkdir()
    done = course("run", LAB, env={"TMPDIR": str(temp)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    scratch = (marks / "pwd").read_text().strip()
    lab_file = project / "lab" / LAB / "lab.yml"
    what = (
        f"{scratch}: No such file or directory (the lab's scratch folder {scratch} is gone: did "
        "a step remove it?)"
    )
    assert done.stderr.endswith(f"error: {lab_file}: step 'after' failed: {what}\n"), done.stderr
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.step("after").error == what
    assert list(temp.iterdir()) == []
