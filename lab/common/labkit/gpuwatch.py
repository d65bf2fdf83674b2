"""What the GPU ran at while a measurement ran: its clocks, power and temperatures, sampled.

A GPU's speed can differ between two machines of one kind, or between two runs on one: its SM
clock under load, its memory clock, a power or thermal cap. The clocks a machine reports when
idle say nothing of that, so `Watch` asks `nvidia-smi` every `period` seconds while the timed work
runs, in a process beside the script, and summarises what it saw:

    with gpuwatch.Watch(device) as watch:
        ...  # the timed work
    results["gpu_under_load"] = watch.summary()   # None where there is no nvidia-smi

The summary holds a `Spread` of each reading (median, quartiles, extremes, how many samples) and
the reasons the driver gave for holding the clocks down (a power cap, heat, ...), by name.
Standard library only: on a CPU, or where `nvidia-smi` is missing, the watch does nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from types import TracebackType
from typing import Any

from .timing import Spread

READINGS = {
    "sm_clock_mhz": "clocks.sm",
    "memory_clock_mhz": "clocks.mem",
    "power_w": "power.draw",
    "temperature_c": "temperature.gpu",
    "memory_temperature_c": "temperature.memory",
}
"""The summary's names for the nvidia-smi fields sampled."""
REASONS = {
    0x1: "idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
"""nvidia-smi's `clocks_event_reasons.active` bits (NVML's clocks event reasons)."""
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
"""The field's name since driver 535, and before it."""
QUERIES = (
    (*READINGS.values(), REASON_FIELDS[0]),
    (*READINGS.values(), REASON_FIELDS[1]),
    ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu"),
)
"""What is asked, in turn, until nvidia-smi accepts it (a field one driver lacks fails the whole
query): the readings and the reasons under either name, then the four readings every GPU has."""


def smi_index(device: Any) -> str:
    """The `nvidia-smi -i` argument for a CUDA device: CUDA_VISIBLE_DEVICES' entry for it when set
    (an index or a UUID), else its index."""
    index = getattr(device, "index", None) or 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    visible = [v for v in visible if v]
    return visible[index] if index < len(visible) else str(index)


def reasons_of(mask: int) -> list[str]:
    """The names of a clocks event reasons bitmask's bits, known ones only, in bit order."""
    return [name for bit, name in REASONS.items() if mask & bit]


def parse(lines: list[str], fields: tuple[str, ...]) -> dict[str, Any] | None:
    """nvidia-smi's `--format=csv,noheader,nounits` lines for `fields` as the summary (None
    without a sample): a Spread per reading that had numbers, and every reason seen."""
    columns: dict[str, list[float]] = {name: [] for name in fields}
    masks = 0
    samples = 0
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        samples += 1
        for name, cell in zip(fields, cells, strict=True):
            if name in REASON_FIELDS:
                try:
                    masks |= int(cell, 16)
                except ValueError:
                    pass
                continue
            try:
                columns[name].append(float(cell))
            except ValueError:  # [N/A], [Not Supported]
                pass
    if not samples:
        return None
    summary: dict[str, Any] = {"samples": samples}
    for key, field in READINGS.items():
        values = columns.get(field, [])
        summary[key] = Spread.of(values).as_dict() if values else None
    summary["reasons"] = reasons_of(masks)
    return summary


class Watch:
    """Samples the GPU every `period` seconds while the `with` block runs (nothing on a CPU)."""

    def __init__(self, device: Any, period: float = 0.1) -> None:
        self.device, self.period = device, period
        self.fields: tuple[str, ...] = ()
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []

    def _start(self, fields: tuple[str, ...]) -> subprocess.Popen[str] | None:
        smi = shutil.which("nvidia-smi")
        if smi is None or getattr(self.device, "type", "cpu") != "cuda":
            return None
        return subprocess.Popen(
            [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
             f"--loop-ms={max(1, round(self.period * 1000))}", f"--id={smi_index(self.device)}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def __enter__(self) -> Watch:
        for fields in QUERIES:
            self.fields = fields
            self.process = self._start(self.fields)
            if self.process is None:
                return self
            try:  # a driver that does not know a field's name answers at once and exits
                self.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                return self
            if self.process.returncode == 0:
                return self
        self.process = None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        self.lines = out.splitlines()

    def summary(self) -> dict[str, Any] | None:
        """What the samples showed (see `parse`); None where nothing was sampled."""
        return parse(self.lines, self.fields) if self.lines else None


def describe(summary: dict[str, Any] | None) -> str:
    """Lines for a step's output: the clocks, power and temperatures under load, and what held
    the clocks down."""
    if summary is None:
        return "GPU under load: not sampled (no nvidia-smi)"

    def reading(key: str, label: str, unit: str) -> str:
        got = summary.get(key)
        if not got:
            return f"{label} not reported"
        return f"{label} {got['median']:.0f} {unit} [{got['min']:.0f} to {got['max']:.0f}]"

    held = ", ".join(r for r in summary["reasons"] if r != "idle") or "none"
    return (
        f"GPU under load, {summary['samples']} samples (median [min to max]):\n"
        f"  {reading('sm_clock_mhz', 'SM clock', 'MHz')},"
        f" {reading('memory_clock_mhz', 'memory clock', 'MHz')}\n"
        f"  {reading('power_w', 'power', 'W')}, {reading('temperature_c', 'GPU', 'C')},"
        f" {reading('memory_temperature_c', 'memory', 'C')}\n"
        f"  clocks held down by: {held}"
    )
