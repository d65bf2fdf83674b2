"""Number formatting, in one place, for pages, claims, run histories, `course diff` and
START-HERE.md.

The rule (docs/writing-a-lesson.md, "How numbers are shown"): a number an author formats names
its decimals (`value(..., decimals=2)`); any other number, on a page or anywhere else, shows four
significant digits, and no decimals when it is whole at that precision (114,688 B; 448 MiB;
0.3459 ms; 201.7 tok/s; 1.549; 44 ms for 44.001 ms), with thousands separators, never in exponent
notation. A change
between two runs is a signed percentage with one decimal (+12.5 %). Durations read like a clock a
person uses (0.84 s, 12.3 s, 2 min 05 s); times a reader plans with are rounded to the minute
("under a minute", "about 14 min").

A recorded string (a captured text value, a GPU's name) is data, never markup: `recorded_text`
makes it inert in HTML and in the Markdown it passes through.
"""

from __future__ import annotations

import math
from datetime import datetime

from ..record.models import Spread
from ..record.units import convert

SIGNIFICANT = 4


def format_number(value: float, decimals: int, separators: bool = True) -> str:
    """A number with a fixed count of decimals and, unless told otherwise, thousands separators."""
    text = f"{value:,.{decimals}f}" if separators else f"{value:.{decimals}f}"
    if text.startswith("-") and float(text.replace(",", "")) == 0:
        text = text[1:]
    return text


def decimals_for(value: float, digits: int = SIGNIFICANT) -> int:
    """The decimals the rule gives a number nobody named decimals for: none for a whole number,
    else enough for `digits` significant digits."""
    if not math.isfinite(value) or abs(value - round(value)) < 1e-9 * max(1.0, abs(value)):
        return 0
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    if round(value, decimals) == round(value):  # 1234.0001: whole at four digits
        return 0
    return decimals


def significant(value: float, digits: int = SIGNIFICANT, separators: bool = True) -> str:
    """A number by the rule: whole numbers without decimals, others to `digits` significant
    digits, with separators, in plain notation."""
    if not math.isfinite(value):
        return f"{value}"
    return format_number(value, decimals_for(value, digits), separators)


def recorded(value: float | str, unit: str = "none") -> str:
    """A recorded value with its unit, by the rule above: '1,234 tok/s', '0.3459 ms', '44 ms'."""
    text = value if isinstance(value, str) else significant(value)
    return text if unit == "none" else f"{text} {unit}"


def spread_note(spread: Spread, unit: str, shown_unit: str) -> str:
    """A timed value's spread for its tooltip, in the unit it is shown in: 'median of 20,
    23.1–25.9 ms' (the range of the repeats)."""
    low, high = (convert(x, unit, shown_unit) for x in (spread.min, spread.max))
    return f"median of {spread.n}, {significant(low)}–{recorded(high, shown_unit)}"


def change(relative: float | None) -> str:
    """A relative change between two runs as a signed percentage: '+12.5 %', '-3.0 %', 'new'."""
    if relative is None:
        return ""
    if math.isinf(relative):
        return "new"
    return f"{relative * 100:+,.1f} %"


def duration(seconds: float) -> str:
    """Seconds as a person reads a stopwatch: '0.84 s', '12.3 s', '2 min 05 s', '1 h 05 min'."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def minutes_text(seconds: float) -> str:
    """'under a minute' (below 60 s), else 'about 14 min', 'about 1 h 05 min' (to the nearest
    minute)."""
    if seconds < 60:
        return "under a minute"
    minutes = math.floor(seconds / 60 + 0.5)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


def iso_duration(seconds: float) -> str:
    """An ISO 8601 duration in whole minutes (schema.org timeRequired), at least one minute."""
    minutes = max(1, math.ceil(seconds / 60))
    return f"PT{minutes // 60}H{minutes % 60}M" if minutes >= 60 else f"PT{minutes}M"


def money(amount: float, currency: str) -> str:
    """An amount with its currency, cents shown."""
    symbol = {"USD": "$", "EUR": "€", "GBP": "£"}.get(currency)
    return f"{symbol}{amount:,.2f}" if symbol else f"{amount:,.2f} {currency}"


def day(iso: str) -> str:
    """'29 November 2026' from an ISO 8601 time."""
    moment = datetime.fromisoformat(iso)
    return f"{moment.day} {moment:%B %Y}"


_MARKUP = frozenset("\\`*_{}[]<>&\"'|~\n\r")
"""What starts markup inside a line: tags, entities, emphasis, code, links (`[`), attributes
(`{`), table cells; a line break (a new paragraph, a block)."""
_NAMED = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;"}


def recorded_text(text: str) -> str:
    """A recorded string as inert HTML that Markdown leaves alone: the characters that start
    markup as character references, and the first one too when it is not a letter (a list, a
    heading, a quote or a definition starts a line); control characters as U+FFFD."""
    out = []
    for index, char in enumerate(text):
        if char in _NAMED:
            out.append(_NAMED[char])
        elif char in _MARKUP or (index == 0 and not char.isalpha()):
            out.append(f"&#{ord(char)};")
        elif (ord(char) < 32 and char != "\t") or 0x7F <= ord(char) < 0xA0:
            out.append("\ufffd")
        else:
            out.append(char)
    return "".join(out)
