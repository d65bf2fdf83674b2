"""Recorded values as quantities: unit-aware arithmetic and a small safe expression language
(formatting them is the pages' job: `pages/format.py`).

A page names a value as `step.name`; an expression combines such names with numbers, `+ - * /`,
comparisons, `and`/`or`/`not` and a few functions (below). Nothing else of Python is allowed.

    size.bytes_per_token * 4096            a product: B × a plain number stays in B
    decode.tps_short / decode.tps_long     a ratio: B / B (or tok/s / tok/s) has no unit
    within(a.x, b.y, 5)                    |a - b| at most 5 % of |b|
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CourseError
from .units import PER_SECOND, convert, dimension

# `step-id.value_name`; a step id may hold '-', so references are swapped out before parsing
REFERENCE = re.compile(r"(?<![\w.])([a-z0-9][a-z0-9-]*)\.([a-z_][a-z0-9_]*)\b")
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

    def to(self, unit: str) -> Quantity:
        """The same quantity in another unit of its dimension."""
        try:
            return Quantity(
                convert(self.value, self.unit, unit),
                unit,
                self.sources,
                self.integral and unit == self.unit,
            )
        except ValueError as exc:
            raise ExprError(str(exc)) from None


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
        b = Quantity(b.value, a.unit, b.sources, b.integral)
    elif a.unit == "none" and b.unit != "none":
        a = Quantity(a.value, b.unit, a.sources, a.integral)
    if _dimension(a.unit) != _dimension(b.unit):
        raise ExprError(f"cannot add or subtract {a.unit} and {b.unit}")
    value = a.value + sign * convert(b.value, b.unit, a.unit)
    return Quantity(value, a.unit, _merge(a, b), a.integral and b.integral and a.unit == b.unit)


def multiply(a: Quantity, b: Quantity) -> Quantity:
    """a × b: a count (no unit, tokens or requests) keeps the other's unit."""
    integral = a.integral and b.integral
    if b.unit in COUNTS:
        return Quantity(
            a.value * b.value, a.unit if a.unit != "none" else b.unit, _merge(a, b), integral
        )
    if a.unit in COUNTS:
        return Quantity(a.value * b.value, b.unit, _merge(a, b), integral)
    raise ExprError(
        f"cannot multiply {a.unit} by {b.unit} (one side must be a plain number, tokens or "
        "requests)"
    )


def divide(a: Quantity, b: Quantity) -> Quantity:
    """a ÷ b: same dimension gives a plain ratio; per token or per plain number keeps a's unit."""
    if b.value == 0:
        raise ExprError(f"division by zero ({', '.join(b.sources) or 'a literal 0'})")
    sources = _merge(a, b)
    if a.unit == "none" and b.unit == "none":
        return Quantity(a.value / b.value, "none", sources)
    if b.unit in COUNTS and a.unit not in COUNTS:
        return Quantity(a.value / b.value, a.unit, sources)
    rate = PER_SECOND.get(_dimension(a.unit))
    if rate is not None and _dimension(b.unit) == "time":  # tokens / s, bytes / s, requests / s
        amount, per_second, shown = rate
        value = convert(a.value, a.unit, amount) / convert(b.value, b.unit, "s")
        return Quantity(convert(value, per_second, shown), shown, sources)
    if _dimension(a.unit) == _dimension(b.unit):
        return Quantity(a.value / convert(b.value, b.unit, a.unit), "none", sources)
    raise ExprError(f"cannot divide {a.unit} by {b.unit}")


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
    x, y = align(a, b)
    close = math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return {
        "==": close,
        "!=": not close,
        "<": x < y and not close,
        "<=": x <= y or close,
        ">": x > y and not close,
        ">=": x >= y or close,
    }[op]


def _within(a: Quantity, b: Quantity, pct: Quantity) -> bool:
    x, y = align(a, b)
    return abs(x - y) <= pct.value / 100 * abs(y)


def _round_eq(
    a: Quantity, b: Quantity, decimals: Quantity | None = None, unit: Quantity | None = None
) -> bool:
    digits = int(decimals.value) if decimals is not None else 0
    if unit is not None:
        if unit.text is None:
            raise ExprError("round_eq(a, b, decimals, 'UNIT') needs the unit as a quoted string")
        a = a.to(unit.text) if a.unit != "none" else a
        b = b.to(unit.text) if b.unit != "none" else b
    x, y = align(a, b)
    return round(x, digits) == round(y, digits)


def _between(x: Quantity, lo: Quantity, hi: Quantity) -> bool:
    return compare(lo, x, "<=") and compare(x, hi, "<=")


