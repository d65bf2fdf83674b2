"""Ctrl-C, SIGTERM and a closed terminal during a run: each becomes `Interrupted`, once.

The first of them raises `Interrupted` in the runner, so its clean-up ends every process group,
keeps the logs and marks the run failed. A closed terminal (SIGHUP) also sends what the run still
prints to /dev/null, since writing to a hung-up terminal fails. Signals that come while the
clean-up runs are noted and ignored, so that a second Ctrl-C cannot cut the clean-up short.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from .options import Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WHY = {
    signal.SIGINT: "SIGINT: Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP: the terminal closed",
}


@dataclass
class Signals:
    """What arrived, and whether the run is cleaning up (then signals are only noted)."""

    cleaning: bool = False
    received: list[str] = field(default_factory=list)

    def clean_up(self) -> None:
        """From now on, note signals instead of raising."""
        self.cleaning = True


@contextmanager
def signals_as_interrupt(console: Console) -> Iterator[Signals]:
    """Turn SIGINT, SIGTERM and SIGHUP into Interrupted (the first one, outside the clean-up)."""
    state = Signals()

    def handler(signum: int, frame: Any) -> None:
        sig = signal.Signals(signum)
        if sig == signal.SIGHUP:
            console.file = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the console
        first = not state.received
        state.received.append(sig.name)
        if first and not state.cleaning:
            raise Interrupted(WHY[sig])

    previous = {sig: signal.getsignal(sig) for sig in HANDLED}
    for sig in HANDLED:
        signal.signal(sig, handler)
    try:
        yield state
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
