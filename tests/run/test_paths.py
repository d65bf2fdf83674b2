"""Reads and writes stay inside: captures, kept files and lesson names cannot leave the lab."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support import LESSON, RUN, SITE_FIXTURE, CourseRun

from course.errors import RecordError
from course.record.store import Store

LAB = "echo-server"


def add_step(project: Path, text: str) -> None:
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text() + "\n" + text)


def test_paths_that_leave_the_lab_folder_are_refused_by_the_recipe(
    project: Path, course: CourseRun
) -> None:
    add_step(
        project,
        """\
  - id: peek
    run: "true"
    files: [../outside.txt]
    capture:
      up: {json: ../x.json, key: a}
      root: {json: /tmp/x.json, key: a}
""",
    )
    done = course("run", LAB, "--only", "peek")
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert "step 'peek': files: '../outside.txt' must be a path inside the lab folder" in said
    assert "json: '../x.json' must be a path inside the lab folder" in said
    assert "json: '/tmp/x.json' must be a path inside the lab folder" in said
    assert not (project / "build" / LAB).exists() or Store(project / "build").runs(LAB) == []


def test_links_out_of_the_scratch_folder_are_not_followed(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"a": 41}')
    (outside / "secret.txt").write_text("not the lab's\n")
    add_step(
        project,
        f"""\
  - id: peek
    run: ln -s {outside}/secret.json linked.json; ln -s {outside}/secret.txt kept.txt
    files: [kept.txt]
    capture:
      a: {{json: linked.json, key: a, type: int}}
""",
    )
    done = course("run", LAB, "--only", "peek")
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert "step 'peek' failed: capture 'a': json: 'linked.json' is outside the lab folder" in said
    assert f"(it leads to {outside}/secret.json)" in said
    assert "file 'kept.txt' (listed under files) is outside the lab folder" in said
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.step("peek").values == {} and not (run.folder / "files").exists()


def test_a_lesson_is_a_name_under_lab(project: Path, course: CourseRun, tmp_path: Path) -> None:
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "lab.yml").write_text("lesson: evil\ntitle: x\nsteps:\n  - {id: a, run: touch pwned}\n")
    for name in ("../../evil", str(evil), "Evil", "a/b", ".."):
        done = course("run", name)
        assert done.returncode == 1
        assert f"'{name}' is not a lesson name: expected lowercase letters, digits and '-'" in (
            done.stderr
        )
        assert "(lessons: echo-server)" in done.stderr
    os.symlink(evil, project / "lab" / "evil")  # a folder under lab/ that leads elsewhere
    done = course("run", "evil")
    assert done.returncode == 1 and "lab/evil/lab.yml leads outside lab/" in done.stderr
    assert not list(tmp_path.rglob("pwned"))
    done = course("diff", "../x")
    assert done.returncode == 1 and "'../x' is not a lesson name" in done.stderr


def test_a_record_cannot_send_a_reader_outside_its_folder(tmp_path: Path) -> None:
    build = tmp_path / "build"
    shutil.copytree(SITE_FIXTURE / "build", build)
    path = build / LESSON / RUN / "run.json"
    data = json.loads(path.read_text())
    data["steps"][0]["transcript"] = "../../../../../../etc/hostname"
    path.write_text(json.dumps(data))
    run = Store(build).get(LESSON, RUN)
    step = data["steps"][0]["id"]
    with pytest.raises(
        RecordError, match=r"the path '\.\./.*/etc/hostname' it names leads outside"
    ):
        run.transcript(step)
    with pytest.raises(RecordError, match="leads outside"):
        run.kept_file(step, "../../../../x")
