"""Writing one run: into `.tmp-<run-id>/` step by step, then renamed into place when it ends.

A reader never sees half a run; a run killed outright keeps what it recorded so far. A write that
fails (a full disk, a read-only `build/`) is a RecordError naming what was written, the path and,
for a full disk, the room left; a run that cannot be finished is removed (`discard`), never left
half-written for the next run to salvage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import RecordError
from .files import (
    RUN_FILE,
    TMP_PREFIX,
    describe,
    dump_json,
    now_iso,
    sha256_file,
    write_atomic,
)
from .models import Failure, KeptFile, Record, Run, RunStatus
from .store import Store


@contextlib.contextmanager
def writing(what: str, path: Path) -> Iterator[None]:
    """Turn an OSError met while writing `what` (at `path`) into a RecordError that names it."""
    try:
        yield
    except OSError as exc:
        raise RecordError(f"could not write {what}: {describe(exc, path)}") from None


class RunWriter:
    """Writes one run into its temporary folder, then moves it into place."""

    def __init__(self, store: Store, record: Record) -> None:
        self.store = store
        self.record = record
        self.final = store.lesson_dir(record.lesson) / record.run_id
        self.folder = store.lesson_dir(record.lesson) / f"{TMP_PREFIX}{record.run_id}"
        with writing(f"the record of run {record.run_id}", self.folder):
            self.folder.mkdir(parents=True)
        try:
            with writing(f"the record of run {record.run_id}", self.folder / "steps"):
                (self.folder / "steps").mkdir()
            self.save()
        except RecordError:
            self.discard()  # nothing of it is left for the next run to salvage
            raise

    def save(self) -> None:
        """Write run.json as it stands (after each step, so a killed run keeps what it did)."""
        with writing(f"the record of run {self.record.run_id}", self.folder / RUN_FILE):
            write_atomic(self.folder / RUN_FILE, dump_json(self.record.model_dump(mode="json")))

    def write_transcript(self, step_id: str, text: str) -> str:
        """Store a step's transcript; returns its path inside the run."""
        rel = f"steps/{step_id}.txt"
        with writing(f"the transcript of step '{step_id}'", self.folder / rel):
            write_atomic(self.folder / rel, text)
        return rel

    def keep_file(
        self, step_id: str, source: Path, rel: str, redact: Callable[[bytes], bytes] | None = None
    ) -> KeptFile:
        """Copy a file a step produced into the run, its bytes passed through `redact`.

        RecordError when `rel` would lead outside the run's folder for the step's files."""
        base = self.folder / "files" / step_id
        target = base / rel
        if not target.resolve().is_relative_to(base.resolve()):
            raise RecordError(f"step '{step_id}': file '{rel}' would be kept outside {base}")
        data = source.read_bytes()
        if redact is not None:
            data = redact(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return KeptFile(path=rel, bytes=target.stat().st_size, sha256=sha256_file(target))

    def copy_step(self, old: Run, step_id: str) -> None:
        """Bring a reused step's transcript and files over from the run that made them."""
        step = old.record.step(step_id)
        with writing(f"step '{step_id}', reused from {old.run_id}", self.folder):
            if step.transcript:
                shutil.copyfile(old.inside(step.transcript), self.folder / f"steps/{step_id}.txt")
            source = old.folder / "files" / step_id
            if source.is_dir():
                shutil.copytree(source, self.folder / "files" / step_id)

    def finish(self, status: RunStatus, failure: Failure | None = None) -> Run:
        """Write the final run.json and move the run into place."""
        self.record.status = status
        self.record.failure = failure
        self.record.ended = now_iso()
        self.save()
        with writing(f"the record of run {self.record.run_id}", self.final):
            os.replace(self.folder, self.final)
        return Run(self.record, self.final)

    def discard(self) -> None:
        """Remove the run's unfinished folder (a run that could not be recorded)."""
        shutil.rmtree(self.folder, ignore_errors=True)
