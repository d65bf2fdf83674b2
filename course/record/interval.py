"""Intervals for values measured with repeats: three-valued truth, and how far a comparison is from
flipping.

A timed value is its median and an interval it may lie in (its quartiles, its whole range, or a
tolerance an author states: `pages/claims.py` chooses). Arithmetic carries the interval to every
result by interval arithmetic: the result's interval holds every result of numbers drawn from the
operands' intervals, so a comparison that holds over the intervals holds for every such draw
(sound; a value used twice makes the interval wider than it need be, never narrower).

A comparison over intervals is `YES` (it holds for every draw), `NO` (for none) or `UNSURE`
(inside the noise); `and`, `or`, `not` combine these as Kleene's logic does.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

Bounds = tuple[float, float]


class Truth(enum.IntEnum):
    """A condition over intervals: false for every draw, for some, or for every one true."""

    NO = 0
    UNSURE = 1
    YES = 2

    @classmethod
    def of(cls, holds: bool) -> Truth:
        """A plain truth."""
        return cls.YES if holds else cls.NO

    def negated(self) -> Truth:
        """`not`: YES and NO swap, UNSURE stays."""
        return Truth(2 - self.value)


def corners(f: Callable[[float, float], float], a: Bounds, b: Bounds) -> Bounds:
    """The interval of f(x, y) for x in a and y in b, for f monotone in each argument on the box
    (sums, differences, products; a quotient whose divisor keeps one sign)."""
    found = [f(x, y) for x in a for y in b]
    return min(found), max(found)


def quotient_bounds(f: Callable[[float, float], float], a: Bounds, b: Bounds) -> Bounds:
    """`corners` for a quotient; unbounded when the divisor's interval holds zero."""
    if b[0] <= 0 <= b[1]:
        return -math.inf, math.inf
    return corners(f, a, b)


ORDERINGS = ("<", "<=", ">", ">=")


def _ends(a: Bounds, b: Bounds, op: str) -> tuple[Bounds, Bounds]:
    """For an ordering: the pair of ends that makes it hardest to hold, and the easiest."""
    if op in ("<", "<="):
        return (a[1], b[0]), (a[0], b[1])
    return (a[0], b[1]), (a[1], b[0])


def judge(a: Bounds, b: Bounds, op: str, holds: Callable[[float, float, str], bool]) -> Truth:
    """`a op b` over the intervals, `holds(x, y, op)` deciding for two numbers."""
    if op in ORDERINGS:
        worst, best = _ends(a, b, op)
        if holds(*worst, op):
            return Truth.YES
        return Truth.UNSURE if holds(*best, op) else Truth.NO
    equal = Truth.NO
    if all(holds(x, y, "==") for x in a for y in b):
        equal = Truth.YES
    elif holds(a[0], b[1], "<=") and holds(b[0], a[1], "<="):  # they overlap
        equal = Truth.UNSURE
    return equal if op == "==" else equal.negated()


@dataclass(frozen=True)
class Margin:
    """How far one ordering of a condition is from flipping, on the medians, and how much of that
    the intervals of its two sides take up; both relative to the right side's median."""

    text: str
    """The comparison, as the condition writes it."""
    margin: float
    """(left - right) / |right| for `>` and `>=`, the other way round for `<` and `<=`: > 0
    when it holds on the medians."""
    needed: float
    """The margin it needs to hold over the intervals: the part of each side's interval that
    lies towards the other side."""

    @property
    def short(self) -> float:
        """How much of the needed margin is missing (> 0: it does not hold over the intervals)."""
        return self.needed - self.margin


def margin(text: str, op: str, a: Bounds, a_mid: float, b: Bounds, b_mid: float) -> Margin | None:
    """The margin of `a op b` (an ordering only; None for == and !=, or a zero right side)."""
    scale = abs(b_mid) or abs(a_mid)
    if op not in ORDERINGS or scale == 0 or not all(map(math.isfinite, (*a, *b))):
        return None
    if op in (">", ">="):
        return Margin(text, (a_mid - b_mid) / scale, ((a_mid - a[0]) + (b[1] - b_mid)) / scale)
    return Margin(text, (b_mid - a_mid) / scale, ((a[1] - a_mid) + (b_mid - b[0])) / scale)
