"""Units of captured values, and conversion between units of one dimension."""

from __future__ import annotations

from typing import Literal

Unit = Literal[
    "B",
    "KiB",
    "MiB",
    "GiB",
    "GB",
    "ms",
    "s",
    "tok/s",
    "tok",
    "GB/s",
    "TB/s",
    "FLOP/s",
    "TFLOP/s",
    "%",
    "none",
]

# unit -> (dimension, factor to the dimension's base unit)
SCALE: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1.0),
    "KiB": ("bytes", 1024.0),
    "MiB": ("bytes", 1024.0**2),
    "GiB": ("bytes", 1024.0**3),
    "GB": ("bytes", 1e9),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "tok/s": ("rate", 1.0),
    "tok": ("tokens", 1.0),
    "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12),
    "FLOP/s": ("arithmetic", 1.0),
    "TFLOP/s": ("arithmetic", 1e12),
    "%": ("percent", 1.0),
    "none": ("none", 1.0),
}

UNITS: tuple[str, ...] = tuple(SCALE)


def convert(value: float, unit: str, to: str) -> float:
    """Convert value from one unit to another of the same dimension (B -> MiB, ms -> s, ...)."""
    if unit == to:
        return value
    try:
        dim_from, f_from = SCALE[unit]
        dim_to, f_to = SCALE[to]
    except KeyError as exc:
        raise ValueError(f"unknown unit {exc.args[0]!r}; known units: {', '.join(UNITS)}") from None
    if dim_from != dim_to:
        raise ValueError(f"cannot convert {unit} ({dim_from}) to {to} ({dim_to})")
    return value * f_from / f_to


def readable_unit(values: list[float], unit: str) -> str:
    """The unit to show these values in side by side: for a time or a bandwidth, the largest unit
    of its dimension in which the largest of them is at least 1 (`0.0002794 s` reads `0.2794 ms`);
    any other unit as recorded (a size in bytes is exact as recorded)."""
    dimension = SCALE.get(unit, ("", 1.0))[0]
    top = max((abs(v) for v in values), default=0.0)
    if dimension not in ("time", "bandwidth") or top == 0:
        return unit
    ladder = sorted((factor, name) for name, (dim, factor) in SCALE.items() if dim == dimension)
    chosen = ladder[0][1]
    for _, name in ladder:
        if convert(top, unit, name) >= 1:
            chosen = name
    return chosen
