"""Host facts: the GPU the steps see, read through nvidia-smi (a stand-in script here: no GPU)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from course.run.host import gpu_facts, gpu_slug

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
