"""Reading and writing record files: deterministic JSON, atomic writes, digests, run.json."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import RecordError
from .models import Record

TMP_PREFIX = ".tmp-"
TMP_SUFFIX = ".tmp"
"""What `write_atomic`'s temporary files end with."""
RUN_FILE = "run.json"


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
    """Deterministic JSON: sorted keys, two-space indent, a final newline. Strict JSON only:
    RecordError naming the key of a NaN or an infinity (which JSON cannot hold)."""
    try:
        return (
            json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        )
    except ValueError:
        where = _non_finite(data, "") or "a value"
        raise RecordError(f"{where} is not a finite number; JSON cannot hold it") from None


def _non_finite(data: Any, path: str) -> str | None:
    """The key path of the first NaN or infinity in `data`."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{path or 'the value'} = {data}"
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else []
    )
    for key, item in items:
        found = _non_finite(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def _strict(constant: str) -> Any:
    raise ValueError(f"{constant} is not valid JSON (a number must be finite)")


def write_atomic(path: Path, text: str) -> None:
    """Write a file through a temporary name and a rename (the temporary file removed when the
    write fails)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def describe(exc: OSError, path: Path | None = None) -> str:
    """An OSError as a clause naming its path (or `path`, for an error that names none), and for
    a full disk where and how much room is left: 'build/x/.tmp-y/run.json: No space left on
    device (the file system mounted at / is full: 0 bytes free)'."""
    named = os.fsdecode(exc.filename) if exc.filename else (str(path) if path else None)
    where = f"{named}: " if named else ""
    said = f"{where}{exc.strerror or exc}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) and named:
        mount = Path(named)
        while not (mount.is_dir() and os.path.ismount(mount)) and mount != mount.parent:
            mount = mount.parent
        try:
            free = shutil.disk_usage(mount).free
        except OSError:
            return said
        said += f" (the file system mounted at {mount} is full: {free:,} bytes free)"
    return said


def read_record(folder: Path) -> Record:
    """A run folder's run.json; RecordError naming the file when it is missing or malformed."""
    path = folder / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_strict)
    except FileNotFoundError:
        raise RecordError(f"{path}: missing (a run folder must hold run.json)") from None
    except ValueError as exc:  # JSONDecodeError included
        raise RecordError(f"{path}: not valid JSON: {exc}") from None
    try:
        return Record.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise RecordError(f"{path}: not a run record: {problems}") from None
