"""Recorded values as quantities: unit-aware arithmetic and comparison (the expression language
over them is `expression.py`; formatting them is the pages' job: `pages/format.py`).

    size.bytes_per_token * 4096            a product: B × a plain number stays in B
    decode.tps_short / decode.tps_long     a ratio: B / B (or tok/s / tok/s) has no unit

A quantity may carry an interval (`lo`, `hi`): a timed value's spread, which arithmetic carries
and comparisons judge over (`interval.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import CourseError
from .interval import Bounds, Margin, Truth, corners, judge, margin, quotient_bounds
from .models import Spread
from .units import PER_SECOND, convert, dimension

COUNTS = {"none", "tok", "req"}


class ExprError(CourseError):
    """An expression that cannot be read or evaluated; the message says what and where."""


@dataclass(frozen=True)
class Quantity:
    """A number with a unit and the recorded values it came from."""

    value: float
    unit: str = "none"
    sources: tuple[str, ...] = ()
    integral: bool = False
    text: str | None = None
    """For a recorded string value: the string (value is then NaN)."""
    lo: float | None = None
    """The interval the value may lie in, in its unit (`hi` its top); None: the value exactly."""
    hi: float | None = None
    spread: Spread | None = None
    """A recorded timed value's spread as recorded: a claim draws its interval from it."""

    @property
    def bounds(self) -> Bounds:
        """The interval, (value, value) for an exact quantity."""
        if self.lo is None or self.hi is None:
            return self.value, self.value
        return self.lo, self.hi

    @property
    def exact(self) -> bool:
        """Whether it carries no interval."""
        return self.lo is None

    def to(self, unit: str) -> Quantity:
        """The same quantity in another unit of its dimension."""
        try:
            moved = Quantity(
                convert(self.value, self.unit, unit),
                unit,
                self.sources,
                self.integral and unit == self.unit,
            )
            if self.exact:
                return moved
            return replace(moved, lo=convert(self.bounds[0], self.unit, unit),
                           hi=convert(self.bounds[1], self.unit, unit))  # fmt: skip
        except ValueError as exc:
            raise ExprError(str(exc)) from None


def _spanned(
    result: Quantity, a: Quantity, b: Quantity, f: Callable[[float, float], float], quotient: bool
) -> Quantity:
    """`result` (f of a's and b's values) with the interval f gives over theirs, if they have
    one."""
    if a.exact and b.exact:
        return result
    lo, hi = (quotient_bounds if quotient else corners)(f, a.bounds, b.bounds)
    return replace(result, lo=lo, hi=hi)


def _dimension(unit: str) -> str:
    try:
        return dimension(unit)
    except ValueError as exc:
        raise ExprError(str(exc)) from None


def _merge(a: Quantity, b: Quantity) -> tuple[str, ...]:
    return a.sources + tuple(s for s in b.sources if s not in a.sources)


def add(a: Quantity, b: Quantity, sign: int) -> Quantity:
    """a + b or a - b; b is converted to a's unit (a plain number takes the other's unit)."""
    if b.unit == "none" and a.unit != "none":
        b = replace(b, unit=a.unit)
    elif a.unit == "none" and b.unit != "none":
        a = replace(a, unit=b.unit)
    if _dimension(a.unit) != _dimension(b.unit):
        raise ExprError(f"cannot add or subtract {a.unit} and {b.unit}")

    def f(x: float, y: float) -> float:
        return x + sign * convert(y, b.unit, a.unit)

    integral = a.integral and b.integral and a.unit == b.unit
    return _spanned(Quantity(f(a.value, b.value), a.unit, _merge(a, b), integral), a, b, f, False)


