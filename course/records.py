"""Runs on disk: `build/<lesson>/<run-id>/run.json`, one transcript per step, the files kept.

A run is written into `.tmp-<run-id>/` and renamed into place when it ends, good or failed, so a
reader never sees half a run. A run killed outright leaves its `.tmp-` folder; the next run of
the lesson turns it into a failed run. Nothing recorded is rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import RecordError, RunError

FORMAT = 1
TMP_PREFIX = ".tmp-"
RUN_FILE = "run.json"
StepStatus = Literal["ok", "reused", "failed", "skipped", "not-run"]
RunStatus = Literal["running", "ok", "partial", "failed"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Value(_Model):
    """A captured value with its type and unit."""

    value: int | float | str
    type: Literal["int", "float", "str"]
    unit: str


class KeptFile(_Model):
    """A file a step produced, kept in the record under `files/<step>/<path>`."""

    path: str
    bytes: int
    sha256: str


class HashParts(_Model):
    """What a step's hash is made of, so a re-run can say what changed."""

    definition: str
    inputs: dict[str, str]
    engine: dict[str, str | None]
    gpu: str


class StepRecord(_Model):
    """One step of a run."""

    id: str
    kind: Literal["run", "start", "stop"]
    title: str | None = None
    command: str
    needs: str | None = None
    status: StepStatus
    exit_code: int | None = None
    seconds: float | None = None
    started: str | None = None
    values: dict[str, Value] = {}
    files: list[KeptFile] = []
    transcript: str | None = None
    hash: str
    hash_parts: HashParts
    reused_from: str | None = None
    error: str | None = None


class Failure(_Model):
    """Why a run stopped."""

    step: str | None
    message: str


class Record(_Model):
    """The whole of run.json."""

    format: int = FORMAT
    lesson: str
    title: str
    run_id: str
    status: RunStatus
    started: str
    ended: str | None = None
    seconds: float | None = None
    lab_file: str
    host: dict[str, Any]
    engine: dict[str, str | None]
    options: dict[str, Any] = {}
    steps: list[StepRecord] = Field(default_factory=list)
    failure: Failure | None = None

    def step(self, step_id: str) -> StepRecord:
        """The step with this id; RecordError naming the run otherwise."""
        for s in self.steps:
            if s.id == step_id:
                return s
        known = ", ".join(s.id for s in self.steps)
        raise RecordError(f"run {self.run_id} of '{self.lesson}' has no step '{step_id}' (steps: {known})")


class Run:
    """A finished run on disk: its record and its folder."""

    def __init__(self, record: Record, folder: Path) -> None:
        self.record = record
        self.folder = folder

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.record.run_id

    @property
    def good(self) -> bool:
        """Whether every step succeeded (ran or was reused)."""
        return self.record.status == "ok"

    def value(self, step_id: str, name: str) -> Value:
        """A captured value; RecordError naming the run, the step and the known values otherwise."""
        step = self.record.step(step_id)
        if name not in step.values:
            known = ", ".join(sorted(step.values)) or "none"
            raise RecordError(
                f"run {self.run_id}: step '{step_id}' captured no value '{name}' (its values: {known})"
            )
        return step.values[name]

    def transcript(self, step_id: str) -> str:
        """A step's transcript as recorded."""
        step = self.record.step(step_id)
        if step.transcript is None:
            raise RecordError(f"run {self.run_id}: step '{step_id}' has no transcript ({step.status})")
        return (self.folder / step.transcript).read_text(encoding="utf-8")

    def kept_file(self, step_id: str, path: str) -> Path:
        """Where a file a step kept lies in the record."""
        return self.folder / "files" / step_id / path

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, {self.record.status})"


def now_iso() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dump_json(data: Any) -> str:
    """Deterministic JSON: sorted keys, two-space indent, a final newline."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write a file through a temporary name and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_record(folder: Path) -> Record:
    """A run folder's run.json; RecordError naming the file when it is missing or malformed."""
    path = folder / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: missing (a run folder must hold run.json)") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not valid JSON: {exc}") from None
    try:
        return Record.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise RecordError(f"{path}: not a run record: {problems}") from None


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
            raise RecordError(f"lesson '{lesson}' has no run '{run_id}' in {self.lesson_dir(lesson)} (runs: {known})")
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
            run_id = tmp.name[len(TMP_PREFIX):]
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
        self, step_id: str, source: Path, rel: str, redact: Callable[[str], str] | None = None
    ) -> KeptFile:
        """Copy a file a step produced into the run; text files pass through `redact`."""
        target = self.folder / "files" / step_id / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        if redact is not None:
            try:
                data = redact(data.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass  # binary files (figures) are kept as they are
        target.write_bytes(data)
        return KeptFile(path=rel, bytes=target.stat().st_size, sha256=sha256_file(target))

    def copy_step(self, old: Run, step_id: str) -> None:
        """Bring a reused step's transcript and files over from the run that made them."""
        step = old.record.step(step_id)
        if step.transcript:
            shutil.copyfile(old.folder / step.transcript, self.folder / f"steps/{step_id}.txt")
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


_RUN_ID = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z-[a-z0-9-]+$")


def is_run_id(text: str) -> bool:
    """Whether a string has the shape of a run id."""
    return bool(_RUN_ID.match(text))
