"""A library's log messages, collected while a block of code runs, for the script to read.

    with logs.collect(logs.CONTINUOUS_BATCHING) as lines:   # every message at INFO and above
        ...                                                 # the engine runs
    planned = [line for line in lines if line.startswith("Paged cache initialized")]

An engine often says what it decided (the memory it found, the blocks it took, the requests it
put back) only in its log: a lab reads those lines instead of guessing them. By default nothing
collected reaches the logger's handlers (the script prints what it keeps, once); `show(record)`
lets the records it chooses through, as they would have been printed without the collection.
Standard library only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

CONTINUOUS_BATCHING = "ContinuousBatchingLogger"
"""The logger of transformers' continuous batching: its planner's sums, blocks and offloading."""


@contextmanager
def collect(
    name: str,
    level: int = logging.INFO,
    show: Callable[[logging.LogRecord], bool] | None = None,
) -> Iterator[list[str]]:
    """Every message of the logger `name` at `level` or above while the block runs, in order;
    the logger's level and filters are as they were once it ends. `show(record)` says which
    records still reach the logger's handlers (none when not given)."""
    logger = logging.getLogger(name)
    lines: list[str] = []

    class Keep(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            lines.append(record.getMessage())
            return show is not None and show(record)

    keep, before = Keep(), logger.level
    logger.setLevel(level)
    logger.addFilter(keep)
    try:
        yield lines
    finally:
        logger.removeFilter(keep)
        logger.setLevel(before)
