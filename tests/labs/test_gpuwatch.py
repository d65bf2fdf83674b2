"""The kit's GPU watch: nvidia-smi sampled while a measurement runs (a stand-in script here: no
GPU), summarised with spreads and the driver's reasons; no sampler outlives the watch."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "lab" / "common" / "labkit"

# Answers the old field name only (a driver before 535 refuses `clocks_event_reasons`), one row
# every 50 ms: the SM clock alternates 1980 and 1755 MHz; 0x4 is the software power cap.
SMI = """#!/bin/sh
case "$1" in *${REJECT:-clocks_event_reasons}*) echo "Field is not valid." >&2; exit 2;; esac
echo "$@" > "$(dirname "$0")/args"
commas=$(printf '%s' "$1" | tr -cd ',' | wc -c)
i=0
while true; do
  if [ $((i % 2)) -eq 0 ]; then sm=1980; else sm=1755; fi
  if [ "$commas" -eq 3 ]; then echo "$sm, 3201, 452.25, 41"
  else echo "$sm, 3201, 452.25, 41, [N/A], 0x0000000000000004"; fi
  i=$((i + 1))
  sleep 0.05
done
"""


@pytest.fixture(scope="module")
def gpuwatch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    folder = tmp_path_factory.mktemp("kit")
    shutil.copytree(KIT, folder / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(folder))
    try:
        import labkit.gpuwatch

        yield labkit.gpuwatch
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == "labkit" or n.startswith("labkit.")]:
            del sys.modules[name]


def fake_smi(folder: Path) -> Path:
    script = folder / "nvidia-smi"
    script.write_text(SMI)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_the_watch_samples_under_load_and_names_what_held_the_clocks(
    gpuwatch: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    watch = gpuwatch.Watch(SimpleNamespace(type="cuda", index=0), period=0.05)
    with watch:
        time.sleep(0.6)
    assert watch.process is not None and watch.process.poll() is not None  # the sampler ended
    got = watch.summary()
    assert got is not None and got["samples"] >= 4
    sm = got["sm_clock_mhz"]
    assert (sm["min"], sm["max"], sm["n"]) == (1755.0, 1980.0, got["samples"])
    assert got["memory_clock_mhz"]["median"] == 3201.0 and got["power_w"]["median"] == 452.25
    assert got["memory_temperature_c"] is None  # [N/A]: not reported, not zero
    assert got["reasons"] == ["software power cap"]
    args = (tmp_path / "args").read_text()
    assert "clocks_throttle_reasons.active" in args and "--id=3" in args
    assert "--loop-ms=50" in args  # the fallback, the GPU
    lines = gpuwatch.describe(got).splitlines()
    assert "SM clock" in lines[1] and "1755 to 1980" in lines[1]
    assert "memory not reported" in lines[2] and lines[3].endswith("software power cap")
    assert max(len(line) for line in lines) <= 100


def test_a_driver_without_reasons_or_memory_temperature_still_gives_the_clocks(
    gpuwatch: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("REJECT", "temperature.memory")  # both queries with it fail at once
    with gpuwatch.Watch(SimpleNamespace(type="cuda", index=0), period=0.05) as watch:
        time.sleep(0.6)
    got = watch.summary()
    assert got is not None and got["sm_clock_mhz"]["max"] == 1980.0
    assert got["reasons"] == [] and got["memory_temperature_c"] is None
    assert "temperature.memory" not in (tmp_path / "args").read_text()


def test_without_nvidia_smi_or_on_a_cpu_the_watch_does_nothing(
    gpuwatch: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with gpuwatch.Watch(SimpleNamespace(type="cpu", index=None)) as on_cpu:
        pass
    assert on_cpu.process is None and on_cpu.summary() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with gpuwatch.Watch(SimpleNamespace(type="cuda", index=0)) as no_smi:
        pass
    assert no_smi.summary() is None
    assert gpuwatch.describe(None) == "GPU under load: not sampled (no nvidia-smi)"


def test_reason_bits_and_rows_that_do_not_parse(gpuwatch: ModuleType) -> None:
    both = ["software power cap", "hardware thermal slowdown"]
    assert gpuwatch.reasons_of(0x4 | 0x40 | 0x1000) == both  # an unknown bit left out
    fields = (*gpuwatch.READINGS.values(), "clocks_event_reasons.active")
    rows = ["1980, 3201, 400, 40, 50, 0x1", "garbage", "1980, 3201", ""]
    got = gpuwatch.parse(rows, fields)
    assert got is not None and got["samples"] == 1 and got["reasons"] == ["idle"]
    assert gpuwatch.parse(["nothing, here"], fields) is None
