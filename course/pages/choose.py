"""The run a page shows, chosen in one place for the site, the PDF, the zip, `check` and `diff`.

A page shows the run its front matter pins (`run:`), else its lesson's newest good run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import CourseError, PageError
from ..record.models import Run
from ..record.store import Store
from .lessons import lesson_pages


def missing_run_message(lesson: str) -> str:
    """What a page says when its lesson has no good run yet."""
    return (
        f"no good run of '{lesson}' in build/{lesson}/ (expected a recorded run: run "
        f"`course run {lesson}` on a GPU machine and commit its build folder)"
    )


def page_run(store: Store, lesson: str, pinned: str | None = None) -> Run:
    """The pinned run, else the lesson's newest good run; PageError when there is none."""
    if pinned:
        return store.get(lesson, pinned)
    found = store.newest_good(lesson)
    if found is None:
        raise PageError(missing_run_message(lesson))
    return found


@dataclass(frozen=True)
class ChosenPage:
    """A lesson page and the run it shows."""

    src: str
    """Path inside docs/."""
    url: str
    """URL relative to the site root, e.g. `part-2/kv-cache/`."""
    title: str
    lesson: str
    run_id: str


def lesson_page_runs(root: Path) -> list[ChosenPage]:
    """Every lesson page of docs/, in course order, with the run it shows; PageError naming the
    page.
    """
    store = Store(root / "build")
    found = []
    for entry in lesson_pages(root / "docs"):
        lesson = entry.meta.lesson or ""
        try:
            run = page_run(store, lesson, entry.meta.run)
        except CourseError as exc:
            raise PageError(f"docs/{entry.src}: {exc}") from None
        found.append(ChosenPage(entry.src, entry.url, entry.title, lesson, run.run_id))
    return found
