"""The run a page shows, chosen in one place for the site, the PDF, the zip, `check` and `diff`.

A page shows the run its front matter pins (`run:`), else its lesson's newest good run on the card
its lab asks for (lab.yml's `resources.gpu`: the card its sentences are written for), else, when
the lab names no card, its lesson's newest good run. A run on another card stays a record
(`course diff`, `compare`, the stability bench read it) without moving the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import CourseError, PageError
from ..lab.load import load_lab
from ..record.models import Run
from ..record.store import Store
from .lessons import lesson_pages


def missing_run_mark(lesson: str) -> str:
    """How every message about a lesson without a run for its page begins."""
    return f"no good run of '{lesson}'"


def missing_run_message(lesson: str, card: str | None, store: Store) -> str:
    """What a page says when its lesson has no good run (on its lab's card) yet."""
    if card is None:
        return (
            f"{missing_run_mark(lesson)} in build/{lesson}/ (expected a recorded run: run "
            f"`course run {lesson}` on a GPU machine and commit its build folder)"
        )
    newest = store.newest_good(lesson)
    elsewhere = (
        f"; its newest good run, {newest.run_id}, ran on {newest.gpu_name}" if newest else ""
    )
    return (
        f"{missing_run_mark(lesson)} on {card} in build/{lesson}/ (lab/{lesson}/lab.yml's "
        f"resources.gpu asks for {card}{elsewhere}): run `course run {lesson}` on a machine with "
        f"{card} and commit its build folder, or pin a run in the page's front matter (run: RUN-ID)"
    )


def lab_card(root: Path, lesson: str) -> str | None:
    """The GPU kind a lesson's lab asks for (lab.yml's `resources.gpu`); None when it names none
    or the lesson has no lab.yml. LabError for a lab.yml that does not load."""
    path = root / "lab" / lesson / "lab.yml"
    return load_lab(path).lab.card if path.is_file() else None


def page_runs(store: Store, lesson: str) -> list[Run]:
    """The runs a page of the lesson can show, oldest first: its good runs on its lab's card."""
    return store.good_runs(lesson, lab_card(store.build.parent, lesson))


def newest_page_run(store: Store, lesson: str) -> Run | None:
    """The run a page of the lesson shows when it pins none: the newest good run on its lab's
    card, or None."""
    return store.newest_good(lesson, lab_card(store.build.parent, lesson))


def cardless_warning(store: Store, lesson: str) -> str | None:
    """A warning when the lesson's lab names no card while its good runs were made on more than
    one kind of GPU: its page then follows the newest of them, whatever the card its sentences
    were written for."""
    if lab_card(store.build.parent, lesson) is not None:
        return None
    good = store.good_runs(lesson)
    kinds = list(dict.fromkeys(r.gpu_name for r in good))
    if len(kinds) < 2:
        return None
    newest = good[-1]
    return (
        f"lab/{lesson}/lab.yml names no card, and the good runs of '{lesson}' were made on "
        f"{len(kinds)} kinds of GPU ({', '.join(kinds)}): its page shows the newest, "
        f"{newest.run_id} on {newest.gpu_name}, whatever the card its sentences were written for; "
        "name that card in lab.yml (resources: {gpu: KIND}) to keep the page on its runs"
    )


def page_run(store: Store, lesson: str, pinned: str | None = None) -> Run:
    """The pinned run, else `newest_page_run`; PageError when there is none. The store's folder is
    the project's build/, beside its lab/."""
    if pinned:
        return store.get(lesson, pinned)
    card = lab_card(store.build.parent, lesson)
    found = store.newest_good(lesson, card)
    if found is None:
        raise PageError(missing_run_message(lesson, card, store))
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
