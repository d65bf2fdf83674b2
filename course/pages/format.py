"""Number formatting, in one place, for pages, run histories, `course diff` and START-HERE.md.

The rule: a number an author formats names its decimals (`value(..., decimals=2)`); a number shown
without that (run history, diff, START-HERE) is shown with thousands separators, integers whole,
other numbers to four significant digits (0.3459 ms, 44.00 ms, 201.7 tok/s), never in exponent
notation. Durations read like a clock a person uses (0.84 s, 12.3 s, 2 min 05 s).
"""

from __future__ import annotations

import math
from datetime import datetime

SIGNIFICANT = 4


def format_number(value: float, decimals: int, separators: bool = True) -> str:
    """A number with a fixed count of decimals and, unless told otherwise, thousands separators."""
    text = f"{value:,.{decimals}f}" if separators else f"{value:.{decimals}f}"
    if text.startswith("-") and float(text.replace(",", "")) == 0:
        text = text[1:]
    return text


def significant(value: float, digits: int = SIGNIFICANT) -> str:
    """A number to `digits` significant digits, with separators, in plain notation."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return format_number(round(value, decimals), decimals)


def recorded(value: float | str, unit: str = "none") -> str:
    """A recorded value with its unit, by the rule above: '1,234 tok/s', '0.3459 ms', '44.00 ms'."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = significant(value)
    return text if unit == "none" else f"{text} {unit}"


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
    """'about 14 min', 'about 1 h 05 min', 'under a minute' (whole minutes, rounded up)."""
    minutes = math.ceil(seconds / 60) if seconds > 0 else 0
    if minutes < 1:
        return "under a minute"
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
