"""Mistakes in a lab that must be refused before anything runs: keys written twice, an id too long
to name a file, a link that loops."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import COURSE

from course.errors import LabError
from course.lab.load import load_lab

TWICE = """\
lesson: demo
title: First
title: Second
steps:
  - id: one
    run: echo 1
    run: echo 2
    capture:
      n: {regex: 'a (\\d+)', type: int}
      n: {regex: 'b (\\d+)', type: int}
  - run: echo 3
    id: two
    env: {A: "1", A: "2"}
"""


def write_lab(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "lab" / "demo"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("print(1)\n")
    (folder / "lab.yml").write_text(text)
    return folder / "lab.yml"


def problems(path: Path) -> list[str]:
    with pytest.raises(LabError) as info:
        load_lab(path)
    return info.value.problems


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    assert problems(write_lab(tmp_path, TWICE)) == [
        "line 3: 'title' appears twice (first on line 2); a key may appear once",
        "line 7: step 'one': 'run' appears twice (first on line 6); a key may appear once",
        "line 10: step 'one': capture: 'n' appears twice (first on line 9); a key may appear once",
        "line 13: step 'two': env: 'A' appears twice (first on line 13); a key may appear once",
    ]


def test_a_step_id_too_long_to_name_a_file_is_refused(tmp_path: Path) -> None:
    long = "a" * 300
    path = write_lab(tmp_path, f"lesson: demo\ntitle: t\nsteps:\n  - id: {long}\n    run: echo\n")
    assert problems(path) == [
        f"line 4: step '{'a' * 32}...': id: '{'a' * 32}...' is 300 characters long; at most 64 "
        "(it names files of the record)"
    ]
    ok = write_lab(tmp_path / "ok", f"lesson: demo\ntitle: t\nsteps:\n  - id: {'a' * 64}\n"
                   "    run: echo\n")  # fmt: skip
    assert load_lab(ok).lab.steps[0].id == "a" * 64


def test_a_link_loop_in_the_lab_folder_is_refused_not_walked(tmp_path: Path) -> None:
    root = tmp_path / "project"
    steps = "  - id: one\n    run: echo\n    inputs: ['**/*.py']\n"
    path = write_lab(root, f"lesson: demo\ntitle: t\nsteps:\n{steps}")
    os.symlink(".", path.parent / "l1")
    os.symlink("..", path.parent / "l2")
    done = subprocess.run(
        [*COURSE, "--root", str(root), "run", "demo", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    folder = path.parent
    assert done.returncode == 1
    assert done.stderr == (
        f"error: {path}: 2 problems:\n"
        f"  - {folder}/l1 is a link to '.', a folder that holds it: a loop, which the inputs' "
        "globs would follow forever; remove it\n"
        f"  - {folder}/l2 is a link to '..', a folder that holds it: a loop, which the inputs' "
        "globs would follow forever; remove it\n"
    )
