"""The page checks of what a lesson's zip ships besides the page: the lab's files (READMEs,
docstrings, comments), the included kit, START-HERE.md and compare.py, checked for words about the
course's tooling, each at its file and line."""

from __future__ import annotations

from pathlib import Path

from ..lab.load import LoadedLab
from ..pages.lint.checks import tooling_phrases
from ..pages.lint.findings import Finding
from ..pages.lint.marked import plain_prose
from ..pages.lint.settings import Settings
from ..record.models import Run
from .bundle import lab_entries
from .expected import compare_source, expected_for
from .start_here import START_HERE, start_here


def shipped_texts(root: Path, lab: LoadedLab, run: Run) -> list[tuple[str, str]]:
    """(file as messages name it, text) of every text file the lesson's zip ships but the page."""
    lesson = lab.lab.lesson
    made = f"(made for {lesson}"
    texts = [(f"{START_HERE} {made} from its lab.yml and run)", start_here(lab, run, "lesson.pdf"))]
    for entry in lab_entries(lab):
        name = entry.name.removeprefix("lab/")
        path = lab.included.get(name, lab.folder / name)
        try:
            text = entry.data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a binary file: nothing a reader reads as words
        texts.append((_shown(root, path), text))
    if expected_for(lab, run) is not None:
        source = compare_source().decode("utf-8")
        texts.append((f"compare.py {made} by course/package/compare_lab.py)", source))
    return texts


def _shown(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def shipped_findings(root: Path, lab: LoadedLab, run: Run, settings: Settings) -> list[Finding]:
    """Words about the tooling in what the lesson's zip ships."""
    phrases = settings.tooling.regex()
    found: list[Finding] = []
    for shown, text in shipped_texts(root, lab, run):
        found += tooling_phrases(plain_prose(shown, text, 1), phrases)
    return found
