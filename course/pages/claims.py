"""Claims: a sentence of prose tied to a condition over recorded values, checked at every build.

    {% call claim("decode.tps_short > decode.tps_long") %}
    Decoding slows down as the chat grows.{% endcall %}
    {{ claim("size.bytes_per_token == 114688", "One token's keys and values take 112 KiB.") }}

The condition is an expression of `course.quantity` that yields true or false: comparisons
(`==`, `!=`, `<`, `<=`, `>`, `>=`, chained), `and`/`or`/`not`, and the functions
`within(a, b, pct)`, `round_eq(a, b, decimals, 'UNIT')`, `between(x, lo, hi)`, `ratio(a, b)`.
A claim that does not hold does not stop the page: it is collected, and the build fails once,
listing every failing claim with its page, its text and the values it read.

A timed value (one recorded with its spread) is not one number: a claim over timed values holds
only when it holds over their quartiles (interval arithmetic, `record/interval.py`), or over the
band the author states at its end (`a > b ± 10 %`: each timed value anywhere within 10 % of its
median). A claim that holds so, but not over the whole range of the repeats, is fragile: `course
check` warns ("holds by 3.0 %, spread 8.0 %"). docs/writing-a-lesson.md argues the rule.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..record.expression import Expression
from ..record.interval import Margin, Truth
from ..record.quantity import ExprError, Quantity
from .format import recorded

TOLERANCE = re.compile(r"^(?P<condition>.*?)\s*(?:±|\+/-)\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*$", re.S)
"""A stated tolerance ends a condition: `a > b ± 10 %` (or `+/- 10 %`)."""
Band = str | float
"""Which interval a timed value stands for: 'quartiles', 'range', or ± that share of its median."""

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
    noise: str | None = None
    """Why a claim that holds on the medians does not hold beyond the spread of its values."""
    fragile: str | None = None
    """For a claim that holds, but not over the whole range of its timed values' repeats: by how
    much it holds, and what that range asks ('holds by 3.0 %, spread 8.0 % ...')."""

    def message(self) -> str:
        """One paragraph saying which claim failed and with which values."""
        read = ", ".join(f"{name} = {shown}" for name, shown in self.values.items()) or "no values"
        if self.error:
            return f'claim "{self.text}": cannot check `{self.condition}`: {self.error}'
        if self.noise:
            return f'claim "{self.text}" holds only within noise: {self.noise}, with {read}'
        return f'claim "{self.text}" does not hold: `{self.condition}` is false with {read}'


def shown_value(quantity: Quantity) -> str:
    """A value a claim read, as its failure message shows it (the one number format), a timed
    value with its spread."""
    if quantity.text is not None:
        return repr(quantity.text)
    shown, spread, unit = recorded(quantity.value, quantity.unit), quantity.spread, quantity.unit
    if spread is None:
        return shown
    return (
        f"{shown} (median of {spread.n}; quartiles {recorded(spread.q1)}–"
        f"{recorded(spread.q3, unit)}, range {recorded(spread.min)}–{recorded(spread.max, unit)})"
    )


def split_tolerance(condition: str) -> tuple[str, float | None]:
    """A condition without its stated tolerance, and the tolerance as a share (0.1 for `± 10 %`)."""
    stated = TOLERANCE.match(condition)
    if stated is None:
        return condition, None
    return stated.group("condition"), float(stated.group("pct")) / 100


def banded(lookup: Callable[[str], Quantity], band: Band) -> Callable[[str], Quantity]:
    """The lookup with every timed value given an interval: its quartiles, its whole range, or
    ± a share of its median; other values stay exact."""

    def read(reference: str) -> Quantity:
        q = lookup(reference)
        if q.spread is None:
            return q
        if band == "quartiles":
            lo, hi = q.spread.q1, q.spread.q3
        elif band == "range":
            lo, hi = q.spread.min, q.spread.max
        else:
            ends = (q.value * (1 - float(band)), q.value * (1 + float(band)))
            lo, hi = min(ends), max(ends)
        return replace(q, lo=lo, hi=hi)

    return read


def _pct(share: float) -> str:
    return f"{share * 100:,.1f} %"


def _widest(margins: list[Margin]) -> Margin | None:
    """Of the orderings that hold on the medians (those that decide), the one furthest from
    holding over its intervals."""
    holding = [m for m in margins if m.margin > 0]
    return max(holding, key=lambda m: m.short, default=None)


def plain_text(fragment: str) -> str:
    """Prose as a reader sees it: tags removed, entities decoded, whitespace collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", fragment))).strip()


