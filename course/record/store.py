"""The records of every lesson under `build/`: runs oldest first, the newest good run, salvage.

A run killed outright leaves its `.tmp-` folder; the next run of the lesson, taking the lock
(`run/lock.py`), turns it into a failed run. Nothing recorded is rewritten. A run folder whose
run.json cannot be read is damaged: it is skipped (never counted as good) and reported once by
the command that met it, naming the folder and the remedy, instead of stopping everything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import RecordError
from .files import RUN_FILE, TMP_PREFIX, TMP_SUFFIX, dump_json, read_record, write_atomic
from .models import Failure, Record, Run, run_order

LESSON_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
"""What a lesson's name looks like (its folders under lab/ and build/ carry it)."""
DAMAGED_PREFIX = ".damaged-"
"""Where a damaged run is moved aside to: a folder starting with '.' is never read as a run."""


@dataclass(frozen=True)
class Damaged:
    """A run folder whose run.json cannot be read, and why."""

    folder: Path
    reason: str

    def message(self) -> str:
        """What to say about it: the folder, why, what happens to it, and the remedy."""
        shown = _shown(self.folder)
        aside = _shown(self.folder.parent / f"{DAMAGED_PREFIX}{self.folder.name}")
        return (
            f"{shown}: damaged record, skipped ({self.reason}); it is never counted as a good "
            f"run. Move it aside to keep it: mv {shown} {aside}"
        )


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Store:
    """The records of every lesson under one `build/` folder."""

    def __init__(self, build: Path) -> None:
        self.build = build
        self.damaged: dict[str, dict[Path, Damaged]] = {}
        """Damaged run folders met so far, by lesson."""

    def lesson_dir(self, lesson: str) -> Path:
        """`build/<lesson>/`; RecordError for a name that is not a lesson's (it could leave
        build/)."""
        if not LESSON_NAME.match(lesson):
            raise RecordError(
                f"'{lesson}' is not a lesson name (lowercase letters, digits and '-')"
            )
        return self.build / lesson

    def runs(self, lesson: str) -> list[Run]:
        """Every finished run of a lesson, oldest first (run ids sort by time)."""
        folder = self.lesson_dir(lesson)
        if not folder.is_dir():
            return []
        found = []
        for child in sorted(folder.iterdir(), key=lambda p: run_order(p.name)):
            if child.name.startswith(".") or not child.is_dir():
                continue
            try:
                found.append(Run(read_record(child), child))
            except RecordError as exc:
                self.damaged.setdefault(lesson, {})[child] = Damaged(child, _reason(exc, child))
        return found

    def damaged_runs(self, lesson: str) -> list[Damaged]:
        """The lesson's run folders whose run.json cannot be read."""
        self.runs(lesson)
        return list(self.damaged.get(lesson, {}).values())

    def lessons(self) -> list[str]:
        """Every lesson with a folder under build/."""
        if not self.build.is_dir():
            return []
        return sorted(p.name for p in self.build.iterdir() if p.is_dir() and p.name[0] != ".")

    def newest_good(self, lesson: str, card: str | None = None) -> Run | None:
        """The newest of `good_runs`: the one a page shows (`pages/choose.py`)."""
        good = self.good_runs(lesson, card)
        return good[-1] if good else None

    def good_runs(self, lesson: str, card: str | None = None) -> list[Run]:
        """The runs whose every step succeeded, oldest first; only those on a GPU of kind `card`
        when one is given (lab.yml's `resources.gpu`, `Run.on_card`)."""
        return [r for r in self.runs(lesson) if r.good and (card is None or r.on_card(card))]

    def get(self, lesson: str, run_id: str) -> Run:
        """One run by id; RecordError listing the runs there are otherwise."""
        folder = self.lesson_dir(lesson) / run_id
        if not (folder / RUN_FILE).is_file():
            known = ", ".join(r.run_id for r in self.runs(lesson)) or "none"
            raise RecordError(
                f"lesson '{lesson}' has no run '{run_id}' in {self.lesson_dir(lesson)} (runs: "
                f"{known})"
            )
        try:
            return Run(read_record(folder), folder)
        except RecordError as exc:
            raise RecordError(Damaged(folder, _reason(exc, folder)).message()) from None

    def new_run_id(self, lesson: str, started: datetime, slug: str) -> str:
        """A run id that sorts by time and names the GPU, e.g. `2026-11-29T101233Z-h200`; the
        second run of one second is `...-h200-02`, then `-03`, ... (two digits: plain sorting
        keeps the order; `models.run_order` also puts older runners' `-2` ... `-11` in order)."""
        base = started.astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ") + f"-{slug}"
        folder = self.lesson_dir(lesson)
        candidate, n = base, 1
        while (folder / candidate).exists() or (folder / f"{TMP_PREFIX}{candidate}").exists():
            n += 1
            candidate = f"{base}-{n:02d}"
        return candidate

    def salvage(self, lesson: str) -> list[str]:
        """Turn the `.tmp-` folders of killed runs into failed runs, keeping all they recorded."""
        saved = []
        folder = self.lesson_dir(lesson)
        for tmp in sorted(folder.glob(f"{TMP_PREFIX}*")):
            run_id = tmp.name[len(TMP_PREFIX) :]
            try:
                record = read_record(tmp)
            except RecordError:
                continue
            for stray in [*tmp.glob(f".*{TMP_SUFFIX}"), *tmp.glob(f"steps/.*{TMP_SUFFIX}")]:
                stray.unlink()  # a write the killed runner had begun
            record.status = "failed"
            record.failure = record.failure or Failure(
                step=_first_unfinished(record), message="the runner was killed before the run ended"
            )
            write_atomic(tmp / RUN_FILE, dump_json(record.model_dump(mode="json")))
            os.replace(tmp, folder / run_id)
            saved.append(run_id)
        return saved


def _first_unfinished(record: Record) -> str | None:
    for step in record.steps:
        if step.status not in ("ok", "reused"):
            return step.id
    return None


def _reason(exc: RecordError, folder: Path) -> str:
    """A read error without the path, which the message names already."""
    text = str(exc)
    prefix = f"{folder / RUN_FILE}: "
    return "run.json " + text[len(prefix) :] if text.startswith(prefix) else text
