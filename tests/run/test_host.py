"""Host facts: the GPU the steps see, read through nvidia-smi (a stand-in script here: no GPU)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from course.record.models import Gpu, HostFacts
from course.run.host import (
    SPEED_FIELDS,
    SPEED_QUERY,
    collect,
    gpu_facts,
    gpu_slug,
    parse_query,
    speed_facts,
)

SMI = """#!/bin/sh
if [ "$1" = "--query-gpu=index,name,memory.total,driver_version,uuid" ]; then
  echo "0, NVIDIA H200, 143771, 580.159.04, GPU-aaaa"
  echo "1, NVIDIA H200, 143771, 580.159.04, GPU-bbbb"
else
  echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |"
fi
"""


def fake_smi(folder: Path) -> dict[str, str]:
    script = folder / "nvidia-smi"
    script.write_text(SMI)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_the_count_is_what_cuda_visible_devices_lets_the_steps_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", fake_smi(tmp_path)["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    both = gpu_facts()
    assert both is not None and both["count"] == 2 and both["cuda"] == "13.0"
    assert gpu_slug(both) == "h200x2"
    one = gpu_facts({"CUDA_VISIBLE_DEVICES": "1"})
    assert one is not None and (one["name"], one["count"]) == ("NVIDIA H200", 1)
    assert gpu_slug(one) == "h200"
    by_uuid = gpu_facts({"CUDA_VISIBLE_DEVICES": "GPU-aaaa"})
    assert by_uuid is not None and by_uuid["count"] == 1
    assert gpu_facts({"CUDA_VISIBLE_DEVICES": ""}) is None  # nothing visible: no GPU


# `nvidia-smi --query-gpu=... --format=csv` on the 16-core H200 host, 1 December 2026 (the GPU
# idle: the SM clock at 345 MHz), as it printed it.
H200_HOST = """\
name, memory.total [MiB], driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz], \
clocks.current.memory [MHz], clocks.max.memory [MHz], clocks.applications.graphics [MHz], \
clocks.applications.memory [MHz], power.limit [W], power.default_limit [W], power.max_limit [W], \
power.draw [W], persistence_mode, pcie.link.gen.current, pcie.link.gen.max, \
pcie.link.width.current, pcie.link.width.max, temperature.gpu, clocks_event_reasons.active, \
compute_mode, pstate, ecc.mode.current, mig.mode.current
NVIDIA H200, 143771 MiB, 580.159.04, 345 MHz, 1980 MHz, 3201 MHz, 3201 MHz, 1980 MHz, 3201 MHz, \
700.00 W, 700.00 W, 700.00 W, 81.55 W, Enabled, 5, 5, 16, 16, 41, 0x0000000000000001, Default, P0, \
Enabled, Disabled
"""


def test_speed_facts_of_the_h200_host() -> None:
    (row,) = parse_query(H200_HOST)
    assert speed_facts(row, Path("/nonexistent")) == {
        "sm_clock_mhz": 345,
        "sm_clock_max_mhz": 1980,
        "memory_clock_mhz": 3201,
        "memory_clock_max_mhz": 3201,
        "applications_clock_mhz": 1980,
        "power_limit_w": 700.0,
        "power_default_limit_w": 700.0,
        "power_draw_w": 81.55,
        "persistence": True,
        "pcie": "gen 5 x16",
        "bus_id": None,
        "uuid": None,
        "numa_node": None,
    }
    # the same fields in `nounits` form, as a run asks for them, a driver missing some
    nounits = H200_HOST.replace(" MHz", "").replace(" W,", ",").replace("81.55", "[N/A]")
    (bare,) = parse_query(nounits.replace("Enabled, 5, 5, 16, 16", "[N/A], 4, 5, 8, 16"))
    facts = speed_facts(bare, Path("/nonexistent"))
    assert (facts["sm_clock_max_mhz"], facts["power_draw_w"], facts["persistence"]) == (
        1980,
        None,
        None,
    )
    assert facts["pcie"] == "gen 4 x8 of gen 5 x16"


def smi_answering(folder: Path, rows: list[str]) -> dict[str, str]:
    """A stand-in nvidia-smi: the base query as `SMI`, the speed query with these rows under
    its header (values as the H200 host printed them)."""
    env = fake_smi(folder)
    (folder / "speed.csv").write_text("\n".join([", ".join(SPEED_FIELDS), *rows]) + "\n")
    answer = f'if [ "$1" = "--query-gpu={SPEED_QUERY}" ]; then\n  cat {folder / "speed.csv"}\n'
    script = folder / "nvidia-smi"
    script.write_text(SMI.replace('if [ "$1"', answer + 'elif [ "$1"', 1))
    return env


def test_gpu_facts_carry_the_speed_facts_of_the_gpu_the_steps_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        "345, 1980, 3201, 3201, 1980, 700.00, 700.00, 81.55, Enabled, 5, 5, 16, 16, "
        "00000000:19:00.0, GPU-aaaa",
        "1980, 1980, 3201, 3201, 1980, 500.00, 700.00, 412.87, Disabled, 1, 5, 16, 16, "
        "00000000:3B:00.0, GPU-bbbb",
    ]
    monkeypatch.setenv("PATH", smi_answering(tmp_path, rows)["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sysfs = tmp_path / "sys"
    for bus, node in (("0000:19:00.0", "0"), ("0000:3b:00.0", "1")):
        (sysfs / "bus/pci/devices" / bus).mkdir(parents=True)
        (sysfs / "bus/pci/devices" / bus / "numa_node").write_text(f"{node}\n")
    first = gpu_facts(sysfs=sysfs)
    assert first is not None and first["count"] == 2
    assert (first["sm_clock_mhz"], first["power_draw_w"], first["numa_node"]) == (345, 81.55, 0)
    second = gpu_facts({"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, sysfs=sysfs)
    assert second is not None
    assert (second["power_limit_w"], second["persistence"], second["pcie"]) == (
        500.0,
        False,
        "gen 1 x16 of gen 5 x16",
    )
    assert (second["bus_id"], second["numa_node"]) == ("00000000:3B:00.0", 1)
    assert (first["uuid"], second["uuid"]) == ("GPU-aaaa", "GPU-bbbb")  # which card, by itself
    assert Gpu.model_validate(second).power_limit_w == 500.0  # what run.json's model accepts


def test_a_machine_without_a_gpu_records_its_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    facts = collect(sys.executable, [], tmp_path)
    host = HostFacts.model_validate(facts["host"])
    assert host.gpu is None
    assert host.cpu_cores == os.cpu_count()
    assert host.cpu_usable == len(os.sched_getaffinity(0))
    assert host.cpu_model and host.cpu == f"{host.cpu_model} ({os.cpu_count()} cores)"
    assert host.cpu_signature is not None and host.cpu_signature.startswith("family ")
