"""Host facts: the GPU the steps see, read through nvidia-smi (a stand-in script here: no GPU)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from course.record.models import Gpu, HostFacts
from course.run.host import SPEED_QUERY, collect, gpu_facts, gpu_slug, speed_facts

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


# What `nvidia-smi --query-gpu=<SPEED_QUERY> --format=csv,noheader,nounits` prints: two H200s,
# the second power-capped, its link trained down; a GeForce card on an older driver; a laptop
# GPU whose driver reports no power figures.
H200S = """\
0, 345, 1980, 3201, 3201, 700.00, 75.43, Enabled, 5, 5, 16, 16, 00000000:19:00.0, GPU-aaaa
1, 1980, 1980, 3201, 3201, 500.00, 412.87, Disabled, 1, 5, 16, 16, 00000000:3B:00.0, GPU-bbbb
"""
GEFORCE = (
    "0, 1965, 2100, 7199, 7000, 200.00, 176.98, Disabled, 3, 3, 8, 16, 00000000:0A:00.0, GPU-22b2"
)
LAPTOP = (
    "0, 1395, 2100, 6001, 6001, [N/A], [N/A], [Not Supported], 4, 4, 8, 8, 00000000:01:00.0, "
    "GPU-9f1e"
)


def smi_answering(folder: Path, speed: str) -> dict[str, str]:
    """A stand-in nvidia-smi: the base query as `SMI`, the speed query with these CSV lines."""
    env = fake_smi(folder)
    script = folder / "nvidia-smi"
    (folder / "speed.csv").write_text(speed)
    answer = f'if [ "$1" = "--query-gpu={SPEED_QUERY}" ]; then\n  cat {folder / "speed.csv"}\n'
    script.write_text(SMI.replace('if [ "$1"', answer + 'elif [ "$1"', 1))
    return env


def test_speed_facts_from_nvidia_smi_and_sysfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", smi_answering(tmp_path, H200S)["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sysfs = tmp_path / "sys"
    for bus, node in (("0000:19:00.0", "0"), ("0000:3b:00.0", "1")):
        (sysfs / "bus/pci/devices" / bus).mkdir(parents=True)
        (sysfs / "bus/pci/devices" / bus / "numa_node").write_text(f"{node}\n")
    first = gpu_facts(sysfs=sysfs)
    assert first is not None and first["count"] == 2
    assert {k: first[k] for k in list(first)[5:]} == {
        "sm_clock_mhz": 345,
        "sm_clock_max_mhz": 1980,
        "memory_clock_mhz": 3201,
        "memory_clock_max_mhz": 3201,
        "power_limit_w": 700.0,
        "power_draw_w": 75.43,
        "persistence": True,
        "pcie": "gen 5 x16",
        "bus_id": "00000000:19:00.0",
        "numa_node": 0,
    }
    second = gpu_facts({"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, sysfs=sysfs)
    assert second is not None
    assert (second["power_limit_w"], second["persistence"], second["pcie"]) == (
        500.0,
        False,
        "gen 1 x16 of gen 5 x16",
    )
    assert second["numa_node"] == 1
    assert Gpu.model_validate(second).power_limit_w == 500.0  # what run.json's model accepts


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            GEFORCE,
            {"sm_clock_mhz": 1965, "power_draw_w": 176.98, "persistence": False,
             "pcie": "gen 3 x8 of gen 3 x16", "numa_node": None},
        ),
        (
            LAPTOP,
            {"sm_clock_mhz": 1395, "power_limit_w": None, "power_draw_w": None,
             "persistence": None, "pcie": "gen 4 x8", "numa_node": None},
        ),
    ],
)  # fmt: skip
def test_speed_facts_without_every_field(line: str, expected: dict[str, object]) -> None:
    facts = speed_facts([c.strip() for c in line.split(",")], Path("/nonexistent"))
    assert {k: facts[k] for k in expected} == expected


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
