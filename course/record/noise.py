"""One value in two runs: unchanged, changed (a size or a count), moved beyond its spread, or
moved within noise. `course diff` and `bench/stability.py` classify by it.

The rules (RECORD.md, "Two runs of a value"):
- a size or a count (a text, an integer, a unit of bytes, or a value lab.yml declares
  `scales: exact`) that differs has changed, whatever its spread: it is always listed;
- a timed value (any other number) recorded with its spread in both runs has moved when the two
  runs' quartiles do not overlap (the same rule as a claim `old < new` over timed values), and
  is within noise otherwise;
- a timed value without a spread in one run or both (records made before spreads were kept) has
  moved when it differs by more than a tolerance (`DEFAULT_TOLERANCE`, or `course diff
  --tolerance`), and is within noise otherwise, marked "no spread recorded".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .models import Value
from .units import SCALE, convert

DEFAULT_TOLERANCE = 0.05
"""How far a timed value without a recorded spread may move and still count as noise."""
BYTES = {unit for unit, (dimension, _) in SCALE.items() if dimension == "bytes"}
Kind = Literal["added", "removed", "unchanged", "changed", "moved", "noise"]


@dataclass(frozen=True)
class Verdict:
    """How a value differs between two runs, and why it is classed so."""

    kind: Kind
    quartiles: tuple[tuple[float, float], tuple[float, float]] | None = None
    """For a timed value with a spread in both runs: the old and new quartiles, in the old
    value's unit."""
    no_spread: bool = False
    """Whether the tolerance decided, for want of a spread in one run or both."""


def is_exact(value: Value, declared_exact: bool = False) -> bool:
    """Whether a value is a size or a count: any change of it is a change, not noise."""
    return declared_exact or value.type != "float" or value.unit in BYTES


def classify(
    old: Value | None,
    new: Value | None,
    declared_exact: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Verdict:
    """The verdict on one value recorded by two runs (the module's docstring gives the rules)."""
    if old is None or new is None:
        return Verdict("added" if old is None else "removed")
    if old.value == new.value and old.unit == new.unit:
        return Verdict("unchanged")
    if is_exact(old, declared_exact) or is_exact(new, declared_exact):
        return Verdict("changed")
    if SCALE.get(old.unit, ("?",))[0] != SCALE.get(new.unit, ("!",))[0]:
        return Verdict("changed")
    a, b = float(old.value), convert(float(new.value), new.unit, old.unit)
    if old.spread is not None and new.spread is not None:
        before = (old.spread.q1, old.spread.q3)
        lo, hi = (convert(x, new.unit, old.unit) for x in (new.spread.q1, new.spread.q3))
        apart = before[1] < lo or hi < before[0]
        return Verdict("moved" if apart else "noise", (before, (lo, hi)))
    relative = abs(b - a) / abs(a) if a else float("inf")
    return Verdict("moved" if relative > tolerance else "noise", no_spread=True)


def relative_spread(value: Value) -> float | None:
    """How wide a timed value's quartiles are, relative to its median (None without a spread)."""
    if value.spread is None or isinstance(value.value, str) or value.value == 0:
        return None
    return (value.spread.q3 - value.spread.q1) / abs(float(value.value))
