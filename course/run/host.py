"""Facts about the machine a run happens on: GPU, driver, CUDA, CPU, OS, Python, engine versions.

Standard library only: for a run on a remote host this file is sent there and run with the host's
`python3` (`python3 - PYTHON PACKAGE...`), so the facts are read by the same code on every host.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_ENGINE_QUERY = r"""
import importlib.metadata as m, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
out["python"] = sys.version.split()[0]
print(json.dumps(out))
"""


def visible(rows: list[list[str]], setting: str | None) -> list[list[str]]:
    """The nvidia-smi rows (index first) a process sees under CUDA_VISIBLE_DEVICES (by index or
    UUID); all rows when it is unset."""
    if setting is None:
        return rows
    wanted = [w.strip() for w in setting.split(",") if w.strip()]
    return [r for w in wanted for r in rows if w in (r[0], r[-1])]


SPEED_FIELDS = (
    "clocks.current.sm", "clocks.max.sm", "clocks.current.memory", "clocks.max.memory",
    "clocks.applications.graphics", "power.limit", "power.default_limit", "power.draw",
    "persistence_mode", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max", "pci.bus_id", "uuid",
)  # fmt: skip
"""What can explain a GPU's speed differing between hosts, asked of nvidia-smi apart from the
name and memory (a driver that refuses the query then costs these facts only)."""
SPEED_QUERY = ",".join(SPEED_FIELDS)
SYSFS = Path("/sys")


def _csv(smi: str, fields: str, header: bool = False) -> str:
    """nvidia-smi's CSV answer to a query ('' when it fails), with its header line if asked."""
    style = "csv,nounits" if header else "csv,noheader,nounits"
    try:
        return subprocess.run(
            [smi, f"--query-gpu={fields}", f"--format={style}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return ""


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]


def parse_query(text: str) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=... --format=csv` output, header first: one dict per GPU keyed by
    field name (the header's `[MHz]` units dropped; with or without `nounits`)."""
    rows = _rows(text)
    if not rows:
        return []
    names = [re.sub(r"\s*\[[^\]]*\]$", "", name) for name in rows[0]]
    return [dict(zip(names, row, strict=False)) for row in rows[1:]]


def _number(cell: str) -> float | None:
    """A cell of nvidia-smi's CSV as a number (a unit after it ignored: `345 MHz`, `700.00 W`);
    None for `[N/A]`, `[Not Supported]` and such."""
    try:
        return float(cell.split()[0]) if cell.strip() else None
    except ValueError:
        return None


def speed_facts(cells: dict[str, str], sysfs: Path = SYSFS) -> dict[str, Any]:
    """One GPU's answer to SPEED_FIELDS as the record's fields (clocks in MHz, power in W, the
    PCIe link, the NUMA node read from sysfs by the bus id)."""
    facts: dict[str, Any] = {}
    for key, field in (
        ("sm_clock_mhz", "clocks.current.sm"),
        ("sm_clock_max_mhz", "clocks.max.sm"),
        ("memory_clock_mhz", "clocks.current.memory"),
        ("memory_clock_max_mhz", "clocks.max.memory"),
        ("applications_clock_mhz", "clocks.applications.graphics"),
    ):
        number = _number(cells.get(field, ""))
        facts[key] = None if number is None else round(number)
    for key, field in (
        ("power_limit_w", "power.limit"),
        ("power_default_limit_w", "power.default_limit"),
        ("power_draw_w", "power.draw"),
    ):
        facts[key] = _number(cells.get(field, ""))
    mode = cells.get("persistence_mode", "").lower()
    facts["persistence"] = {"enabled": True, "disabled": False}.get(mode)
    gen, gen_max, width, width_max = (
        _number(cells.get(f"pcie.link.{k}", ""))
        for k in ("gen.current", "gen.max", "width.current", "width.max")
    )
    link = f"gen {gen:g} x{width:g}" if gen is not None and width is not None else None
    below = (gen_max, width_max) != (gen, width) and None not in (gen_max, width_max)
    facts["pcie"] = f"{link} of gen {gen_max:g} x{width_max:g}" if link and below else link
    bus = cells.get("pci.bus_id", "")
    facts["bus_id"] = bus or None
    facts["uuid"] = cells.get("uuid") or None
    facts["numa_node"] = numa_node(bus, sysfs) if bus else None
    return facts


def numa_node(bus_id: str, sysfs: Path = SYSFS) -> int | None:
    """The NUMA node of a PCI device (nvidia-smi's `00000000:19:00.0` is sysfs's `0000:19:00.0`);
    None when the kernel does not say (-1: one node, or no NUMA)."""
    match = re.match(
        r"^(?:[0-9a-fA-F]{4})?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)$", bus_id
    )
    if match is None:
        return None
    try:
        node = int((sysfs / "bus/pci/devices" / match.group(1).lower() / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def gpu_facts(env: dict[str, str] | None = None, sysfs: Path = SYSFS) -> dict[str, Any] | None:
    """The first GPU the steps see, as nvidia-smi reports it (name, memory, driver, CUDA, count of
    GPUs the steps see, and `speed_facts`), or None. CUDA_VISIBLE_DEVICES (in `env`, else here)
    narrows the count."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    rows = _rows(_csv(smi, "index,name,memory.total,driver_version,uuid"))
    setting = (env or {}).get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    rows = visible([r for r in rows if len(r) >= 5], setting)
    if not rows:
        return None
    try:
        header = subprocess.run(
            [smi], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (subprocess.SubprocessError, OSError):
        header = ""
    name, memory, driver = rows[0][1:4]
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    speed = [
        r for r in parse_query(_csv(smi, SPEED_QUERY, header=True)) if r.get("uuid") == rows[0][-1]
    ]
    return {
        "name": name,
        "memory_mib": int(float(memory)) if re.match(r"^[\d.]+$", memory) else None,
        "driver": driver,
        "cuda": cuda.group(1) if cuda else None,
        "count": len(rows),
        **(speed_facts(speed[0], sysfs) if speed else {}),
    }


def gpu_slug(gpu: dict[str, Any] | None) -> str:
    """A short name for run ids: 'NVIDIA H200' -> 'h200', 'NVIDIA GeForce RTX 4090' ->
    'rtx-4090'.
    """
    if not gpu:
        return "cpu"
    name = re.sub(r"^(NVIDIA|AMD)\s+", "", gpu["name"], flags=re.IGNORECASE)
    name = re.sub(r"\b(GeForce|Tesla|Radeon)\s+", "", name, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    count = gpu.get("count") or 1
    return f"{slug}x{count}" if count > 1 else slug or "gpu"


def cpu_model() -> str:
    """The processor's model name, as /proc/cpuinfo gives it where present."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        match = re.search(
            r"^model name\s*:\s*(.+)$", cpuinfo.read_text(errors="replace"), re.MULTILINE
        )
        if match:
            model = match.group(1).strip()
    return model


def cpu_signature() -> str | None:
    """The processor's family, model and stepping (`family 6 model 207 stepping 2`): in a virtual
    machine the model name is often generic (`Intel(R) Xeon(R) Processor`), these are not."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return None
    text = cpuinfo.read_text(errors="replace")
    found = [
        re.search(rf"^{key}\s*:\s*(\S+)", text, re.MULTILINE)
        for key in ("cpu family", "model", "stepping")
    ]
    if not all(found):
        return None
    family, model, stepping = (m.group(1) for m in found if m)
    return f"family {family} model {model} stepping {stepping}"


def cpu_name() -> str:
    """The processor's model name and core count."""
    return f"{cpu_model()} ({os.cpu_count()} cores)"


def cpu_facts(sysfs: Path = SYSFS) -> dict[str, Any]:
    """The host's processor as speed depends on it: model, logical cores, the cores this process
    may use (a container's share), NUMA nodes."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    nodes = len(list((sysfs / "devices/system/node").glob("node[0-9]*")))
    return {
        "cpu_model": cpu_model(),
        "cpu_signature": cpu_signature(),
        "cpu_cores": os.cpu_count(),
        "cpu_usable": usable,
        "numa_nodes": nodes or None,
    }


def os_name() -> str:
    """The operating system, as /etc/os-release names it where present."""
    release = Path("/etc/os-release")
    if release.is_file():
        match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?$', release.read_text(), re.MULTILINE)
        if match:
            return f"{match.group(1)} (kernel {platform.release()})"
    return platform.platform()


def engine_versions(
    python: str, packages: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, str | None], str]:
    """Installed versions of the engine packages, and the Python version, as the lab's interpreter
    sees
    them.
    """
    exe = shutil.which(python) if os.path.sep not in python else python
    if exe is None:
        return {p: None for p in packages}, "not found"
    if not packages and not env and os.path.realpath(exe) == os.path.realpath(sys.executable):
        return {}, sys.version.split()[0]  # nothing to ask that this process does not know
    try:
        done = subprocess.run(
            [exe, "-c", _ENGINE_QUERY, *packages],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=cwd,
            check=True,
            env={**os.environ, **(env or {})},
        )
        found = json.loads(done.stdout)
    except (subprocess.SubprocessError, OSError, json.JSONDecodeError):
        return {p: None for p in packages}, "not found"
    python_version = found.pop("python")
    return {p: found.get(p) for p in packages}, python_version


def host_facts(gpu: dict[str, Any] | None, python_version: str) -> dict[str, Any]:
    """The host block of run.json."""
    return {
        "gpu": gpu,
        "cpu": cpu_name(),
        **cpu_facts(),
        "os": os_name(),
        "python": python_version,
        "machine": platform.machine(),
    }


def collect(
    python: str, packages: list[str], cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Every fact a run records about its host: `gpu`, `engine`, `python` and the `host` block."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # both start a process: let them overlap
        gpu_query = pool.submit(gpu_facts, env)
        engine, python_version = engine_versions(python, packages, cwd, env)
        gpu = gpu_query.result()
    return {
        "gpu": gpu,
        "engine": engine,
        "python": python_version,
        "host": host_facts(gpu, python_version),
    }


if __name__ == "__main__":  # on a remote host: python3 - PYTHON PACKAGE... < host.py
    print(json.dumps(collect(sys.argv[1], sys.argv[2:], Path.cwd())))
