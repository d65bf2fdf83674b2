"""The site stages: `build` (mkdocs, strict, into site/), `check` (values, claims and the page
checks of `pages/lint/`, without HTML), `serve`.

`build_site` returns a `BuildResult` naming every lesson page, its lesson and its run, so that a
later stage (PDFs of the lesson pages, the lesson zips) can be appended after the HTML build.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CourseError, PageError, os_message
from .package.lessons import package_lessons
from .package.lint import shipped_findings
from .pages.checks import position_warning
from .pages.choose import ChosenPage, lesson_page_runs
from .pages.claims import fragile_warnings
from .pages.context import Problem
from .pages.faq import load_page_data
from .pages.lessons import PageEntry, placement_problems, scan
from .pages.lint import CheckedPage, Finding, Settings, check_page, load_settings
from .pages.macros import ANSWERABLE
from .pages.outline import OUTLINE, load_outline
from .pages.plugin import LENIENT, STATE, report
from .pages.render import hint
from .record.models import run_order
from .record.store import Store

CONFIG = "mkdocs.yml"


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


class _Collect(logging.Handler):
    """Keeps the warnings mkdocs and its plugins log, to quote them when a build fails."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def build_site(
    root: Path,
    out: Path | None = None,
    cache_dir: Path | None = None,
    site_url: str | None = None,
    jobs: int | None = None,
) -> BuildResult:
    """Build the HTML site from docs/ and the committed records with mkdocs --strict.

    What is kept between builds goes under `cache_dir` (default: the project's `.cache/`): the
    drawn figures in `figures/`, the social cards in `cards/`, the PDFs and zips in `package/`.
    `site_url` replaces mkdocs.yml's address (`course publish`); `jobs` is the number of
    processes printing PDFs (default: one per core).
    """
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
        warnings = _mkdocs(config_file, fresh, cache, site_url)
        checked = check_pages(root, lessons_only=True)  # the page checks mkdocs does not run
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


def _mkdocs(config_file: Path, site_dir: Path, cache: Path, site_url: str | None) -> list[str]:
    """mkdocs --strict into `site_dir` (for `site_url` when given); PageError with every problem
    it logged; its warnings."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    try:
        overrides = {"site_url": site_url} if site_url else {}
        config = load_config(
            config_file=str(config_file), site_dir=str(site_dir), strict=True, **overrides
        )
        STATE.figure_cache = cache / "figures"
        STATE.cards_cache = cache / "cards"
        build(config)
    except MkDocsException as exc:  # Abort included: mkdocs logged the cause before aborting
        raise PageError(_failure(str(exc), collect.messages)) from None
    except SystemExit:  # mkdocs-macros exits on a template it cannot render
        raise PageError(
            _failure("a page's macros could not be rendered", collect.messages)
        ) from None
    finally:
        logger.removeHandler(collect)
        STATE.figure_cache = None
        STATE.cards_cache = None
    return collect.messages


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


def _failure(headline: str, messages: list[str]) -> str:
    if messages:
        return "the site did not build:\n" + "\n".join(_condensed(m) for m in messages)
    return f"the site did not build: {headline}"


_MACRO_FILE = re.compile(r"_File_: `([^`]+)`")
_MACRO_ERROR = re.compile(r"^_(\w+(?:Error|Exception))_: (.*)$", re.MULTILINE)


def _condensed(message: str) -> str:
    """mkdocs-macros' long error report as one line naming the page and the error."""
    page, error = _MACRO_FILE.search(message), _MACRO_ERROR.search(message)
    if not (message.startswith("[macros]") and page and error):
        return message
    return f"docs/{page.group(1)}: {error.group(1)}: {error.group(2)}{hint(error.group(2))}"


