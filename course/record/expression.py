"""The expression language over recorded values: a page names a value as `step.name`; an
expression combines such names with numbers, `+ - * /`, comparisons, `and`/`or`/`not` and a few
functions (below). Nothing else of Python is allowed.

    size.bytes_per_token * 4096            a product: B × a plain number stays in B
    within(a.x, b.y, 5)                    |a - b| at most 5 % of |b|

`evaluate` reads exact quantities (medians): a condition is true or false. `judge` reads
quantities with intervals (`interval.py`): a condition is YES, NO or UNSURE, with the margin of
each ordering it compared.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .interval import Margin, Truth
from .quantity import (
    ExprError,
    Quantity,
    add,
    align,
    aligned_bounds,
    divide,
    judged,
    margin_of,
    multiply,
)

# `step-id.value_name`; a step id may hold '-', so references are swapped out before parsing
REFERENCE = re.compile(r"(?<![\w.])([a-z0-9][a-z0-9-]*)\.([a-z_][a-z0-9_]*)\b")

Judge = Callable[[Quantity, Quantity, str], Truth]
"""How a test function compares two quantities (the evaluator's: it notes each margin)."""


def _band(b: Quantity, share: float) -> Quantity:
    """b moved by `share` of its own size (b + share·|b|), interval and all."""
    lo, hi = (x + share * abs(x) for x in b.bounds)
    moved = replace(b, value=b.value + share * abs(b.value), integral=False, text=None)
    return moved if b.exact else replace(moved, lo=lo, hi=hi)


def _within(judge: Judge, a: Quantity, b: Quantity, pct: Quantity) -> Truth:
    align(a, b)  # the same refusals as a comparison (a string, two dimensions)
    share = pct.value / 100
    return min(judge(a, _band(b, -share), ">="), judge(a, _band(b, share), "<="))


def _round_eq(
    judge: Judge,
    a: Quantity,
    b: Quantity,
    decimals: Quantity | None = None,
    unit: Quantity | None = None,
) -> Truth:
    digits = int(decimals.value) if decimals is not None else 0
    if unit is not None:
        if unit.text is None:
            raise ExprError("round_eq(a, b, decimals, 'UNIT') needs the unit as a quoted string")
        a = a.to(unit.text) if a.unit != "none" else a
        b = b.to(unit.text) if b.unit != "none" else b
    (a_lo, a_hi), (b_lo, b_hi) = (
        tuple(round(x, digits) for x in bounds) for bounds in aligned_bounds(a, b)
    )
    if a_lo == a_hi == b_lo == b_hi:
        return Truth.YES
    return Truth.UNSURE if a_lo <= b_hi and b_lo <= a_hi else Truth.NO


def _between(judge: Judge, x: Quantity, lo: Quantity, hi: Quantity) -> Truth:
    return min(judge(lo, x, "<="), judge(x, hi, "<="))


def _to(q: Quantity, unit: Quantity) -> Quantity:
    if unit.text is None:
        raise ExprError("to(value, 'UNIT') needs the unit as a quoted string")
    return q.to(unit.text)


def _abs(q: Quantity) -> Quantity:
    lo, hi = q.bounds
    low = 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))
    exact = Quantity(abs(q.value), q.unit, q.sources, q.integral)
    return exact if q.exact else replace(exact, lo=low, hi=max(abs(lo), abs(hi)))


def _extreme(smallest: bool) -> Callable[..., Quantity]:
    pick = min if smallest else max

    def choose(*qs: Quantity) -> Quantity:
        first = qs[0]
        chosen = pick(qs, key=lambda q: q.to(first.unit).value if q.unit != "none" else q.value)
        if all(q.exact for q in qs):
            return chosen
        ends = [q.to(chosen.unit).bounds if q.unit != "none" else q.bounds for q in qs]
        return replace(chosen, lo=pick(e[0] for e in ends), hi=pick(e[1] for e in ends))

    return choose


TESTS: dict[str, Callable[..., Truth]] = {
    "within": _within,
    "round_eq": _round_eq,
    "between": _between,
}
"""The functions that give true or false, by name; each is handed the evaluator's `Judge`."""

