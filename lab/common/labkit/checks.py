"""Checks that stop a script before a wrong number reaches a page.

A failed check prints `SANITY CHECK FAILED: <what>` on stderr and exits with status 2, which fails
the step (and the run) with the message in the run's error. Standard library only.
"""

from __future__ import annotations

import math
import sys
from typing import NoReturn

FAILED = "SANITY CHECK FAILED"
EXIT_STATUS = 2


def fail(what: str) -> NoReturn:
    """Stop the script: print what failed and exit with status 2."""
    print(f"\n{FAILED}: {what}", file=sys.stderr)
    sys.exit(EXIT_STATUS)


def check(ok: bool, what: str) -> None:
    """Stop the script with a clear message when a number makes no physical sense."""
    if not ok:
        fail(what)


def within(got: float, want: float, tolerance: float) -> bool:
    """|got - want| at most `tolerance` (a fraction) of |want|; exact when want is 0."""
    if want == 0:
        return got == 0
    return abs(got - want) <= tolerance * abs(want)


def finite(x: float) -> float | None:
    """x, or None where it is infinite or NaN (JSON has neither)."""
    return x if math.isfinite(x) else None
