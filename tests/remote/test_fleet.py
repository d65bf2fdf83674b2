"""`course run --all [--via skypilot]`: which lessons need a run, and the SkyPilot tasks made for
them.

No cloud is reachable here: the tasks are checked as far as SkyPilot itself allows offline, by
loading them through its own YAML loader and schema, and by a dry run of the command.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import CourseRun

from course.errors import LabError, RunError
from course.lab.load import load_lab
from course.remote.fleet import decide, lessons, pinned_versions
from course.remote.tasks import node_command, task_config, write_tasks
from course.run.options import Options

LAB = "echo-server"
RESOURCES = "resources: {gpu: H200, count: 2, disk_gb: 100}\n"


def with_resources(project: Path, text: str = RESOURCES) -> Path:
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text().replace("steps:\n", text + "steps:\n", 1))
    return path


def test_resources_are_declared_and_checked(project: Path) -> None:
    lab = load_lab(with_resources(project)).lab
    assert lab.resources is not None and (
        lab.resources.gpu,
        lab.resources.count,
        lab.resources.disk_gb,
    ) == ("H200", 2, 100)
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text().replace("gpu: H200", "gpus: H200"))
    with pytest.raises(
        LabError, match=r"resources.gpus: unknown key 'gpus' \(did you mean 'gpu'\?\)"
    ):
        load_lab(path)


def test_pinned_engine_versions() -> None:
    found = pinned_versions(
        ["torch==2.6.0", "Transformers[torch] == 4.51.3 ; python_version>'3'", "numpy>=2"],
        ["torch", "transformers", "numpy"],
    )
    assert found == {"torch": "2.6.0", "transformers": "4.51.3"}


def test_only_lessons_whose_steps_are_not_all_reusable_are_chosen(
    project: Path, course: CourseRun
) -> None:
    assert lessons(project) == [LAB]
    loaded = load_lab(project / "lab" / LAB / "lab.yml")
    assert decide(project, loaded).reason == "no complete run yet"
    done = course("run", "--all")  # one after another, here
    assert done.returncode == 0, done.stderr
    assert "1 lessons done, 0 failed" in done.stderr
    kept = decide(project, loaded)
    assert not kept.run and kept.reason.startswith("every step reusable from ")
    assert decide(project, loaded, force=True).run
    # an engine release, pinned in the lab's requirements, is known here before any node starts
    (project / "lab" / LAB / "requirements.txt").write_text("pyyaml==0.0.1\n")
    moved = decide(project, loaded)
    assert moved.run and "-> 0.0.1" in moved.reason
    # a GPU kind other than the one the newest good run had
    with_resources(project)
    other = decide(project, load_lab(project / "lab" / LAB / "lab.yml"))
    assert (
        other.run
        and "no complete run on H200 yet (" in other.reason
        and "ran on none)" in other.reason
    )


def test_skypilot_loads_and_validates_the_tasks(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # SkyPilot keeps its state under ~/.sky
    sky = pytest.importorskip(
        "sky", reason="SkyPilot is not installed (pip install 'course[fleet]')"
    )
    (project / "lab" / LAB / "requirements.txt").write_text("pyyaml>=6\n")
    loaded = load_lab(with_resources(project))
    config = task_config(project, loaded, "s3://course-runs")
    tasks = write_tasks(project, [loaded], "s3://course-runs", tmp_path / "tasks")
    task = tasks[LAB]
    assert isinstance(task, sky.Task) and task.name == "course-echo-server"
    (res,) = list(task.resources)
    assert res.accelerators == {"H200": 2} and res.disk_size == 100
    assert "pip install -q --progress-bar off ." in task.setup and "pyyaml>=6" in task.setup
    assert (
        task.run.startswith("course run echo-server; status=$?")
        and "/course-out/echo-server" in task.run
    )
    assert set(task.storage_mounts) == {"/course-out"} and task.workdir == str(project)
    assert task.envs["COURSE_LESSON"] == LAB
    # what SkyPilot writes back is what we gave it
    again = task.to_yaml_config()
    assert again["resources"]["accelerators"] == config["resources"]["accelerators"]
    # a lab whose resources SkyPilot refuses is reported with its task file and lesson
    path = project / "lab" / LAB / "lab.yml"
    path.write_text(path.read_text().replace(RESOURCES, "resources: {gpu: 'H200:x'}\n"))
    odd = load_lab(path)
    with pytest.raises(
        RunError, match=r"echo-server\.yaml: SkyPilot refused the task for 'echo-server'"
    ):
        write_tasks(project, [odd], "s3://course-runs", tmp_path / "odd")


def test_fleet_dry_run_plans_every_lesson(project: Path, course: CourseRun, tmp_path: Path) -> None:
    pytest.importorskip("sky", reason="SkyPilot is not installed (pip install 'course[fleet]')")
    with_resources(project)
    home = tmp_path / "home"
    home.mkdir()
    done = course(
        "run",
        "--all",
        "--via",
        "skypilot",
        "--dry-run",
        "--bucket",
        "s3://course-runs",
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "Fleet: 1 of 1 lessons to run" in done.stderr and "no complete run yet" in done.stderr
    assert "tasks written and validated by SkyPilot in" in done.stderr
    folder = Path(done.stderr.split("validated by SkyPilot in")[1].split()[0])
    assert (folder / f"{LAB}.yaml").is_file()
    shutil.rmtree(folder)
    bad = course("run", "--all", "--via", "skypilot", env={"HOME": str(home)}, timeout=180)
    assert bad.returncode == 1 and "--via skypilot needs --bucket URL" in bad.stderr


def test_the_node_runs_with_every_option_given_here_or_the_fleet_refuses(
    project: Path, tmp_path: Path
) -> None:
    wheels = project / "wheels"
    wheels.mkdir()
    options = Options(
        force=True,
        only=("words",),
        setup=True,
        quiet=True,
        engine=["pyyaml==6.0.1"],
        wheels=wheels,
        env={"HF_TOKEN": "hf_secretvalue0123456789abcdefghij", "BATCH": "8"},
    )
    assert node_command(project, LAB, options) == (
        "course run echo-server --force --only words --setup --quiet --engine pyyaml==6.0.1 "
        "--wheels wheels --env BATCH --env HF_TOKEN"
    )
    assert "--from query" in node_command(project, LAB, Options(from_step="query"))
    loaded = load_lab(project / "lab" / LAB / "lab.yml")
    config = task_config(project, loaded, None, options)
    assert config["run"].startswith("course run echo-server --force --only words --setup")
    assert config["envs"]["BATCH"] == "8" and "HF_TOKEN" not in config["envs"]
    assert config["secrets"] == {"HF_TOKEN": "hf_secretvalue0123456789abcdefghij"}
    shown = task_config(project, loaded, None, options, reveal=False)  # a dry run's task file
    assert shown["secrets"] == {"HF_TOKEN": "***"}
    # what cannot travel is refused by name, all at once, before anything is launched
    outside = tmp_path / "wheels-here"
    outside.mkdir()
    refused = Options(on="ssh://gpu-box", resume=True, wheels=outside)
    with pytest.raises(RunError) as caught:
        node_command(project, LAB, refused)
    message = str(caught.value)
    assert message.startswith("--via skypilot cannot carry --on (a node is the host")
    assert "; --resume (a node starts from the committed records" in message
    assert f"; --wheels {outside} (a folder outside the project does not travel" in message
    # a step that a lesson does not have is refused here, naming its lab
    with pytest.raises(RunError, match=r"lab.yml: --only nope: no such step \(steps: prepare"):
        decide(project, loaded, options=Options(only=("nope",)))
    assert decide(project, loaded, options=Options(engine=["pyyaml==0.0.1"])).run
