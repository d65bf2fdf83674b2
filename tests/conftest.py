"""Shared fixtures: a fresh copy of the fixture project, and the `course` command as a real process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
COURSE = [sys.executable, "-m", "course"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/project, with no records yet."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "project", root, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return root


CourseRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def course(project: Path) -> CourseRun:
    """Run `course --root <project> ARGS...` as a real process; returns the completed process."""
    port = str(free_port())

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "PORT": port, "COLUMNS": "200", **(env or {})}
        return subprocess.run(
            [*COURSE, "--root", str(project), *args], capture_output=True, text=True, env=full_env,
            timeout=timeout,
        )

    return run
