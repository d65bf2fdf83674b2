"""Claims: a sentence of prose tied to a condition over recorded values, checked at every build.

    {% call claim("decode.tps_short > decode.tps_long") %}
    Decoding slows down as the chat grows.{% endcall %}
    {{ claim("size.bytes_per_token == 114688", "One token's keys and values take 112 KiB.") }}

The condition is an expression of `course.quantity` that yields true or false: comparisons
(`==`, `!=`, `<`, `<=`, `>`, `>=`, chained), `and`/`or`/`not`, and the functions
`within(a, b, pct)`, `round_eq(a, b, decimals, 'UNIT')`, `between(x, lo, hi)`, `ratio(a, b)`.
A claim that does not hold does not stop the page: it is collected, and the build fails once,
listing every failing claim with its page, its text and the values it read.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..record.quantity import ExprError, Expression, Quantity
from .format import recorded

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


@dataclass
class ClaimResult:
    """What checking one claim found."""

    condition: str
    text: str
    holds: bool
    values: dict[str, str] = field(default_factory=dict)
    """`step.name` -> the recorded value as read, for the failure message."""
    error: str | None = None
    """Why the condition could not be evaluated at all (unknown value, unit mismatch...)."""

    def message(self) -> str:
        """One paragraph saying which claim failed and with which values."""
        read = ", ".join(f"{name} = {shown}" for name, shown in self.values.items()) or "no values"
        if self.error:
            return f'claim "{self.text}": cannot check `{self.condition}`: {self.error}'
        return f'claim "{self.text}" does not hold: `{self.condition}` is false with {read}'


def shown_value(quantity: Quantity) -> str:
    """A value a claim read, as its failure message shows it (the one number format)."""
    if quantity.text is not None:
        return repr(quantity.text)
    return recorded(quantity.value, quantity.unit)


def plain_text(fragment: str) -> str:
    """Prose as a reader sees it: tags removed, entities decoded, whitespace collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", fragment))).strip()


def check_claim(condition: str, text: str, lookup: Callable[[str], Quantity]) -> ClaimResult:
    """Evaluate a claim's condition, recording every value it reads."""
    seen: dict[str, str] = {}

    def reading(reference: str) -> Quantity:
        quantity = lookup(reference)
        seen[reference] = shown_value(quantity)
        return quantity

    shown = plain_text(text)
    try:
        outcome = Expression.parse(condition).evaluate(reading)
    except (ExprError, LookupError) as exc:
        reason = str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc)
        return ClaimResult(condition, shown, False, seen, reason)
    if not isinstance(outcome, bool):
        return ClaimResult(
            condition,
            shown,
            False,
            seen,
            "the condition gives a number, not true or false (compare it with something)",
        )
    return ClaimResult(condition, shown, outcome, seen)


def claim_html(result: ClaimResult, inner: str) -> str:
    """The sentence wrapped in an element naming its condition, so an audit can find it."""
    state = "holds" if result.holds else "fails"
    return (
        f'<span class="course-claim" data-claim="{html.escape(result.condition, quote=True)}" '
        f'data-claim-state="{state}">{inner}</span>'
    )
