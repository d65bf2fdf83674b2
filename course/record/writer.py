"""Writing one run: into `.tmp-<run-id>/` step by step, then renamed into place when it ends.

A reader never sees half a run; a run killed outright keeps what it recorded so far.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import RecordError
from .files import RUN_FILE, TMP_PREFIX, dump_json, now_iso, sha256_file, write_atomic
from .models import Failure, KeptFile, Record, Run, RunStatus
from .store import Store


class RunWriter:
    """Writes one run into its temporary folder, then moves it into place."""

    def __init__(self, store: Store, record: Record) -> None:
        self.store = store
        self.record = record
        self.final = store.lesson_dir(record.lesson) / record.run_id
        self.folder = store.lesson_dir(record.lesson) / f"{TMP_PREFIX}{record.run_id}"
        self.folder.mkdir(parents=True)
        (self.folder / "steps").mkdir()
        self.save()

    def save(self) -> None:
        """Write run.json as it stands (after each step, so a killed run keeps what it did)."""
        write_atomic(self.folder / RUN_FILE, dump_json(self.record.model_dump(mode="json")))

    def write_transcript(self, step_id: str, text: str) -> str:
        """Store a step's transcript; returns its path inside the run."""
        rel = f"steps/{step_id}.txt"
        (self.folder / rel).write_text(text, encoding="utf-8")
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
        os.replace(self.folder, self.final)
        return Run(self.record, self.final)
