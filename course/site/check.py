"""`course check`: every page's values, claims and the checks of the text (`pages/lint/`), without
HTML; and the pages pinned behind their lesson's newest run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CourseError, PageError
from ..package.lint import shipped_findings
from ..pages.checks import position_warning
from ..pages.choose import cardless_warning, newest_page_run
from ..pages.claims import fragile_warnings
from ..pages.context import Problem
from ..pages.faq import load_page_data
from ..pages.lessons import PageEntry, placement_problems, scan
from ..pages.lint import CheckedPage, Finding, Settings, check_page, load_settings
from ..pages.macros import ANSWERABLE
from ..pages.outline import OUTLINE, load_outline
from ..pages.state import report
from ..record.models import run_order
from ..record.store import Store

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
    store = Store(root / "build")
    lessons = dict.fromkeys(e.meta.lesson for e in pages if e.meta.lesson and not e.meta.run)
    checked.warnings += [w for w in (cardless_warning(store, x) for x in lessons if x) if w]
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
    """Pages pinned to a run older than the run they would show unpinned (their lesson's newest
    good run on its lab's card): (page, pinned run, newest run).
    """
    store = Store(root / "build")
    behind = []
    for entry in scan(root / "docs"):
        if entry.meta.lesson and entry.meta.run:
            newest = newest_page_run(store, entry.meta.lesson)
            if newest is not None and run_order(newest.run_id) > run_order(entry.meta.run):
                behind.append((f"docs/{entry.src}", entry.meta.run, newest.run_id))
    return behind

def check_or_fail(root: Path) -> Checked:
    """Run check_pages and raise PageError listing every problem; what it found otherwise."""
    checked = check_pages(root)
    if checked.problems:
        raise PageError(report(checked.problems))
    return checked
