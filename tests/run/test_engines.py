"""`course run --engine SPEC --wheels DIR`: a run on another engine release, recorded as such."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from support import CourseRun

from course.record.store import Store

LAB = "echo-server"


def make_wheel(folder: Path, version: str) -> Path:
    """A minimal pure-Python wheel of a package 'tinyengine' whose VERSION is `version`."""
    name = f"tinyengine-{version}"
    path = folder / f"{name}-py3-none-any.whl"
    files = {
        "tinyengine/__init__.py": f'VERSION = "{version}"\n',
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: tinyengine\nVersion: "
        f"{version}\n",
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
        "true\nTag: py3-none-any\n",
    }
    files[f"{name}.dist-info/RECORD"] = (
        "".join(f"{n},,\n" for n in files) + f"{name}.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(path, "w") as wheel:
        for entry, text in files.items():
            wheel.writestr(entry, text)
    return path


def with_engine_step(project: Path) -> Path:
    """The fixture lab with `tinyengine` among its engines and a step that imports it."""
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(
        lab.read_text().replace("engine: [pyyaml]", "engine: [pyyaml, tinyengine]")
        + """
  - id: engine
    run: python3 -c "import tinyengine; print('engine', tinyengine.VERSION)"
    capture:
      version: {regex: 'engine (\\S+)', type: str}
"""
    )
    return lab


def test_engine_release_is_installed_aside_and_recorded(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "1.0")
    make_wheel(wheels, "2.0")
    with_engine_step(project)
    first = course("run", LAB, "--engine", "tinyengine==1.0", "--wheels", str(wheels))
    assert first.returncode == 0, first.stderr
    second = course("run", LAB, "--engine", "tinyengine==2.0", "--wheels", str(wheels))
    assert second.returncode == 0, second.stderr
    store = Store(project / "build")
    old, new = (r.record for r in store.runs(LAB))
    assert old.engine["tinyengine"] == "1.0" and new.engine["tinyengine"] == "2.0"
    assert new.options["engine"] == ["tinyengine==2.0"]
    assert new.step("engine").values["version"].value == "2.0"
    # a new engine invalidates every step: nothing is reused
    assert {s.status for s in new.steps} == {"ok"}
    # the same release again: the aside install is kept, and nothing runs
    again = course("run", LAB, "--engine", "tinyengine==2.0", "--wheels", str(wheels))
    assert again.returncode == 0 and "Nothing to do" in again.stderr
    assert len(list((project / ".cache" / "engines").iterdir())) == 2
    # the packages installed in the environment were not touched
    plain = course("run", LAB, "--dry-run")
    assert "engine tinyengine 2.0 -> None" in plain.stdout
    diff = course("diff", LAB, "--json")
    assert '"package": "tinyengine"' in diff.stdout and '"new": "2.0"' in diff.stdout


def test_engine_that_cannot_be_installed_names_itself(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = course("run", LAB, "--engine", "tinyengine==9.9", "--wheels", str(empty))
    assert done.returncode == 1
    assert f"--engine tinyengine==9.9: pip could not install it from {empty}" in done.stderr
    assert Store(project / "build").runs(LAB) == []
    engines = project / ".cache" / "engines"
    assert not engines.exists() or list(engines.iterdir()) == []  # no half-installed folder is left


def test_an_engine_the_steps_python_lacks_is_refused_before_the_first_step(
    project: Path, course: CourseRun, tmp_path: Path
) -> None:
    lab = with_engine_step(project)
    refused = course("run", LAB)
    assert refused.returncode == 1
    python = shutil.which("python3")
    assert python is not None
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
    ).stdout.strip()
    assert refused.stderr == (
        f"error: refused, nothing was run: {lab}: engine package 'tinyengine' (lab.yml engine:) "
        f"is not installed for the Python that runs the steps, python3 ({python}, Python "
        f"{version}). Either:\n"
        f"  - install it there: {python} -m pip install tinyengine\n"
        "  - or run course from the virtual environment that has it (source .venv/bin/activate "
        "first): a step's python3 is the first on the PATH\n"
        "  - or name that environment's Python in lab.yml: python: /path/to/.venv/bin/python (a "
        "path from the lab folder, or absolute)\n"
    )
    assert not (project / "build" / LAB).exists()  # no step ran, nothing was recorded
    dry = course("run", LAB, "--dry-run")
    assert dry.returncode == 0 and "a run here would be refused" in dry.stderr

    # the fix: lab.yml names a Python that has it, and the steps' python3 becomes that one
    site = tmp_path / "site-packages"
    (site / "tinyengine").mkdir(parents=True)
    (site / "tinyengine" / "__init__.py").write_text('VERSION = "1.0"\n')
    (site / "tinyengine-1.0.dist-info").mkdir()
    (site / "tinyengine-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tinyengine\nVersion: 1.0\n"
    )
    tools = project / "tools"
    tools.mkdir()
    (tools / "python").write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    (tools / "python").chmod(0o755)
    lab.write_text(lab.read_text().replace("engine: [", "python: ../../tools/python\nengine: ["))
    done = course("run", LAB)
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.engine["tinyengine"] == "1.0"
    assert run.record.step("engine").values["version"].value == "1.0"


def test_a_run_back_on_an_older_engine_than_the_newest_good_run_is_refused(
    project: Path, course: CourseRun
) -> None:
    first = course("run", LAB)
    assert first.returncode == 0, first.stderr
    store = Store(project / "build")
    (last,) = store.runs(LAB)
    installed = last.record.engine["pyyaml"]
    assert installed
    # the newest good run was made on a newer release than the one installed here
    path = project / "build" / LAB / last.run_id / "run.json"
    path.write_text(path.read_text().replace(f'"pyyaml": "{installed}"', '"pyyaml": "99.0"'))
    refused = course("run", LAB, "--force")
    assert refused.returncode == 1
    assert (
        f"the lesson's newest good run, {last.run_id}, used pyyaml 99.0; the steps' Python has "
        f"pyyaml {installed}, an older release" in " ".join(refused.stderr.split())
    )
    assert "Run with --engine pyyaml==99.0" in " ".join(refused.stderr.split())
    assert len(store.runs(LAB)) == 1  # nothing ran
    dry = course("run", LAB, "--force", "--dry-run")
    assert dry.returncode == 0 and "a run here would be refused" in dry.stderr
    # asked for: the run goes ahead and records the release it ran on
    done = course("run", LAB, "--force", "--older-engine")
    assert done.returncode == 0, done.stderr
    assert store.runs(LAB)[-1].record.engine["pyyaml"] == installed
    # and, the newest good run now on the installed release, a plain run is not refused
    assert course("run", LAB, "--force").returncode == 0
