"""Installing a lab's requirements on the run's host (`course run --setup`)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from rich.console import Console

from ..errors import RunError
from ..lab.load import LoadedLab
from ..record.masking import Redactor
from ..record.models import Setup
from .display import Display
from .options import Options
from .steps import TAIL_LINES
from .target import ConnectionLost, Host
from .terminal import clean, tail


def extras(folder: Path) -> dict[str, list[str]]:
    """The optional extras of the lab's pyproject.toml (`[project.optional-dependencies]`), which
    a lab names after its steps (`gpu-check = ["torch>=2.5"]`); {} without any."""
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RunError(f"{pyproject}: not valid TOML: {exc}") from None
    found = data.get("project", {}).get("optional-dependencies", {})
    return {str(k): [str(r) for r in v] for k, v in found.items()}


def package_name(requirement: str) -> str:
    """A requirement's package name, normalised (`PyYAML>=6` -> `pyyaml`, as PEP 503 compares)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement.lower()


def lab_requirements(folder: Path) -> list[str]:
    """The lab's Python requirements: `[project] dependencies` of its pyproject.toml, then
    requirements.txt.
    """
    found: list[str] = []
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise RunError(f"{pyproject}: not valid TOML: {exc}") from None
        found += [str(d) for d in data.get("project", {}).get("dependencies", [])]
    requirements = folder / "requirements.txt"
    if requirements.is_file():
        for line in requirements.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                found.append(line)
    return found


def install_command(python: str, requirements: list[str]) -> str:
    """A shell command that installs requirements into `python`'s environment, with uv when the host
    has it.
    """
    args = " ".join(shlex.quote(r) for r in requirements)
    py = shlex.quote(python)
    return (
        f'if command -v uv >/dev/null 2>&1; then echo "installer: $(uv --version)"; '
        f'exec uv pip install --python "$(command -v {py})" {args}; '
        f'else echo "installer: $({py} -m pip --version)"; exec {py} -m pip install --progress-bar '
        f"off {args}; fi"
    )


def set_up(
    host: Host, loaded: LoadedLab, options: Options, console: Console, redact: Redactor
) -> Setup:
    """Install the lab's requirements with the host's uv or pip; how long it took, for the
    record.
    """
    requirements = lab_requirements(loaded.folder)
    if not requirements:
        console.print(
            f"--setup: {loaded.display_path()} names no requirements "
            "(pyproject.toml, requirements.txt)"
        )
        return Setup(seconds=0.0)
    command = install_command(loaded.lab.python, requirements)
    with Display(console, redact, options.quiet) as display:
        display.note(
            f"── setup: installing {len(requirements)} requirements on {host.label}", "bold cyan"
        )
        env = {**host.environment(), **options.env, "PYTHONUNBUFFERED": "1"}
        proc = host.spawn(command, None, env, lambda t: display.output("setup", t))
        try:
            code = proc.wait(3600)
        except ConnectionLost as exc:
            raise RunError(f"--setup on {host.label}: {exc}") from None
        finally:
            proc.end()
    output = clean(proc.output)
    if code != 0:
        lines = "\n".join(f"  | {redact(line)}" for line in tail(output, TAIL_LINES))
        raise RunError(
            f"--setup on {host.label}: installing {', '.join(requirements)} failed "
            f"(status {code}):\n{lines}"
        )
    installer = re.search(r"^installer: (.+)$", output, re.MULTILINE)
    return Setup(
        seconds=round(proc.seconds, 3),
        requirements=requirements,
        installer=installer.group(1).strip() if installer else None,
    )
