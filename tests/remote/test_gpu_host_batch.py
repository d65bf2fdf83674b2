"""scripts/gpu-host-batch.sh with stand-ins for the GPU host's programs (nvidia-smi, pip, `course
run`): each lesson's records leave the tree for $OUT/build/ the moment its run ends, so a device
call that copies the working tree afresh (and removes the run folders it does not know) loses
nothing, and the archive is packed from there. On 2026-12-02 two finished runs were lost that way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from support import REPO

FAKE_PYTHON = """#!/bin/sh
# pip installs nothing here; anything else goes to the real interpreter
[ "$1" = "-m" ] && [ "$2" = "pip" ] && exit 0
exec {python} "$@"
"""
FAKE_SMI = """#!/bin/sh
echo 0
"""
# `course run LESSON`: writes a finished run folder; the second lesson's run first removes the
# first lesson's folder from build/, as a device call's fresh copy of the tree does
FAKE_COURSE = """#!/bin/sh
lesson=$2
[ "$lesson" = second ] && rm -rf build/first
mkdir -p "build/$lesson/2026-12-02T000000Z-h200"
echo '{{"lesson": "'"$lesson"'"}}' > "build/$lesson/2026-12-02T000000Z-h200/run.json"
echo "ran $lesson on GPU $CUDA_VISIBLE_DEVICES"
[ "$lesson" = second ] && exit 3
exit 0
"""


def host_tree(tmp_path: Path, course: str) -> tuple[Path, Path, dict[str, str]]:
    """A working tree as the GPU host gets it (the scripts, .whl/, build/), the folder $OUT, and
    an environment whose nvidia-smi, pip and `course` (the script `course`) are stand-ins."""
    tree, out, bin_dir, site = (tmp_path / n for n in ("tree", "out", "bin", "site"))
    (tree / "scripts").mkdir(parents=True)
    for name in ("gpu-host-batch.sh", "gpu-host-background.sh"):
        shutil.copy(REPO / "scripts" / name, tree / "scripts")
    for folder in (tree / ".whl", tree / "build", site / "bin", out, bin_dir):
        folder.mkdir(parents=True)
    for folder, name, text in (
        (bin_dir, "python3", FAKE_PYTHON.format(python=shutil.which("python3"))),
        (bin_dir, "nvidia-smi", FAKE_SMI),
        (site / "bin", "course", course),
    ):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out)}
    env.update(COURSE_SITE=str(site), COURSE_BATCH=str(tmp_path / "batch"))
    return tree, out, env


def test_records_leave_the_tree_as_each_lesson_ends(tmp_path: Path) -> None:
    tree, out, env = host_tree(tmp_path, FAKE_COURSE)
    done = subprocess.run(
        ["bash", "scripts/gpu-host-batch.sh", "first", "second --force"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    log = (out / "gpu0.log").read_text()
    assert done.returncode == 0, done.stdout + done.stderr + log  # the batch ends; runs may fail
    assert "first exit 0" in log and "second exit 3" in log  # each job's own exit status
    assert not (tree / "build" / "first").exists()  # the tree lost it...
    for lesson in ("first", "second"):  # ...its copy did not
        assert (out / "build" / lesson / "2026-12-02T000000Z-h200" / "run.json").is_file()
    with tarfile.open(out / "records.tar.gz") as tar:
        names = set(tar.getnames())
    assert "first/2026-12-02T000000Z-h200/run.json" in names
    assert "second/2026-12-02T000000Z-h200/run.json" in names


def test_a_batch_in_the_background_outlives_its_call_and_is_fetched_by_the_next(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "go"  # the stand-in run waits for it: the batch is still going after start
    slow = FAKE_COURSE.replace(
        "lesson=$2\n", f"lesson=$2\nwhile [ ! -f {marker} ]; do sleep 0.1; done\n"
    )
    tree, out, env = host_tree(tmp_path, slow)

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "scripts/gpu-host-background.sh", *args],
            cwd=tree, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    started = call("start", "first")
    assert started.returncode == 0 and "started: first" in started.stdout, started.stderr
    assert (out / "gpu.txt").read_text().strip() == "0"  # the stand-in nvidia-smi's answer
    early = call("wait", "1")
    assert "still running" in early.stdout and not (out / "records.tar.gz").exists()
    marker.touch()
    done = call("wait", "30")
    assert "done: records.tar.gz" in done.stdout, done.stdout + done.stderr
    assert "first exit 0" in done.stdout  # the GPU's log, tailed
    with tarfile.open(out / "records.tar.gz") as tar:
        assert "first/2026-12-02T000000Z-h200/run.json" in set(tar.getnames())
    assert call("nothing").returncode == 2
