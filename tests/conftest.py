"""Shared fixtures: a fresh copy of the fixture project, and the `course` command as a real
process.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import (
    COURSE,
    FIXTURES,
    CourseRun,
    Published,
    free_port,
    fresh_clone,
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
def repo_published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    """The repository's files as a clone has them (no site, no caches), published once by the
    CLI from the committed records (HTML, PDFs and zips, checked and precompressed) for a local
    address: `repo_site` serves it there, tests/publish/test_publish_repo.py checks it."""
    root = fresh_clone(tmp_path_factory.mktemp("clone") / "course")
    url = f"http://127.0.0.1:{free_port()}/"
    done = subprocess.run(
        [*COURSE, "publish", "--site-url", url, "--to", "out/"],
        cwd=root,  # `python -m course` imports the copy's package, as on a fresh clone
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Published(root, done, url)


@pytest.fixture(scope="session")
def repo_site(repo_published: Published) -> Iterator[tuple[Path, str]]:
    """The repository's own site, published once from a fresh clone for a local address
    (`repo_published`), and served there: (site folder, its address)."""
    assert repo_published.done.returncode == 0, repo_published.done.stderr
    port = int(repo_published.url.rsplit(":", 1)[1].strip("/"))
    with serving(repo_published.site_dir, port) as url:
        assert url == repo_published.url
        yield repo_published.site_dir, url


# Session fixtures that build whole sites: the modules that ask for one go to the same xdist
# worker, so each is built once per run rather than once per worker.
_SHARED_BUILDS = {
    "repo_site": "repo_site",
    "repo_published": "repo_site",
    "package_builds": "package_builds",
    "two_lessons": "two_lessons",
}


@functools.cache
def _scope(root: Path, module: str) -> str:
    """The unit of work a module belongs to: the shared build it asks for, else itself."""
    text = (root / module).read_text(encoding="utf-8")
    found = (unit for name, unit in _SHARED_BUILDS.items() if re.search(rf"\b{name}\b", text))
    return next(found, module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `pytest -n N`: whole modules to a worker (their module fixtures are made once),
    and the modules sharing one session build together."""
    from xdist.scheduler import LoadScopeScheduling

    class ByBuild(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(config.rootpath, nodeid.split("::", 1)[0])

    return ByBuild(config, log)
