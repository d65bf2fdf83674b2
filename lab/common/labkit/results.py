"""Results files: every number a step measured, in base units, in results/<name>.json.

Written deterministically (sorted keys, two-space indent, a final newline, through a temporary
file renamed into place), so the same numbers give the same bytes. A value JSON cannot hold
honestly stops the script, naming the key: NaN or infinity (a division by zero, a timing of 0 s),
an object that is not a number, string, list or mapping (a tensor: call .item()). So does a key
holding a '.', which a lab.yml capture (`key: a.b.c`) could never reach. Objects with an
`as_dict()` method (timing.Spread, facts.Budget) are written as that mapping. Standard library only.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checks import fail

FOLDER = Path("results")


def key_of(name: str) -> str:
    """A name as a results key: lowercase, the last part of a path or Hub id, no dots
    ('Qwen/Qwen3-0.6B' -> 'qwen3-0_6b'); letters, digits, '-' and '_' only."""
    last = name.rstrip("/").rsplit("/", 1)[-1] or name
    return re.sub(r"[^a-z0-9_-]", "_", last.lower())


def plain(data: Any, where: str = "", file: str = "results") -> Any:
    """`data` as JSON values only; stops the script at the first value JSON cannot hold."""
    at = where or "the top level"
    if hasattr(data, "as_dict") and callable(data.as_dict):
        return plain(data.as_dict(), where, file)
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                fail(f"{file}: key {key!r} at {at} is a {type(key).__name__}; keys are strings")
            text = str(key)
            if "." in text:
                fail(
                    f"{file}: key {text!r} at {at} holds a '.', which a capture's key path cannot"
                    f" reach: write {key_of(text)!r} (results.key_of)"
                )
            out[text] = plain(value, f"{where}.{text}" if where else text, file)
        return out
    if isinstance(data, (list, tuple)):
        return [plain(v, f"{where}.{i}" if where else str(i), file) for i, v in enumerate(data)]
    if data is None or isinstance(data, (bool, str, int)):
        return data
    if isinstance(data, float):
        if not math.isfinite(data):
            fail(
                f"{file}: the value at {at} is {data}; JSON has no NaN or infinity: check what"
                " produced it (a division by zero, a timing of 0 s, an empty list)"
            )
        return data
    hint = "; call .item() for a single number, .tolist() for many" if hasattr(data, "item") else ""
    fail(f"{file}: the value at {at} is a {type(data).__name__}, not a JSON value{hint}")


def dumps(data: Any, file: str = "results") -> str:
    """The file's text: sorted keys, two-space indent, a final newline."""
    return json.dumps(plain(data, file=file), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_results(name: str, data: Any, folder: str | Path = FOLDER) -> Path:
    """Write <folder>/<name>.json (default results/) through a temporary file; its path."""
    path = Path(folder) / f"{name}.json"
    text = dumps(data, file=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_results(name: str, folder: str | Path = FOLDER) -> dict[str, Any] | None:
    """<folder>/<name>.json as an earlier step wrote it, or None when that step has not run."""
    path = Path(folder) / f"{name}.json"
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def need_results(name: str, step: str, folder: str | Path = FOLDER) -> dict[str, Any]:
    """<folder>/<name>.json, or stop: 'results/limits.json is missing: run limits.py first'."""
    found = read_results(name, folder)
    if found is None:
        fail(f"{Path(folder) / f'{name}.json'} is missing: run {step} first")
    return found
