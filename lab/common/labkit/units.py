"""Units and the way a script prints numbers for a learner to read. Standard library only.

Results files hold base units (bytes, seconds, bytes per second, FLOP per second); these helpers
only format what a script prints.
"""

from __future__ import annotations

KIB, MIB, GIB = 2**10, 2**20, 2**30
BF16_BYTES = 2
FP8_BYTES = 1
FP32_BYTES = 4
# Bytes per number for the names config.json files use in `torch_dtype` (or `dtype`).
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "fp8": 1,
}


def human(n: float) -> str:
    """Bytes in binary units, the way memory is usually quoted: 448.0 MiB, 15.26 GiB, 512 B."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}" if unit == "GiB" else f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 812 us, 3.56 ms, 1.24 s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.0f} us"
    return f"{seconds * 1e3:,.2f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def flop_rate(x: float) -> str:
    """FLOP per second with a prefix: 791.2 TFLOP/s, 95.3 GFLOP/s."""
    for unit, size in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if x >= size:
            return f"{x / size:,.1f} {unit}"
    return f"{x:,.0f} FLOP/s"


def byte_rate(x: float) -> str:
    """Bytes per second with a prefix: 4.25 TB/s, 38.2 GB/s."""
    if x >= 1e12:
        return f"{x / 1e12:.2f} TB/s"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if x >= size:
            return f"{x / size:,.1f} {unit}"
    return f"{x:,.0f} B/s"


def row(label: str, value: int, width: int = 68) -> str:
    """One line of a budget: a label, the bytes, the same in binary units."""
    return f"  {label:<{width}} {value:>17,} B {human(abs(value)):>11}"


# The units a fact or a result may be written in, and each one's factor to its base unit.
TO_BASE = {
    "B": 1.0,
    "KiB": float(KIB),
    "MiB": float(MIB),
    "GiB": float(GIB),
    "GB": 1e9,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "FLOP/s": 1.0,
    "TFLOP/s": 1e12,
    "s": 1.0,
    "ms": 1e-3,
    "tok": 1.0,
    "tok/s": 1.0,
    "%": 1.0,
    "none": 1.0,
}


def to_base(value: float, unit: str) -> float:
    """A number in bytes, seconds, bytes or FLOP per second: 1.5 GiB -> 1,610,612,736 B."""
    if unit not in TO_BASE:
        raise ValueError(f"unknown unit {unit!r} (known: {', '.join(TO_BASE)})")
    return value * TO_BASE[unit]