def multiply(a: Quantity, b: Quantity) -> Quantity:
    """a × b: a count (no unit, tokens or requests) keeps the other's unit."""
    integral = a.integral and b.integral
    if b.unit in COUNTS:
        unit = a.unit if a.unit != "none" else b.unit
    elif a.unit in COUNTS:
        unit = b.unit
    else:
        raise ExprError(
            f"cannot multiply {a.unit} by {b.unit} (one side must be a plain number, tokens or "
            "requests)"
        )
    product = Quantity(a.value * b.value, unit, _merge(a, b), integral)
    return _spanned(product, a, b, lambda x, y: x * y, False)


def divide(a: Quantity, b: Quantity) -> Quantity:
    """a ÷ b: same dimension gives a plain ratio; per token or per plain number keeps a's unit."""
    if b.value == 0:
        raise ExprError(f"division by zero ({', '.join(b.sources) or 'a literal 0'})")
    unit, f = _quotient(a.unit, b.unit)
    return _spanned(Quantity(f(a.value, b.value), unit, _merge(a, b)), a, b, f, True)


def _quotient(a: str, b: str) -> tuple[str, Callable[[float, float], float]]:
    """The unit of a ÷ b for these units, and how to compute it from the two numbers."""
    if a == "none" and b == "none":
        return "none", lambda x, y: x / y
    if b in COUNTS and a not in COUNTS:
        return a, lambda x, y: x / y
    rate = PER_SECOND.get(_dimension(a))
    if rate is not None and _dimension(b) == "time":  # tokens / s, bytes / s, requests / s
        amount, per_second, shown = rate

        def rated(x: float, y: float) -> float:
            return convert(convert(x, a, amount) / convert(y, b, "s"), per_second, shown)

        return shown, rated
    if _dimension(a) == _dimension(b):
        return "none", lambda x, y: x / convert(y, b, a)
    raise ExprError(f"cannot divide {a} by {b}")


def align(a: Quantity, b: Quantity) -> tuple[float, float]:
    """Both values in one unit (b's); a plain number takes the other side's unit."""
    if a.text is not None or b.text is not None:
        raise ExprError("a string value cannot be used as a number")
    if a.unit == "none" or b.unit == "none":
        return a.value, b.value
    if _dimension(a.unit) != _dimension(b.unit):
        raise ExprError(f"cannot compare {a.unit} with {b.unit}")
    return convert(a.value, a.unit, b.unit), b.value


def compare(a: Quantity, b: Quantity, op: str) -> bool:
    """a <op> b after bringing both to one unit; == and != allow a relative error of 1e-9."""
    if a.text is not None or b.text is not None:
        if op not in ("==", "!="):
            raise ExprError("strings can only be compared with == or !=")
        same = a.text == b.text
        return same if op == "==" else not same
    return _holds(*align(a, b), op)


def judged(a: Quantity, b: Quantity, op: str) -> Truth:
    """a <op> b over their intervals (`interval.judge`), after bringing both to one unit."""
    if a.exact and b.exact:
        return Truth.of(compare(a, b, op))
    return judge(aligned_bounds(a, b)[0], aligned_bounds(a, b)[1], op, _holds)


def aligned_bounds(a: Quantity, b: Quantity) -> tuple[Bounds, Bounds]:
    """Both intervals in one unit (b's), as `align` brings the values."""
    align(a, b)  # the same refusals as for the values
    if a.unit == "none" or b.unit == "none":
        return a.bounds, b.bounds
    lo, hi = (convert(x, a.unit, b.unit) for x in a.bounds)
    return (lo, hi), b.bounds


def margin_of(text: str, a: Quantity, b: Quantity, op: str) -> Margin | None:
    """How far `a op b` is from flipping on the medians, and what its intervals take up."""
    (a_bounds, b_bounds), (x, y) = aligned_bounds(a, b), align(a, b)
    return margin(text, op, a_bounds, x, b_bounds, y)


def _holds(x: float, y: float, op: str) -> bool:
    """x <op> y for two numbers; == and != allow a relative error of 1e-9."""
    close = math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return {
        "==": close,
        "!=": not close,
        "<": x < y and not close,
        "<=": x <= y or close,
        ">": x > y and not close,
        ">=": x >= y or close,
    }[op]