@dataclass
class Checked:
    """What `course check` found: pages checked, problems that fail it, warnings."""

    count: int
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_pages(root: Path, lessons_only: bool = False) -> Checked:
    """Render every page's macros without HTML and run the page checks (`pages/lint/`) over every
    lesson page and what its zip ships; a check's findings are problems or warnings as
    docs/data/lint.yml says. `lessons_only`: the lesson pages alone (after a build, whose own
    rendering has reported every page's macros)."""
    docs = root / "docs"
    if not docs.is_dir():
        raise PageError(f"no docs/ folder in {root}")
    settings = load_settings(docs)
    pages = scan(docs)
    placed = placement_problems(load_outline(docs), pages)
    checked = Checked(len(pages))
    checked.problems += [Problem(page, f"(docs/{OUTLINE})", message) for page, message in placed]
    findings: list[Finding] = []
    for entry in pages:
        if entry.raw.get("render_macros") is False or (lessons_only and not entry.meta.lesson):
            continue
        page = check_page(root, entry, settings)
        checked.problems += page.problems
        findings += page.findings + _shipped(root, page, settings)
        checked.warnings += _position(root, entry)
        if page.context is not None:  # what the page warns about without failing (wide lines)
            checked.warnings += page.context.notes
        if page.context is not None:
            source = (docs / entry.src).read_text(encoding="utf-8")
            checked.warnings += fragile_warnings(
                f"docs/{entry.src}", source, page.context.claim_results
            )
    for finding in dict.fromkeys(findings):  # in order, each once
        if settings.level(finding.check) == "error":
            checked.problems.append(
                Problem(finding.file, f"line {finding.line}", f"{finding.check}: {finding.message}")
            )
        else:
            checked.warnings.append(str(finding))
    return checked


def _shipped(root: Path, page: CheckedPage, settings: Settings) -> list[Finding]:
    """The checks of the lesson zip's other files (its lab, START-HERE.md)."""
    if page.context is None or not page.context.meta.lesson:
        return []
    try:
        return shipped_findings(root, page.context.lab, page.context.run, settings)
    except ANSWERABLE:
        return []  # no run or no lab: the page's problems say so


def check_site(root: Path) -> tuple[int, list[Problem]]:
    """Render every page's macros without HTML and run the page checks; (pages checked,
    problems found)."""
    checked = check_pages(root)
    return checked.count, checked.problems


def _position(root: Path, entry: PageEntry) -> list[str]:
    """A lesson page's checks whose right answers sit in a pattern (a warning)."""
    if not entry.meta.lesson:
        return []
    try:  # the data file alone: check_page has rendered (and reported) the page already
        found = position_warning(load_page_data(root / "docs", entry.src, entry.raw).checks)
    except CourseError:
        return []  # a broken data file is reported as a page problem already
    return [f"docs/{entry.src}: {found}"] if found else []


def pinned_behind(root: Path) -> list[tuple[str, str, str]]:
    """Pages pinned to a run older than their lesson's newest good run: (page, pinned run, newest
    run).
    """
    store = Store(root / "build")
    behind = []
    for entry in scan(root / "docs"):
        if entry.meta.lesson and entry.meta.run:
            newest = store.newest_good(entry.meta.lesson)
            if newest is not None and run_order(newest.run_id) > run_order(entry.meta.run):
                behind.append((f"docs/{entry.src}", entry.meta.run, newest.run_id))
    return behind


def check_or_fail(root: Path) -> Checked:
    """Run check_pages and raise PageError listing every problem; what it found otherwise."""
    checked = check_pages(root)
    if checked.problems:
        raise PageError(report(checked.problems))
    return checked


def serve_site(root: Path, dev_addr: str = "127.0.0.1:8000") -> None:
    """Live preview: rebuild on every change of docs/, the records, the labs and the figures."""
    from mkdocs.commands.serve import serve

    os.environ[LENIENT] = "1"
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
    logging.getLogger("mkdocs").addHandler(handler)
    logging.getLogger("mkdocs").setLevel(logging.INFO)
    watch = [
        str(root / p)
        for p in ("build", "lab", "figures", "course", "macros")
        if (root / p).is_dir()
    ]
    try:
        serve(config_file=str(root / CONFIG), dev_addr=dev_addr, livereload=True, watch=watch)
    except CourseError:
        raise
    except Exception as exc:  # noqa: BLE001 - mkdocs' own errors while serving, reported as a message
        raise PageError(f"serve: {exc}") from None
