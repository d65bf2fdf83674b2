"""Units of captured values, and conversion between units of one dimension.

    convert(2500, "µs", "ms")      -> 2.5
    convert(3e6, "B/s", "MB/s")    -> 3.0
    convert(2, "req/s", "req/min") raises: req/min is not a unit (one spelling per unit)

Decimal prefixes (KB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) powers of 1024.
"""

from __future__ import annotations

import difflib
from typing import Literal

Unit = Literal[
    # bytes
    "B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    # time
    "ns", "µs", "ms", "s", "min", "h",
    # bandwidth: bytes per second
    "B/s", "KB/s", "MB/s", "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s",
    # tokens, and tokens per second
    "tok", "tok/s",
    # requests, and requests per second
    "req", "req/s",
    # floating-point operations, and per second
    "FLOP", "GFLOP", "TFLOP", "FLOP/s", "GFLOP/s", "TFLOP/s",
    # a GPU's clocks and power draw, as nvidia-smi reports them
    "MHz", "W",
    "%", "none",
]  # fmt: skip

# unit -> (dimension, factor to the dimension's base unit)
SCALE: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1.0),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "TB": ("bytes", 1e12),
    "KiB": ("bytes", 1024.0),
    "MiB": ("bytes", 1024.0**2),
    "GiB": ("bytes", 1024.0**3),
    "TiB": ("bytes", 1024.0**4),
    "ns": ("time", 1e-9),
    "µs": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "B/s": ("bandwidth", 1.0),
    "KB/s": ("bandwidth", 1e3),
    "MB/s": ("bandwidth", 1e6),
    "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12),
    "KiB/s": ("bandwidth", 1024.0),
    "MiB/s": ("bandwidth", 1024.0**2),
    "GiB/s": ("bandwidth", 1024.0**3),
    "tok": ("tokens", 1.0),
    "tok/s": ("token rate", 1.0),
    "req": ("requests", 1.0),
    "req/s": ("request rate", 1.0),
    "FLOP": ("flop", 1.0),
    "GFLOP": ("flop", 1e9),
    "TFLOP": ("flop", 1e12),
    "FLOP/s": ("compute", 1.0),
    "GFLOP/s": ("compute", 1e9),
    "TFLOP/s": ("compute", 1e12),
    "MHz": ("frequency", 1e6),
    "W": ("power", 1.0),
    "%": ("percent", 1.0),
    "none": ("none", 1.0),
}

UNITS: tuple[str, ...] = tuple(SCALE)
ALIASES = {"us": "µs", "\u03bcs": "µs"}
"""Spellings lab.yml also accepts, read as the unit they stand for (`us` and Greek mu for µs)."""
PER_SECOND = {
    "bytes": ("B", "B/s", "GB/s"),
    "tokens": ("tok", "tok/s", "tok/s"),
    "requests": ("req", "req/s", "req/s"),
    "flop": ("FLOP", "FLOP/s", "TFLOP/s"),
}
"""An amount divided by a time: the dimension's base unit, the rate's base unit, and the unit
the rate is given in (bytes over seconds are GB/s, as datasheets write bandwidth)."""


def dimension(unit: str) -> str:
    """The dimension of a unit ('bytes', 'time', ...); ValueError naming the units otherwise."""
    if unit not in SCALE:
        raise ValueError(f"unknown unit {unit!r}{_close(unit)}; known units: {', '.join(UNITS)}")
    return SCALE[unit][0]


def _close(unit: str) -> str:
    if unit in ALIASES:
        return f" (write {ALIASES[unit]!r})"
    close = difflib.get_close_matches(unit, UNITS, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def convert(value: float, unit: str, to: str) -> float:
    """Convert value from one unit to another of the same dimension (B -> MiB, µs -> ms, ...)."""
    if unit == to:
        return value
    dim_from, dim_to = dimension(unit), dimension(to)
    if dim_from != dim_to:
        raise ValueError(f"cannot convert {unit} ({dim_from}) to {to} ({dim_to})")
    return value * SCALE[unit][1] / SCALE[to][1]


def readable_unit(values: list[float], unit: str) -> str:
    """The unit to show these values in side by side: for a time or a bandwidth, the largest unit
    of its dimension in which the largest of them is at least 1 (`0.0002794 s` reads `0.2794 ms`);
    any other unit as recorded (a size in bytes is exact as recorded)."""
    dim = SCALE.get(unit, ("", 1.0))[0]
    top = max((abs(v) for v in values), default=0.0)
    if dim not in ("time", "bandwidth") or top == 0:
        return unit
    ladder = sorted(
        (factor, name)
        for name, (d, factor) in SCALE.items()
        if d == dim and "i" not in name and name not in ("ns", "µs", "min", "h")  # ms to s; decimal
    )
    chosen = ladder[0][1]
    for _, name in ladder:
        if convert(top, unit, name) >= 1:
            chosen = name
    return chosen
