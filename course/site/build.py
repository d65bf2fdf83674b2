"""`course build`: the pages rendered into HTML by an engine (MkDocs, or Zensical where it is
installed), the steps after the HTML that the engine did not run as hooks (`after.py`), the page
checks, then each lesson's PDF and zip; into a folder beside site/, swapped in once whole.

`build_site` returns a `BuildResult` naming every lesson page, its lesson and its run, so that a
later stage (PDFs of the lesson pages, the lesson zips) can be appended after the HTML build.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PageError, os_message
from ..package.lessons import package_lessons
from ..pages.choose import ChosenPage, lesson_page_runs
from ..pages.state import LENIENT, report
from .after import AFTER_HTML, Written, run_after
from .check import check_pages
from .mkdocs_engine import CONFIG, run_mkdocs
from .zensical_engine import run_zensical


@dataclass(frozen=True)
class Engine:
    """A build engine: what writes the HTML, and which steps after it it runs itself."""

    run: Callable[[Path, Path, Path, str | None], tuple[dict[str, Any], list[str]]]
    """(project, empty site folder, cache, site_url) -> the site's configuration and the
    engine's warnings."""
    hooked: frozenset[str]
    """The steps after the HTML (`after.AFTER_HTML`) it runs as hooks while it builds."""


ENGINES = {
    "mkdocs": Engine(run_mkdocs, frozenset(name for name, _ in AFTER_HTML)),
    "zensical": Engine(run_zensical, frozenset()),
}
"""The engines `course build --engine` knows; the first is the default."""


@dataclass(frozen=True)
class LessonPage:
    """A built lesson page: its source, URL, title, lesson and run, and where its HTML is."""

    src: str
    url: str
    title: str
    lesson: str
    run_id: str
    html: Path
    """The built HTML file."""


@dataclass
class BuildResult:
    """What `build_site` made."""

    site_dir: Path
    seconds: float
    pages: list[LessonPage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What mkdocs logged, then what the page checks warn about."""


def build_site(
    root: Path,
    out: Path | None = None,
    cache_dir: Path | None = None,
    site_url: str | None = None,
    jobs: int | None = None,
    engine: str = "mkdocs",
) -> BuildResult:
    """Build the site from docs/ and the committed records with `engine` (ENGINES).

    What is kept between builds goes under `cache_dir` (default: the project's `.cache/`): the
    drawn figures in `figures/`, the social cards in `cards/`, the PDFs and zips in `package/`.
    `site_url` replaces mkdocs.yml's address (`course publish`); `jobs` is the number of
    processes printing PDFs (default: one per core).
    """
    if engine not in ENGINES:
        raise PageError(f"no build engine {engine!r} (engines: {', '.join(ENGINES)})")
    cache = cache_dir if cache_dir is not None else root / ".cache"
    config_file = root / CONFIG
    if not config_file.is_file():
        raise PageError(f"no {CONFIG} in {root} (the site's configuration)")
    site_dir = (out or root / "site").resolve()
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    os.environ.pop(LENIENT, None)
    started = time.perf_counter()
    try:
        # built beside the site and swapped in only once whole: a failed build keeps the last
        # good site; the folder is named after its builder, so a later build knows when it died
        site_dir.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(site_dir)
        prefix = f".{site_dir.name}.building-{os.getpid()}-{_started(os.getpid())}-"
        fresh = Path(tempfile.mkdtemp(prefix=prefix, dir=site_dir.parent))
    except OSError as exc:
        raise PageError(f"the site did not build: {os_message(exc)}") from None
    try:
        config, warnings = ENGINES[engine].run(root, fresh, cache, site_url)
        run_after(Written(root, fresh, cache, config), ENGINES[engine].hooked)
        checked = check_pages(root, lessons_only=True)  # the page checks engines do not run
        if checked.problems:
            raise PageError(f"the site did not build:\n{report(checked.problems)}")
        warnings += checked.warnings
        chosen = lesson_page_runs(root)
        # downloads/lesson-<number>.pdf and .zip
        packaged = package_lessons(root, fresh, chosen, cache / "package", site_url, jobs)
        warnings += [note for lesson in packaged for note in lesson.notes]
        _swap_in(fresh, site_dir)
    except OSError as exc:
        raise PageError(f"the site did not build: {os_message(exc)}") from None
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    pages = [_built(page, site_dir) for page in chosen]
    seconds = time.perf_counter() - started
    return BuildResult(site_dir, seconds, pages, warnings)


def _started(pid: int) -> int:
    """When a process started, in clock ticks since boot (0 when /proc cannot say)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rfind(")") + 2 :].split()[19])


def _alive(pid: int, started: int) -> bool:
    """Whether the process that started at `started` (ticks since boot) is still running."""
    if Path("/proc/self/stat").exists():
        return Path(f"/proc/{pid}").exists() and _started(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive
    return True


STALE_UNNAMED = 86400
"""Seconds after which a build folder that does not name its builder (made before they did) is
taken for stale."""


def _remove_stale(site_dir: Path) -> None:
    """Remove the build folders (`.site.building-*`, `.site.old-*`) of builds that died: the
    process named in the folder's name is gone, or is another process now."""
    name = re.escape(site_dir.name)
    named = re.compile(rf"\.{name}\.(?:building|old)-(\d+)-(\d+)-\w+")
    unnamed = re.compile(rf"\.{name}\.(?:building|old)-\w+")
    for folder in site_dir.parent.glob(f".{site_dir.name}.*-*"):
        found = named.fullmatch(folder.name)
        if found is not None:
            pid, started = int(found.group(1)), int(found.group(2))
            if _alive(pid, started):
                continue  # its build is still going
        elif (
            not unnamed.fullmatch(folder.name)
            or time.time() - folder.stat().st_mtime < STALE_UNNAMED
        ):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _swap_in(fresh: Path, site_dir: Path) -> None:
    """Put a finished build where the site is, moving the old one out of the way first."""
    old = fresh.with_name(fresh.name.replace(".building-", ".old-"))
    if site_dir.exists():
        os.replace(site_dir, old)
    try:
        os.replace(fresh, site_dir)
    except OSError:
        if old.exists():
            os.replace(old, site_dir)  # put the last good site back
        raise
    shutil.rmtree(old, ignore_errors=True)


def _built(page: ChosenPage, site_dir: Path) -> LessonPage:
    html = site_dir / page.url / "index.html"
    return LessonPage(page.src, page.url, page.title, page.lesson, page.run_id, html)
