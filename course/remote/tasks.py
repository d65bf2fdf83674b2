"""The SkyPilot task of one lesson: resources from its lab, set-up (this package and the lab's
requirements), and the node's `course run`, carrying every option of the `course run` here that
can travel and refusing, by name, each one that cannot.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from ..errors import RunError
from ..lab.load import LoadedLab
from ..lab.schema import Resources
from ..record.masking import MASK, SECRET_NAME
from ..run.install import install_command, lab_requirements
from ..run.options import Options

OUT = "/course-out"
"""Where the bucket is mounted on a node."""


def node_command(root: Path, lesson: str, options: Options) -> str:
    """`course run LESSON` on a node, with every option of this `course run` it carries over;
    RunError naming each option that cannot go to a node (none is dropped silently)."""
    refused = []
    if options.on not in (None, "local"):
        refused.append("--on (a node is the host; give one or the other)")
    if options.resume:
        refused.append("--resume (a node starts from the committed records, not a failed run)")
    wheels = None
    if options.wheels is not None:
        if options.wheels.resolve().is_relative_to(root.resolve()):
            wheels = options.wheels.resolve().relative_to(root.resolve()).as_posix()
        else:
            refused.append(
                f"--wheels {options.wheels} (a folder outside the project does not travel to the "
                "node; put the wheels under the project folder, or drop --wheels to install "
                "--engine from the package index)"
            )
    if refused:
        raise RunError("--via skypilot cannot carry " + "; ".join(refused))
    args = ["course", "run", lesson]
    args += ["--force"] if options.force else []
    args += [a for step in options.only for a in ("--only", step)]
    args += ["--from", options.from_step] if options.from_step else []
    args += ["--setup"] if options.setup else []
    args += ["--quiet"] if options.quiet else []
    for spec in options.engine:
        args += ["--engine", spec]
    args += ["--wheels", wheels] if wheels else []
    for name in sorted(options.env):
        args += ["--env", name]  # its value travels in the task's envs or secrets
    return shlex.join(args)


def task_config(
    root: Path,
    loaded: LoadedLab,
    bucket: str | None,
    options: Options | None = None,
    reveal: bool = True,
) -> dict[str, Any]:
    """The SkyPilot task (as its YAML holds it) that re-runs one lesson on a fresh node.

    `--env` values go in the task's `envs`, or its `secrets` for names that say TOKEN, KEY,
    SECRET or PASSWORD (shown as *** unless `reveal`: a dry run's task files hold no secret).
    """
    options = options or Options()
    lab = loaded.lab
    res = lab.resources or Resources()
    resources: dict[str, Any] = {}
    if res.gpu:
        resources["accelerators"] = {res.gpu: res.count}
    if res.disk_gb:
        resources["disk_size"] = res.disk_gb
    requirements = lab_requirements(loaded.folder)
    setup = ["set -e", "python3 -m pip install -q --progress-bar off .  # this package: the runner"]
    if requirements:
        setup.append(install_command(lab.python, requirements))
    lesson = shlex.quote(lab.lesson)
    run = [node_command(root, lab.lesson, options) + "; status=$?"]
    if bucket:
        # only finished run folders travel; what was there already is committed and stays as it is
        run += [
            f"mkdir -p {OUT}/{lesson}",
            f"find build/{lesson} -mindepth 1 -maxdepth 1 -type d ! -name '.*' -exec cp -r {{}} "
            f"{OUT}/{lesson}/ \\;",
        ]
    run.append("exit $status")
    envs = {"COURSE_LESSON": lab.lesson, "PYTHONUNBUFFERED": "1", "NO_MKDOCS_2_WARNING": "1"}
    secrets = {}
    for name, value in options.env.items():
        if SECRET_NAME.search(name):
            secrets[name] = value if reveal else MASK
        else:
            envs[name] = value
    config: dict[str, Any] = {
        "name": f"course-{lab.lesson}",
        "workdir": str(root),
        "envs": envs,
        "setup": "\n".join(setup) + "\n",
        "run": "\n".join(run) + "\n",
    }
    if secrets:
        config["secrets"] = secrets
    if resources:
        config["resources"] = resources
    if bucket:
        config["file_mounts"] = {OUT: {"source": bucket, "mode": "MOUNT"}}
    return config


def import_sky() -> Any:
    """SkyPilot, or RunError saying how to install it."""
    try:
        import sky
    except ImportError:
        raise RunError(
            "--via skypilot needs SkyPilot: pip install 'course[fleet]' (or pip install skypilot), "
            "then `sky check` for your clouds"
        ) from None
    return sky


def write_tasks(
    root: Path,
    chosen: list[LoadedLab],
    bucket: str | None,
    folder: Path,
    options: Options | None = None,
    reveal: bool = True,
) -> dict[str, Any]:
    """Write each lesson's task to `folder/<lesson>.yaml` and load it back through SkyPilot
    (validating
    it).
    """
    sky = import_sky()
    tasks = {}
    folder.mkdir(parents=True, exist_ok=True)
    for loaded in chosen:
        path = folder / f"{loaded.lab.lesson}.yaml"
        config = task_config(root, loaded, bucket, options, reveal)
        path.touch(mode=0o600)  # it may hold the values of --env secrets
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        try:
            tasks[loaded.lab.lesson] = sky.Task.from_yaml(str(path))
        except Exception as exc:  # noqa: BLE001 - SkyPilot raises several kinds; each is a task it refuses
            raise RunError(
                f"{path}: SkyPilot refused the task for '{loaded.lab.lesson}': {exc}"
            ) from None
    return tasks
