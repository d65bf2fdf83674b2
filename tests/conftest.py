"""Shared fixtures: a fresh copy of the fixture project, and the `course` command as a real
process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import (
    COURSE,
    FIXTURES,
    REPO,
    CourseRun,
    free_port,
    make_package_project,
    make_two_lesson_project,
    serving,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/project, with no records yet."""
    root = tmp_path / "project"
    shutil.copytree(
        FIXTURES / "project", root, ignore=shutil.ignore_patterns("build", "__pycache__")
    )
    return root


@pytest.fixture
def course(project: Path) -> CourseRun:
    """Run `course --root <project> ARGS...` as a real process; returns the completed process."""
    port = str(free_port())

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "PORT": port, "COLUMNS": "200", **(env or {})}
        return subprocess.run(
            [*COURSE, "--root", str(project), *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
        )

    return run


@pytest.fixture(scope="session")
def package_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fixture project built twice, each from scratch, with its own package cache (A and B)."""
    from course.site import build_site

    base = tmp_path_factory.mktemp("package-builds")
    roots = []
    for name in ("a", "b"):
        root = make_package_project(base / name)
        build_site(root, root / "site")
        roots.append(root)
    return roots[0], roots[1]


@pytest.fixture(scope="session")
def two_lessons(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-lesson fixture project (support.make_two_lesson_project), built once."""
    from course.site import build_site

    root = make_two_lesson_project(tmp_path_factory.mktemp("two-lessons") / "project")
    build_site(root, root / "site")
    return root


@pytest.fixture(scope="session")
def repo_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The repository's own site, built once from the committed records for a local address
    (HTML, PDFs and zips), and served there: (site folder, its address)."""
    from course.site import build_site

    port = free_port()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_SITE_URL", f"http://127.0.0.1:{port}/")
        out = tmp_path_factory.mktemp("repo")
        result = build_site(REPO, out / "site", out / "cache")
    with serving(result.site_dir, port) as url:
        yield result.site_dir, url
