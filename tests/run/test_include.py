"""`include:` in lab.yml: a file of another lesson's lab, copied into each run, hashed, zipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CourseRun

from course.errors import LabError
from course.lab.load import load_lab
from course.package.bundle import lab_entries
from course.record.store import Store

LAB = "echo-server"
SHARED = 'def greet(name):\n    return f"shared says hello to {name}"\n'
RECIPE = """\
lesson: user
title: A lab that uses a file of another lab
include: [../echo-server/shared.py]
steps:
  - id: hello
    run: python3 -c "import shared; print(shared.greet('you'))"
    inputs: [shared.py]
    capture:
      said: {regex: '^(shared says .+)$', type: str}
"""


def make_user(project: Path, recipe: str = RECIPE) -> Path:
    (project / "lab" / LAB / "shared.py").write_text(SHARED)
    folder = project / "lab" / "user"
    folder.mkdir(exist_ok=True)
    (folder / "lab.yml").write_text(recipe)
    return folder / "lab.yml"


def test_an_included_file_runs_counts_in_the_hash_and_travels_in_the_zip(
    project: Path, course: CourseRun
) -> None:
    path = make_user(project)
    done = course("run", "user")
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs("user")
    step = run.record.step("hello")
    assert step.values["said"].value == "shared says hello to you"
    assert set(step.hash_parts.inputs) == {"shared.py"}
    # a change to the shared file re-runs the step that reads it
    shared = project / "lab" / LAB / "shared.py"
    shared.write_text(SHARED.replace("hello", "hi"))
    plan = course("run", "user", "--dry-run")
    assert plan.returncode == 0 and "changed: shared.py" in plan.stdout
    # the lesson zip carries the included file beside the lab's own
    names = [e.name for e in lab_entries(load_lab(path))]
    assert names == ["lab/lab.yml", "lab/shared.py"]
    assert not (project / "lab" / "user" / "shared.py").exists()  # never copied into the repo


@pytest.mark.parametrize(
    ("include", "message"),
    [
        ("/etc/hostname", "include: '/etc/hostname' must name a file of another lab under lab/"),
        ("../echo-server/nope.py", "include: '../echo-server/nope.py' is not a file"),
        ("lab.yml", "include: 'lab.yml' must name a file of another lab under lab/"),
    ],
)
def test_a_bad_include_is_refused_with_its_line(project: Path, include: str, message: str) -> None:
    path = make_user(project, RECIPE.replace("../echo-server/shared.py", include))
    with pytest.raises(LabError) as caught:
        load_lab(path)
    assert f"line 3: {message}" in str(caught.value)


KIT = {
    "__init__.py": '"""A tiny kit."""\n',
    "greet.py": 'def hello(name):\n    return f"the kit says hello to {name}"\n',
}
KIT_RECIPE = """\
lesson: user
title: A lab that uses a folder of lab/common/
include: [../common/kit]
steps:
  - id: hello
    run: python3 -c "from kit import greet; print(greet.hello('you'))"
    inputs: ["kit/*.py"]
    capture:
      said: {regex: '^(the kit says .+)$', type: str}
