"""GPU memory as nvidia-smi sees it, while llama.cpp's programs run (they report none of their own).

`GpuMemory` polls nvidia-smi's memory.used (the whole device, every process) every 100 ms while
a block runs: `peak` is the highest reading, `idle` the reading before, and their difference what
the programs under test took, to within the polling. On a machine without nvidia-smi every
figure is None. `fits_24gb` judges a peak against an RTX 4090 as PyTorch sees it (the course's
facts), the memory a program and its CUDA context can use there.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from typing import Any, Self

from labkit import facts
from labkit.units import human

MIB = 2**20
CARD = "rtx-4090"


class GpuMemory:
    """Polls nvidia-smi's memory.used while a block runs; see the module's docstring."""

    def __init__(self, index: int = 0, period_ms: int = 100) -> None:
        self.cmd = ["nvidia-smi", f"--id={index}", "--query-gpu=memory.used",
                    "--format=csv,noheader,nounits"]  # fmt: skip
        self.period = period_ms / 1000
        self.available = shutil.which("nvidia-smi") is not None
        self.idle: int | None = None
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> int | None:
        """memory.used now, in bytes (nvidia-smi reports MiB); None when it cannot say."""
        try:
            out = subprocess.run(
                self.cmd, check=False, capture_output=True, text=True, timeout=10
            ).stdout
            return int(out.strip().splitlines()[0]) * MIB
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None

    def _poll(self) -> None:
        while not self._stop.is_set():
            used = self.read()
            if used is not None:
                self.peak = used if self.peak is None else max(self.peak, used)
            time.sleep(self.period)

    def __enter__(self) -> Self:
        if self.available:
            self.idle = self.read()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def result(self, idle: int | None = None) -> dict[str, Any]:
        """Peak, idle and their difference in bytes, and whether the peak fits a 24 GB card
        (None without a GPU). `idle` replaces the reading before, for a block that began with a
        server already running (its memory is then part of what the step needs)."""
        base = self.idle if idle is None else idle
        taken = self.peak - base if self.peak is not None and base is not None else None
        fits = None
        if self.peak is not None:
            total = facts.card(CARD).torch_total
            fits = total is not None and self.peak <= total
        return {"peak_used": self.peak, "idle_used": base, "peak_taken": taken, "fits_24gb": fits}


def report(got: dict[str, Any], what: str, indent: str = "") -> str:
    """What a step's peak GPU memory was and whether it fits a 24 GB card, for the transcript:
    two lines (one without nvidia-smi), each begun with `indent`."""
    if got["peak_used"] is None:
        return f"{indent}peak GPU memory: not measured (no nvidia-smi on this machine)"
    card = facts.card(CARD)
    verdict = "fits" if got["fits_24gb"] else "does NOT fit"
    return (
        f"{indent}peak GPU memory in use ({what}, nvidia-smi): {human(got['peak_used'])};"
        f"\n{indent}  {verdict} an {card.label} ({human(card.torch_total or 0)} as PyTorch sees it)"
    )


def record(results: dict[str, Any], got: dict[str, Any], what: str) -> str:
    """Keep a step's readings in its results (`gpu_memory`, and `peak_gpu_memory`: the peak in
    bytes, None without nvidia-smi) and return report(got, what) for the transcript."""
    results["gpu_memory"] = got
    results["peak_gpu_memory"] = got["peak_used"]
    return report(got, what)


def worst(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest of several blocks' readings (a step that ran a program several times)."""
    seen = [r for r in results if r["peak_used"] is not None]
    if not seen:
        return {"peak_used": None, "idle_used": None, "peak_taken": None, "fits_24gb": None}
    top = max(seen, key=lambda r: r["peak_used"])
    return {**top, "fits_24gb": all(r["fits_24gb"] for r in seen)}
