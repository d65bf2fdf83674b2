"""One value in two runs: unchanged, changed (a size or a count), moved beyond its spread, or
moved within noise. `course diff` and `bench/stability.py` classify by it.

The rules (RECORD.md, "Two runs of a value"):
- a size or a count (a text, an integer, a unit of bytes, or a value lab.yml declares
  `scales: exact`) that differs has changed, whatever its spread: it is always listed;
- a timed value (any other number) recorded with its spread in both runs has moved when the two
  runs' quartiles do not overlap (the same rule as a claim `old < new` over timed values), and
  is within noise otherwise;
- a timed value without a spread in one run or both (records made before spreads were kept) has
  moved when it is further apart than a tolerance (`DEFAULT_TOLERANCE`, or `course diff
  --tolerance`; apart as below, in either order), and is within noise otherwise, marked "no
  spread recorded";
- a timed value whose quartiles are apart but which moved by no more than the lab's declared
  noise between hosts is within noise, marked so: the quartiles of one run know nothing of the
  next host's clocks and CPU. How far it moved is measured whichever run came first (`apart`:
  the larger value over the smaller, less 1), so a host-bound wait of 25 ms on one host and
  50 ms on another is 100 % apart in either order. The first of lab.yml's `noise.values`
  patterns that matches the value (`concurrency.tok_s_*: 50`) sets that noise;
  `noise.between_hosts` sets it for the others (`Rules.host_noise`; the caller hands
  `classify` the one for the value);
- a value its lab declares `scales: free` that is not a timed value with a spread (an integer
  such as how many of 256 steps changed their top token, or which row came out best; a
  prediction made from the run's own measurements) varies from run to run: listed apart, never a
  change nor a move;
- a build step's date and duration (`BUILD_FACTS`: `made`, `build_seconds`) are facts of the
  host and the moment, not results: they vary from run to run as `scales: free` values do, for
  every build of the lab, without a declaration; its `version` and `commit` stay exact (another
  commit is a change);
- a number that differs only in its last digits (a relative 1e-12: the same sum added in another
  order) is unchanged, declared `scales: exact` or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal

from .models import Value
from .units import SCALE, convert

DEFAULT_TOLERANCE = 0.05
"""How far a timed value without a recorded spread may move and still count as noise."""
BYTES = {unit for unit, (dimension, _) in SCALE.items() if dimension == "bytes"}
Kind = Literal["added", "removed", "unchanged", "changed", "chance", "moved", "noise"]


BUILD_MADE, BUILD_SECONDS = "made", "build_seconds"
"""The names under which a build step (`run/builds.py`) records when it was made and how long
it took."""
BUILD_FACTS = {
    BUILD_MADE: "a build's date and time: the host's",
    BUILD_SECONDS: "a build's duration: the host's",
}
"""The values of a build step (`run/builds.py`) that are facts of the host and the moment, not
results, each with why it varies from run to run."""


@dataclass(frozen=True)
class Rules:
    """What a lab.yml declares about its values, for classing them (`pages.evaluate.rules_of`)."""

    exact: frozenset[str] = frozenset()
    """The values (`step.name`) declared `scales: exact`."""
    free: frozenset[str] = frozenset()
    """The values declared `scales: free`."""
    between_hosts: float = 0.0
    """lab.yml's `noise.between_hosts`, as a fraction."""
    values: tuple[tuple[str, float], ...] = ()
    """lab.yml's `noise.values`: (a pattern on `step.name`, a fraction), in lab.yml's order."""
    facts: Mapping[str, str] = field(default_factory=dict)
    """The values that are facts of the host and the moment (each build's `BUILD_FACTS`), each
    with why: they vary from run to run as the values declared `scales: free` do."""

    def host_noise(self, name: str) -> tuple[float, str | None]:
        """How far the value `name` may move between hosts (a fraction), and the `noise.values`
        pattern that says so: the first that matches it; None: `between_hosts` says so."""
        for pattern, share in self.values:
            if fnmatchcase(name, pattern):
                return share, pattern
        return self.between_hosts, None

    def varies(self, name: str) -> bool:
        """Whether the value `name` is declared `scales: free` or is a fact of the host."""
        return name in self.free or name in self.facts


@dataclass(frozen=True)
class Verdict:
    """How a value differs between two runs, and why it is classed so."""

    kind: Kind
    quartiles: tuple[tuple[float, float], tuple[float, float]] | None = None
    """For a timed value with a spread in both runs: the old and new quartiles, in the old
    value's unit."""
    no_spread: bool = False
    """Whether the tolerance decided, for want of a spread in one run or both."""
    between_hosts: bool = False
    """Whether the lab's declared noise between hosts decided: quartiles apart, a small move."""


def is_exact(value: Value, declared_exact: bool = False) -> bool:
    """Whether a value is a size or a count: any change of it is a change, not noise."""
    return declared_exact or value.type != "float" or value.unit in BYTES


def classify(
    old: Value | None,
    new: Value | None,
    declared_exact: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    declared_free: bool = False,
    between_hosts: float = 0.0,
) -> Verdict:
    """The verdict on one value recorded by two runs (the module's docstring gives the rules)."""
    if old is None or new is None:
        return Verdict("added" if old is None else "removed")
    if old.value == new.value and old.unit == new.unit:
        return Verdict("unchanged")
    if _same_float(old, new):
        return Verdict("unchanged")
    timed_both = old.spread is not None and new.spread is not None
    if declared_free and not declared_exact and not timed_both:
        return Verdict("chance")
    if is_exact(old, declared_exact) or is_exact(new, declared_exact):
        return Verdict("changed")
    if SCALE.get(old.unit, ("?",))[0] != SCALE.get(new.unit, ("!",))[0]:
        return Verdict("changed")
    a, b = float(old.value), convert(float(new.value), new.unit, old.unit)
    if old.spread is not None and new.spread is not None:
        before = (old.spread.q1, old.spread.q3)
        lo, hi = (convert(x, new.unit, old.unit) for x in (new.spread.q1, new.spread.q3))
        if not (before[1] < lo or hi < before[0]):
            return Verdict("noise", (before, (lo, hi)))
        if apart(a, b) <= between_hosts:
            return Verdict("noise", (before, (lo, hi)), between_hosts=True)
        return Verdict("moved", (before, (lo, hi)))
    return Verdict("moved" if apart(a, b) > tolerance else "noise", no_spread=True)


def apart(a: float, b: float) -> float:
    """How far apart two runs' values are, whichever ran first: the larger over the smaller,
    less 1 (a wait of 25 ms on one host and 50 ms on another are 100 % apart either way);
    infinite when one is 0 or their signs differ."""
    if a == b:
        return 0.0
    if a * b <= 0:
        return float("inf")
    small, large = sorted((abs(a), abs(b)))
    return large / small - 1


def _same_float(old: Value, new: Value) -> bool:
    """Two floats of one unit equal to 12 significant digits: rounding, not a change."""
    if old.type != "float" or new.type != "float" or old.unit != new.unit:
        return False
    a, b = float(old.value), float(new.value)
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def relative_spread(value: Value) -> float | None:
    """How wide a timed value's quartiles are, relative to its median (None without a spread)."""
    if value.spread is None or isinstance(value.value, str) or value.value == 0:
        return None
    return (value.spread.q3 - value.spread.q1) / abs(float(value.value))
