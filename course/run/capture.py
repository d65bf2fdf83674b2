"""Turn a step's output (its transcript, or a JSON file it wrote) into named, typed values.

The capture kinds are a registry: `regex` reads the transcript, `json` a file the step wrote.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import RunError
from ..lab.schema import Capture
from ..record.models import Spread, Value

# Separators people put between thousands: comma, underscore, thin and no-break spaces, apostrophe.
_THOUSANDS = re.compile(r"(?<=\d)[,_\u2009\u202f\u00a0'](?=\d{3}(?!\d))")


class CaptureMiss(RunError):
    """A capture that found nothing usable; the message says what was expected."""


def parse_number(text: str, kind: str) -> int | float | str:
    """Read a captured string as int, float or str, understanding thousands separators."""
    if kind == "str":
        return text.strip()
    cleaned = _THOUSANDS.sub("", text.strip())
    try:
        if kind == "int":
            as_float = float(cleaned)
            if not as_float.is_integer():
                raise CaptureMiss(f"expected an integer, found {text.strip()!r}")
            return int(as_float)
        return float(cleaned)
    except ValueError:
        raise CaptureMiss(f"expected a number ({kind}), found {text.strip()!r}") from None


class Timed(NamedTuple):
    """A timed value as a lab writes it (`{"median": m, "min": .., "q1": .., "q3": .., "max": ..,
    "n": k}`): the median, recorded as the value, and its spread."""

    median: float
    spread: Spread


SPREAD_KEYS = ("n", "min", "q1", "median", "q3", "max")


def timed(capture: Capture, data: dict[str, Any]) -> Timed:
    """The median and spread of a timed value's JSON object; CaptureMiss saying what is wrong
    (a missing statistic, a non-number, an order broken) otherwise."""
    where = f"{capture.json_file!r} key {capture.key!r}"
    missing = [k for k in SPREAD_KEYS if k not in data]
    if missing:
        raise CaptureMiss(
            f"{where} holds a timed value without {', '.join(missing)} (a timed value is "
            '{"median": m, "min": a, "q1": b, "q3": c, "max": d, "n": k})'
        )
    if capture.type != "float":
        raise CaptureMiss(f"{where} holds a timed value (a median): capture it as type float")
    if any(isinstance(data[k], bool) or not isinstance(data[k], (int, float)) for k in SPREAD_KEYS):
        shown = ", ".join(f"{k} {data[k]!r}" for k in SPREAD_KEYS)
        raise CaptureMiss(
            f"{where} holds a timed value whose statistics are not all numbers: {shown}"
        )
    n, order = data["n"], [float(data[k]) for k in SPREAD_KEYS[1:]]
    wrong = [f"n is {n} (expected a whole number, at least 1)"] if n < 1 or n % 1 else []
    wrong += [f"{k} is {data[k]}" for k in SPREAD_KEYS[1:] if not math.isfinite(data[k])]
    if not wrong and sorted(order) != order:
        shown = ", ".join(f"{k} {data[k]}" for k in SPREAD_KEYS[1:])
        wrong.append(f"expected min <= q1 <= median <= q3 <= max, found {shown}")
    if wrong:
        raise CaptureMiss(f"{where} holds a timed value that cannot be: {'; '.join(wrong)}")
    spread = Spread(**{k: data[k] for k in SPREAD_KEYS if k != "median"})
    return Timed(float(data["median"]), spread)


Found = int | float | str | Timed
CaptureKind = Callable[[Capture, str, Path], Found]
CAPTURE_KINDS: dict[str, CaptureKind] = {}
"""Capture kind -> the function that reads it from (output, lab folder)."""


def capture_kind(name: str) -> Callable[[CaptureKind], CaptureKind]:
    """Register the function that reads one kind of capture."""

    def register(func: CaptureKind) -> CaptureKind:
        CAPTURE_KINDS[name] = func
        return func

    return register


def kind_of(capture: Capture) -> str:
    """'regex' or 'json': which source a capture reads."""
    return "regex" if capture.regex is not None else "json"


@capture_kind("regex")
def from_output(capture: Capture, output: str, folder: Path) -> Found:
    """The first group of the capture's regex in the step's output."""
    assert capture.regex is not None
    match = re.search(capture.regex, output, re.MULTILINE)
    if match is None:
        raise CaptureMiss(f"the pattern {capture.regex!r} matched nothing in the output")
    if match.group(1) is None:
        raise CaptureMiss(f"the pattern {capture.regex!r} matched, but its first group is empty")
    return parse_number(match.group(1), capture.type)


@capture_kind("json")
def from_json(capture: Capture, output: str, folder: Path) -> Found:
    """The value at the capture's key path in the JSON file it names."""
    assert capture.json_file is not None and capture.key is not None
    path = (folder / capture.json_file).resolve()  # links followed: where the file really is
    if not path.is_relative_to(folder.resolve()):
        raise CaptureMiss(
            f"json: {capture.json_file!r} is outside the lab folder (it leads to {path}); a "
            "capture reads only files inside it"
        )
    if not path.is_file():
        raise CaptureMiss(f"the JSON file {capture.json_file!r} was not written")
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CaptureMiss(f"{capture.json_file!r} is not valid JSON: {exc}") from None
    walked = []
    for part in capture.key.split("."):
        walked.append(part)
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            raise CaptureMiss(
                f"{capture.json_file!r} has no key {'.'.join(walked)!r} (looking for "
                f"{capture.key!r})"
            )
    if isinstance(data, dict) and "median" in data:
        return timed(capture, data)
    if isinstance(data, (dict, list)) or data is None:
        raise CaptureMiss(
            f"{capture.json_file!r} key {capture.key!r} holds {type(data).__name__}, not a value"
        )
    if isinstance(data, bool):
        raise CaptureMiss(
            f"{capture.json_file!r} key {capture.key!r} holds a boolean, not a {capture.type}"
        )
    if isinstance(data, (int, float)) and capture.type != "str":
        if capture.type == "int" and not float(data).is_integer():
            raise CaptureMiss(
                f"{capture.json_file!r} key {capture.key!r} holds {data}, not an integer"
            )
        return int(data) if capture.type == "int" else float(data)
    return parse_number(str(data), capture.type)


def capture_values(
    captures: dict[str, Capture], output: str, folder: Path
) -> tuple[dict[str, Value], list[str]]:
    """Every capture of a step: the values found, and a message for each that found nothing."""
    values: dict[str, Value] = {}
    misses = []
    for name, capture in captures.items():
        try:
            found = CAPTURE_KINDS[kind_of(capture)](capture, output, folder)
        except CaptureMiss as miss:
            misses.append(f"capture '{name}': {miss}")
            continue
        if isinstance(found, Timed):
            values[name] = Value(
                value=found.median, type="float", unit=capture.unit, spread=found.spread
            )
            continue
        if isinstance(found, float) and not math.isfinite(found):
            misses.append(f"capture '{name}': the value is {found}, not a finite number")
            continue
        values[name] = Value(value=found, type=capture.type, unit=capture.unit)
    return values, misses