"""


def make_kit_user(project: Path, recipe: str = KIT_RECIPE) -> Path:
    kit = project / "lab" / "common" / "kit"
    kit.mkdir(parents=True, exist_ok=True)
    for name, text in KIT.items():
        (kit / name).write_text(text)
    (kit / "__pycache__").mkdir(exist_ok=True)  # a learner's cache: never copied, never zipped
    (kit / "__pycache__" / "greet.cpython-311.pyc").write_bytes(b"\0")
    folder = project / "lab" / "user"
    folder.mkdir(exist_ok=True)
    (folder / "lab.yml").write_text(recipe)
    return folder / "lab.yml"


def test_an_included_folder_runs_under_its_name_counts_in_the_hash_and_travels_in_the_zip(
    project: Path, course: CourseRun
) -> None:
    path = make_kit_user(project)
    done = course("run", "user")
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs("user")
    step = run.record.step("hello")
    assert step.values["said"].value == "the kit says hello to you"
    assert set(step.hash_parts.inputs) == {"kit/__init__.py", "kit/greet.py"}
    # a change to one file of the folder re-runs the step that reads it
    (project / "lab" / "common" / "kit" / "greet.py").write_text(
        KIT["greet.py"].replace("hello to", "hi to")
    )
    plan = course("run", "user", "--dry-run")
    assert plan.returncode == 0 and "changed: kit/greet.py" in plan.stdout
    again = course("run", "user")
    assert again.returncode == 0, again.stderr
    newest = Store(project / "build").runs("user")[-1].record.step("hello")
    assert newest.values["said"].value == "the kit says hi to you"
    # the lesson zip carries the folder under its name, without the cache, beside the lab's own
    names = [e.name for e in lab_entries(load_lab(path))]
    assert names == ["lab/kit/__init__.py", "lab/kit/greet.py", "lab/lab.yml"]
    assert not (project / "lab" / "user" / "kit").exists()  # never copied into the repo


@pytest.mark.parametrize(
    ("include", "message"),
    [
        (
            "../echo-server",
            "include: '../echo-server' is a folder: only a folder of lab/common/ may be included"
            " (a file of another lab may)",
        ),
        ("../common/empty", "include: '../common/empty' is an empty folder"),
        (
            "../common/user-own",
            "include: '../common/user-own' would replace the lab's own user-own/",
        ),
        ("../common/nope", "include: '../common/nope' is not a file"),
    ],
)
def test_a_bad_folder_include_is_refused_with_its_line(
    project: Path, include: str, message: str
) -> None:
    path = make_kit_user(project, KIT_RECIPE.replace("../common/kit", include))
    (project / "lab" / "common" / "empty").mkdir()
    (project / "lab" / "common" / "user-own").mkdir()
    (project / "lab" / "common" / "user-own" / "a.py").write_text("")
    (project / "lab" / "user" / "user-own").mkdir()
    (project / "lab" / "user" / "user-own" / "b.py").write_text("")
    with pytest.raises(LabError) as caught:
        load_lab(path)
    assert f"line 3: {message}" in str(caught.value)


TWO_KITS = """\
lesson: user
title: A lab that uses two folders of lab/common/
include: [../common/kit, ../common/tools]
steps:
  - id: hello
    run: >-
      python3 -c "from kit import greet; from tools import shout;
      print(shout.up(greet.hello('you')))"
    inputs: ["kit/*.py", "tools/*.py"]
    capture:
      said: {regex: '^(THE KIT SAYS .+)$', type: str}
  - id: kit-only
    run: python3 -c "from kit import greet; print(greet.hello('me'))"
    inputs: ["kit/*.py"]
"""


def test_two_included_folders_run_side_by_side_and_each_counts_for_its_own_readers(
    project: Path, course: CourseRun
) -> None:
    """A second folder of lab/common/ (the llama.cpp kit beside the lab kit) is copied, hashed
    and zipped like the first; a change to it re-runs only the steps whose inputs match it."""
    path = make_kit_user(project, TWO_KITS)
    tools = project / "lab" / "common" / "tools"
    tools.mkdir()
    (tools / "__init__.py").write_text('"""A second kit."""\n')
    (tools / "shout.py").write_text("def up(text):\n    return text.upper()\n")
    done = course("run", "user")
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs("user")
    hello = run.record.step("hello")
    assert hello.values["said"].value == "THE KIT SAYS HELLO TO YOU"
    assert set(hello.hash_parts.inputs) == {
        "kit/__init__.py",
        "kit/greet.py",
        "tools/__init__.py",
        "tools/shout.py",
    }
    assert set(run.record.step("kit-only").hash_parts.inputs) == {"kit/__init__.py", "kit/greet.py"}
    (tools / "shout.py").write_text("def up(text):\n    return text.upper() + '!'\n")
    again = course("run", "user")
    assert again.returncode == 0, again.stderr
    statuses = {s.id: s.status for s in Store(project / "build").runs("user")[-1].record.steps}
    assert statuses == {"hello": "ok", "kit-only": "reused"}
    names = [e.name for e in lab_entries(load_lab(path))]
    assert names == [
        "lab/kit/__init__.py", "lab/kit/greet.py", "lab/lab.yml",
        "lab/tools/__init__.py", "lab/tools/shout.py",
    ]  # fmt: skip
