"""Installing a lab's requirements on the run's host (`course run --setup`)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from ..errors import RunError


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
