"""Which Python runs a lab's steps, and whether the lab's engine packages are installed in it.

A step's command runs in bash with the environment `course run` was started in, so its `python3`
is the first one on that PATH (an active virtual environment's, say). lab.yml's `python:` names
another interpreter (a path from the lab folder, or a name on the PATH): on this machine the
runner then puts a folder first on the steps' PATH whose `python3` and `python` run it, so the
steps, the engine versions recorded and `course run --setup` all use one Python. (On a host
reached with `--on ssh://`, the steps run the host's own `python3`.)

Before anything runs, every package under lab.yml's `engine:` that the steps about to run need
(`needed`) must be installed for that Python; a run is refused otherwise, naming the package and
the fix, so a run never records such an engine as `null` nor fails inside its first step with
`ModuleNotFoundError`. Nor may a run go back, unasked, to an older release of an engine than
the lesson's newest good run on the same kind of GPU used (`behind`): such a run would not
reproduce the records, yet would become the lesson's newest run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

from ..lab.load import LoadedLab
from ..lab.schema import Lab
from ..record.models import Run
from .install import extras, lab_requirements, package_name
from .plan import Plan, gpu_refusal
from .target import HostReport

DEFAULT = Lab.model_fields["python"].default
"""`python3`: the first on the PATH."""
NOT_FOUND = "not found"
"""What the host facts say as the Python version when the interpreter does not exist."""


def interpreter(loaded: LoadedLab) -> str | None:
    """The interpreter lab.yml's `python:` names, as an absolute path here (a relative path is
    read from the lab folder, a bare name from the PATH); None for the default or when it does not
    exist (the engine check says so)."""
    python = loaded.lab.python
    if python == DEFAULT:
        return None
    if os.path.sep in python:
        path = (loaded.folder / python).absolute()
        return str(path) if os.access(path, os.X_OK) else None
    return shutil.which(python)


def steps_path(loaded: LoadedLab, scratch: Path, path: str) -> dict[str, str]:
    """For a lab that names its `python:`, the steps' PATH: a folder (in the run's scratch folder)
    whose `python3` and `python` run that interpreter, then `path`; nothing otherwise."""
    python = interpreter(loaded)
    if python is None:
        return {}
    folder = scratch / ".python"
    folder.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return {"PATH": os.pathsep.join([str(folder), path])}


def needed(loaded: LoadedLab, plan: Plan) -> list[str]:
    """The engine packages the steps about to run need. A lab whose pyproject.toml groups its
    requirements by step (an optional extra named after each step, as "Writing a lab" asks) says
    so step by step: a step needs the engines in its extra and in `dependencies`. Without such
    extras, every step needs every engine."""
    engines = loaded.lab.engine
    groups = extras(loaded.folder)
    if not any(step.id in groups for step in loaded.lab.steps):
        return list(engines)
    named = {package_name(r) for r in lab_requirements(loaded.folder)}
    for sp in plan.to_run:
        named |= {package_name(r) for r in groups.get(sp.step.id, [])}
    return [e for e in engines if package_name(e) in named]


def refusal(
    loaded: LoadedLab,
    plan: Plan,
    facts: HostReport,
    engine: dict[str, str | None] | None,
    where: str,
) -> str | None:
    """Why a run that would execute steps cannot start here (a GPU missing, an engine package not
    installed for the steps' Python), with the ways out; None when nothing stands in the way.
    `engine` None: not checked yet (`--setup` is about to install them)."""
    if not plan.to_run:
        return None
    gpu = gpu_refusal(loaded, plan, facts.host.gpu is not None, where)
    if gpu or engine is None:
        return gpu
    missing = [name for name in needed(loaded, plan) if engine.get(name) is None]
    return engine_refusal(loaded, missing, facts.host.python, where)


def engine_refusal(
    loaded: LoadedLab, missing: list[str], version: str | None, where: str
) -> str | None:
    """The message for engine packages lab.yml declares that the steps' Python lacks, or None."""
    if not missing:
        return None
    python, lab = loaded.lab.python, loaded.display_path()
    here = where == "local"
    exe = (interpreter(loaded) or shutil.which(python)) if here else None
    if version == NOT_FOUND or (here and exe is None):
        on = "" if here else f" on {where}"
        return (
            f"{lab}: python: {python!r}, the Python that runs the steps, is not found{on}. "
            f"Name an interpreter that exists in lab.yml (python: .venv/bin/python, a path from "
            f"the lab folder), or make {DEFAULT} the one with the lab's packages"
        )
    names = ", ".join(f"'{m}'" for m in missing)
    noun = "package" if len(missing) == 1 else "packages"
    verb = "is" if len(missing) == 1 else "are"
    shown = f"{python} ({exe}, Python {version})" if exe else f"{python} on {where}"
    install = f"{shlex.quote(exe or python)} -m pip install {' '.join(missing)}"
    ways = [f"install {'it' if len(missing) == 1 else 'them'} there: {install}"]
    if here and python == DEFAULT:
        ways += [
            "or run course from the virtual environment that has it (source .venv/bin/activate "
            "first): a step's python3 is the first on the PATH",
            "or name that environment's Python in lab.yml: python: /path/to/.venv/bin/python "
            "(a path from the lab folder, or absolute)",
        ]
    elif here:
        ways.append(f"or change python: in {lab} to an interpreter that has it")
    return (
        f"{lab}: engine {noun} {names} (lab.yml engine:) {verb} not installed for the Python "
        f"that runs the steps, {shown}. Either:\n" + "\n".join(f"  - {w}" for w in ways)
    )


def release(version: str) -> tuple[int, ...]:
    """A release's numbers, for ordering ('2.11.0+cu130' -> (2, 11, 0); a local label is left
    out)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:4])


def behind(
    loaded: LoadedLab, plan: Plan, history: list[Run], engine: dict[str, str | None], gpu: str
) -> str | None:
    """Why a run would be refused for going back to an older release of an engine package the
    steps about to run need than the lesson's newest good run on this kind of GPU used (`engine`
    holds only what `--engine` did not name), with the ways out; None otherwise."""
    good = [r for r in history if r.good]
    if not plan.to_run or not good:
        return None
    last = good[-1].record
    if (last.host.gpu.name if last.host.gpu else "none") != gpu:
        return None
    older = [
        (name, str(was), str(now))
        for name in needed(loaded, plan)
        if (was := last.engine.get(name)) and (now := engine.get(name))
        and release(now) < release(was)
    ]  # fmt: skip
    if not older:
        return None
    used = ", ".join(f"{n} {was}" for n, was, _ in older)
    has = ", ".join(f"{n} {now}" for n, _, now in older)
    specs = " ".join(f"--engine {n}=={was}" for n, was, _ in older)
    return (
        f"{loaded.display_path()}: the lesson's newest good run, {last.run_id}, used {used}; the"
        f" steps' Python has {has}, an older release: a run on it would not reproduce the records"
        f" and would become the lesson's newest run. Run with {specs} (and --wheels DIR where the"
        " host reaches no package index), or give --older-engine to run on the older release on"
        " purpose"
    )
