"""The records of every lesson under `build/`: runs oldest first, the newest good run, the lock.

A run killed outright leaves its `.tmp-` folder; the next run of the lesson, taking the lock,
turns it into a failed run. Nothing recorded is rewritten.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..errors import RecordError, RunError
from .files import RUN_FILE, TMP_PREFIX, dump_json, read_record, write_atomic
from .models import Failure, Record, Run


class Store:
    """The records of every lesson under one `build/` folder."""

    def __init__(self, build: Path) -> None:
        self.build = build

    def lesson_dir(self, lesson: str) -> Path:
        """`build/<lesson>/`."""
        return self.build / lesson

    def runs(self, lesson: str) -> list[Run]:
        """Every finished run of a lesson, oldest first (run ids sort by time)."""
        folder = self.lesson_dir(lesson)
        if not folder.is_dir():
            return []
        found = []
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or not child.is_dir():
                continue
            found.append(Run(read_record(child), child))
        return found

    def newest_good(self, lesson: str) -> Run | None:
        """The newest run whose every step succeeded: the one pages use."""
        good = [r for r in self.runs(lesson) if r.good]
        return good[-1] if good else None

    def get(self, lesson: str, run_id: str) -> Run:
        """One run by id; RecordError listing the runs there are otherwise."""
        folder = self.lesson_dir(lesson) / run_id
        if not (folder / RUN_FILE).is_file():
            known = ", ".join(r.run_id for r in self.runs(lesson)) or "none"
            raise RecordError(
                f"lesson '{lesson}' has no run '{run_id}' in {self.lesson_dir(lesson)} (runs: "
                f"{known})"
            )
        return Run(read_record(folder), folder)

    def new_run_id(self, lesson: str, started: datetime, slug: str) -> str:
        """A run id that sorts by time and names the GPU, e.g. `2026-11-29T101233Z-h200`."""
        base = started.astimezone(UTC).strftime("%Y-%m-%dT%H%M%SZ") + f"-{slug}"
        folder = self.lesson_dir(lesson)
        candidate, n = base, 1
        while (folder / candidate).exists() or (folder / f"{TMP_PREFIX}{candidate}").exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    @contextlib.contextmanager
    def lock(self, lesson: str) -> Iterator[None]:
        """Hold the lesson for one run at a time; recover what an earlier killed run left."""
        folder = self.lesson_dir(lesson)
        folder.mkdir(parents=True, exist_ok=True)
        lock = folder / ".lock"
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                pid = _read_pid(lock)
                if pid is not None and _alive(pid):
                    raise RunError(
                        f"another run of '{lesson}' is in progress (pid {pid}, lock {lock}); "
                        "wait for it or end it first"
                    ) from None
                lock.unlink(missing_ok=True)
        else:
            raise RunError(f"could not take the lock {lock}")
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            os.close(fd)
            self.salvage(lesson)
            yield
        finally:
            lock.unlink(missing_ok=True)

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


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