FUNCTIONS: dict[str, Callable[..., Quantity]] = {
    "ratio": divide,
    "to": _to,
    "abs": _abs,
    "min": _extreme(True),
    "max": _extreme(False),
}
"""The functions that give a quantity, by name."""

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
        """The expression's value, each `step.name` read through lookup (exact quantities: a
        condition is true or false)."""
        result = _Evaluator(self, lookup).visit(self.tree.body)
        return result is Truth.YES if isinstance(result, Truth) else result

    def judge(self, lookup: Callable[[str], Quantity]) -> tuple[Truth, list[Margin]]:
        """A condition over the intervals of the quantities lookup gives (`interval.py`), and the
        margin of each ordering it compared over an interval."""
        evaluator = _Evaluator(self, lookup)
        result = evaluator.visit(self.tree.body)
        if not isinstance(result, Truth):
            raise ExprError(f"{self.text!r} gives a number, not true or false")
        return result, evaluator.margins

    def shown(self, node: ast.AST) -> str:
        """A part of the expression as written (its values named `step.name` again)."""
        return re.sub(r"_ref\d+", lambda m: self.references[m.group(0)], ast.unparse(node))


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
        self.margins: list[Margin] = []
        self.label = ""

    def judge(self, a: Quantity, b: Quantity, op: str) -> Truth:
        truth = judged(a, b, op)
        if not (a.exact and b.exact):
            found = margin_of(self.label, a, b, op)
            self.margins += [found] if found else []
        return truth

    def visit(self, node: ast.AST) -> Quantity | Truth:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Truth.of(node.value)
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
                return self.truth(node.operand).negated()
            q = self.quantity(node.operand)
            if isinstance(node.op, ast.UAdd):
                return q
            negative = Quantity(-q.value, q.unit, q.sources, q.integral)
            return negative if q.exact else replace(negative, lo=-q.bounds[1], hi=-q.bounds[0])
        if isinstance(node, ast.BoolOp):
            conjunction = isinstance(node.op, ast.And)
            result = Truth.YES if conjunction else Truth.NO
            for value in node.values:  # stops where the answer is known, as Python does
                truth = self.truth(value)
                result = min(result, truth) if conjunction else max(result, truth)
                if result is (Truth.NO if conjunction else Truth.YES):
                    break
            return result
        if isinstance(node, ast.Compare):
            result, left, left_node = Truth.YES, self.quantity(node.left), node.left
            for op, right_node in zip(node.ops, node.comparators, strict=False):
                right = self.quantity(right_node)
                self.label = self.expr.shown(ast.Compare(left_node, [op], [right_node]))
                result = min(result, self.judge(left, right, _CMP[type(op)]))
                if result is Truth.NO:
                    break
                left, left_node = right, right_node
            return result
        if isinstance(node, ast.Call):
            return self.call(node)
        raise ExprError(f"{self.expr.text!r}: cannot evaluate {type(node).__name__}")

    def call(self, node: ast.Call) -> Quantity | Truth:
        known = [*TESTS, *FUNCTIONS]
        if not isinstance(node.func, ast.Name) or node.func.id not in known:
            name = node.func.id if isinstance(node.func, ast.Name) else "?"
            raise ExprError(
                f"{self.expr.text!r}: unknown function '{name}' (known: {', '.join(known)})"
            )
        args = [self.quantity(a) for a in node.args]
        kwargs = {k.arg: self.quantity(k.value) for k in node.keywords if k.arg}
        try:
            if node.func.id in TESTS:
                self.label = self.expr.shown(node)
                return TESTS[node.func.id](self.judge, *args, **kwargs)
            return FUNCTIONS[node.func.id](*args, **kwargs)
        except TypeError as exc:
            raise ExprError(f"{self.expr.text!r}: {node.func.id}(): {exc}") from None

    def quantity(self, node: ast.AST) -> Quantity:
        result = self.visit(node)
        if isinstance(result, Truth):
            raise ExprError(f"{self.expr.text!r}: a condition is used where a number is expected")
        return result

    def truth(self, node: ast.AST) -> Truth:
        result = self.visit(node)
        if not isinstance(result, Truth):
            raise ExprError(f"{self.expr.text!r}: a number is used where a condition is expected")
        return result