def check_claim(condition: str, text: str, lookup: Callable[[str], Quantity]) -> ClaimResult:
    """Evaluate a claim's condition, recording every value it reads; over timed values, judge it
    beyond their spread (the module's docstring)."""
    seen: dict[str, str] = {}
    timed: set[str] = set()

    def reading(reference: str) -> Quantity:
        quantity = lookup(reference)
        seen[reference] = shown_value(quantity)
        timed.update([reference] if quantity.spread is not None else [])
        return quantity

    shown = plain_text(text)
    bare, tolerance = split_tolerance(condition)
    try:
        expression = Expression.parse(bare)
        outcome = expression.evaluate(reading)
        if not isinstance(outcome, bool):
            return ClaimResult(
                condition,
                shown,
                False,
                seen,
                "the condition gives a number, not true or false (compare it with something)",
            )
        if not outcome or not timed:
            return ClaimResult(condition, shown, outcome, seen)
        decided = expression.judge(banded(reading, "quartiles" if tolerance is None else tolerance))
        ranged = expression.judge(banded(reading, "range"))
    except (ExprError, LookupError) as exc:
        reason = str(exc.args[0]) if isinstance(exc, LookupError) and exc.args else str(exc)
        return ClaimResult(condition, shown, False, seen, reason)
    if decided[0] is not Truth.YES:
        return ClaimResult(condition, shown, False, seen, noise=_noise(bare, tolerance, decided[1]))
    result = ClaimResult(condition, shown, True, seen)
    if ranged[0] is not Truth.YES:
        worst = _widest(ranged[1])
        result.fragile = (
            f"holds by {_pct(worst.margin)}, spread {_pct(worst.needed)} (`{worst.text}`, over "
            "the whole range of the repeats)"
            if worst
            else "holds, but not over the whole range of its timed values' repeats"
        )
    return result


def _noise(condition: str, tolerance: float | None, margins: list[Margin]) -> str:
    """Why a claim that holds on the medians does not hold beyond its values' spread."""
    over = "quartiles" if tolerance is None else f"stated tolerance (± {_pct(tolerance)} each)"
    worst = _widest(margins)
    if worst is None:
        said = f"`{condition}` holds on the medians, but not over its timed values' {over}"
    else:
        said = (
            f"`{condition}` holds on the medians by {_pct(worst.margin)} (`{worst.text}`), but "
            f"its timed values' {over} need {_pct(worst.needed)}"
        )
    return (
        f"{said}; widen the claim's margin, or state the noise you expect at its end "
        f"(`{condition} ± N %`)"
    )


def claim_html(result: ClaimResult, inner: str) -> str:
    """The sentence wrapped in an element naming its condition, so an audit can find it."""
    state = "holds" if result.holds else "fails"
    return (
        f'<span class="course-claim" data-claim="{html.escape(result.condition, quote=True)}" '
        f'data-claim-state="{state}">{inner}</span>'
    )


def claim_line(source: str, condition: str) -> int | None:
    """The line of a page's source where a claim's condition is written (the first such line)."""
    at = source.find(condition)
    return None if at < 0 else source.count("\n", 0, at) + 1


def fragile_warnings(page: str, source: str, results: list[ClaimResult]) -> list[str]:
    """What `course check` says of each fragile claim of a page, naming the page and line."""
    warnings = []
    for result in results:
        if result.holds and result.fragile:
            line = claim_line(source, result.condition)
            where = f"{page}:{line}" if line else page
            warnings.append(
                f'{where}: claim "{result.text}" {result.fragile}: a re-run may fail it'
            )
    return warnings