def _to(q: Quantity, unit: Quantity) -> Quantity:
    if unit.text is None:
        raise ExprError("to(value, 'UNIT') needs the unit as a quoted string")
    return q.to(unit.text)


def _abs(q: Quantity) -> Quantity:
    return Quantity(abs(q.value), q.unit, q.sources, q.integral)


def _extreme(pick: Callable[..., Quantity]) -> Callable[..., Quantity]:
    def choose(*qs: Quantity) -> Quantity:
        first = qs[0]
        return pick(qs, key=lambda q: q.to(first.unit).value if q.unit != "none" else q.value)

    return choose


FUNCTIONS: dict[str, Callable[..., Quantity | bool]] = {
    "within": _within,
    "round_eq": _round_eq,
    "between": _between,
    "ratio": divide,
    "to": _to,
    "abs": _abs,
    "min": _extreme(min),
    "max": _extreme(max),
}
"""The functions an expression may call, by name."""

_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass
class Expression:
    """A parsed expression and the `step.name` references it makes."""

    text: str
    tree: ast.Expression
    references: dict[str, str] = field(default_factory=dict)
    """placeholder name -> `step.name`."""

    @classmethod
    def parse(cls, text: str) -> Expression:
        """Read an expression; ExprError when it is not one this language accepts."""
        references: dict[str, str] = {}

        def swap(match: re.Match[str]) -> str:
            name = f"_ref{len(references)}"
            references[name] = match.group(0)
            return name

        source = REFERENCE.sub(swap, text.strip())
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise ExprError(f"cannot read the expression {text!r}: {exc.msg}") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ExprError(
                    f"{text!r}: {type(node).__name__.lower()} is not allowed in an expression"
                )
        return cls(text, tree, references)

    def evaluate(self, lookup: Callable[[str], Quantity]) -> Quantity | bool:
        """The expression's value, each `step.name` read through lookup."""
        return _Evaluator(self, lookup).visit(self.tree.body)


_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.BoolOp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.keyword,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.USub,
    ast.UAdd,
    ast.Not,
    ast.And,
    ast.Or,
    *_CMP,
)


class _Evaluator:
    def __init__(self, expr: Expression, lookup: Callable[[str], Quantity]) -> None:
        self.expr = expr
        self.lookup = lookup

    def visit(self, node: ast.AST) -> Quantity | bool:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return node.value
            if isinstance(node.value, (int, float)):
                return Quantity(float(node.value), "none", (), isinstance(node.value, int))
            if isinstance(node.value, str):
                return Quantity(math.nan, "none", (), False, node.value)
            raise ExprError(f"{self.expr.text!r}: unsupported constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in self.expr.references:
                return self.lookup(self.expr.references[node.id])
            raise ExprError(
                f"{self.expr.text!r}: '{node.id}' is not a value (name values as step.name)"
            )
        if isinstance(node, ast.BinOp):
            a, b = self.quantity(node.left), self.quantity(node.right)
            if isinstance(node.op, ast.Add):
                return add(a, b, 1)
            if isinstance(node.op, ast.Sub):
                return add(a, b, -1)
            if isinstance(node.op, ast.Mult):
                return multiply(a, b)
            return divide(a, b)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return not self.truth(node.operand)
            q = self.quantity(node.operand)
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return Quantity(sign * q.value, q.unit, q.sources, q.integral)
        if isinstance(node, ast.BoolOp):
            results = (self.truth(v) for v in node.values)
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.Compare):
            left = self.quantity(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=False):
                right = self.quantity(right_node)
                if not compare(left, right, _CMP[type(op)]):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call):
            return self.call(node)
        raise ExprError(f"{self.expr.text!r}: cannot evaluate {type(node).__name__}")

    def call(self, node: ast.Call) -> Quantity | bool:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else "?"
            raise ExprError(
                f"{self.expr.text!r}: unknown function '{name}' (known: {', '.join(FUNCTIONS)})"
            )
        args = [self.quantity(a) for a in node.args]
        kwargs = {k.arg: self.quantity(k.value) for k in node.keywords if k.arg}
        try:
            return FUNCTIONS[node.func.id](*args, **kwargs)
        except TypeError as exc:
            raise ExprError(f"{self.expr.text!r}: {node.func.id}(): {exc}") from None

    def quantity(self, node: ast.AST) -> Quantity:
        result = self.visit(node)
        if isinstance(result, bool):
            raise ExprError(f"{self.expr.text!r}: a condition is used where a number is expected")
        return result

    def truth(self, node: ast.AST) -> bool:
        result = self.visit(node)
        if not isinstance(result, bool):
            raise ExprError(f"{self.expr.text!r}: a number is used where a condition is expected")
        return result
