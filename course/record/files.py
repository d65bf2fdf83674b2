"""Reading and writing record files: deterministic JSON, atomic writes, digests, run.json."""

from __future__ import annotations

import hashlib
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import RecordError
from .models import Record

TMP_PREFIX = ".tmp-"
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
    """Write a file through a temporary name and a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
