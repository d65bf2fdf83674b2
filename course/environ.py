"""Process environment changed for the length of a block only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def variable(name: str, value: str) -> Iterator[None]:
    """Set one environment variable inside the block; restore (or remove) it afterwards."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
