"""Helpers for the llama.cpp steps: finding its programs, reading GGUF files and server logs.

Standard library only: the llama.cpp steps run without PyTorch (llama_gguf.py excepted).
Where llama.cpp comes from, in order: --llama DIR, $LLAMA_CPP_DIR, then the PATH. DIR is what
llama_build.sh built: DIR/bin/llama-server ... and DIR/src/llama.cpp/convert_hf_to_gguf.py.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Self

MIB = 2**20
# ggml's tensor types (ggml.h, enum ggml_type): name, numbers per block, bytes per block.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    30: ("BF16", 1, 2),
}
# bytes of one cached number for llama.cpp's --cache-type-k/-v names
CACHE_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def llama_dir(given: str | None) -> Path | None:
    """The folder llama_build.sh built into, from --llama or $LLAMA_CPP_DIR; None: use the PATH."""
    name = given or os.environ.get("LLAMA_CPP_DIR")
    return Path(name).resolve() if name else None


def tool(name: str, folder: Path | None) -> str:
    """The path of a llama.cpp program (llama-server, llama-bench, llama-quantize)."""
    if folder is not None:
        for cand in (folder / "bin" / name, folder / name, folder / "build" / "bin" / name):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    found = shutil.which(name)
    if not found:
        where = f" in {folder}/bin" if folder else ""
        raise SystemExit(
            f"{name} not found{where} or on the PATH: build llama.cpp with llama_build.sh "
            "(or download a release) and pass --llama DIR or set LLAMA_CPP_DIR"
        )
    return found


def source_dir(folder: Path | None) -> Path | None:
    """The llama.cpp source tree (for convert_hf_to_gguf.py and gguf-py), when there is one."""
    if folder is None:
        return None
    for cand in (folder / "src" / "llama.cpp", folder):
        if (cand / "convert_hf_to_gguf.py").is_file():
            return cand
    return None


def version(binary: str) -> str:
    """The first line of `binary --version`, e.g. 'version: 0.5.0-dev (build 11312, commit ...)'."""
    out = subprocess.run(
        [binary, "--version"], check=False, capture_output=True, text=True, timeout=60
    )
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version:")]
    return lines[0] if lines else "version unknown"


def build_of(line: str) -> dict[str, Any]:
    """The llama.cpp build a `--version` line names, in either form llama.cpp prints:
    'version: 0.5.0-dev (build 11312, commit 0c1e57098)' or 'version: 11312 (0c1e57098)' ->
    {"version": the line, "build_number": 11312, "build_commit": "0c1e57098"} (None where the
    line does not say). A Python package such as llama-cpp-python carries one such build."""
    got = re.search(r"build (\d+), commit (\w+)", line) or re.search(
        r"version:\s*(\d+)\s*\((\w+)\)", line
    )
    number, commit = (int(got.group(1)), got.group(2)) if got else (None, None)
    return {"version": line, "build_number": number, "build_commit": commit}


# --- GGUF files ----------------------------------------------------------------------------

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


class _Reader:
    """Little-endian reads from a memory-mapped GGUF file."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.pos = buf, 0

    def scalar(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.scalar("<Q")
        text = self.buf[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value(self, kind: int, keep: bool = True) -> Any:
        if kind == 8:
            return self.string()
        if kind == 9:
            item, n = self.scalar("<I"), self.scalar("<Q")
            if item in _SCALARS and item != 8:  # skip a numeric array in one jump
                size = struct.calcsize(_SCALARS[item])
                start, self.pos = self.pos, self.pos + n * size
                return (
                    list(struct.unpack_from(f"<{n}{_SCALARS[item][1]}", self.buf, start))
                    if keep
                    else n
                )
            items = [self.value(item, keep) for _ in range(n)]
            return items if keep else n
        return self.scalar(_SCALARS[kind])


def read_gguf(path: str | Path) -> dict[str, Any]:
    """A GGUF file's metadata (arrays shortened to their length) and its tensors' types and bytes.

    Each tensor's bytes come from its type's block size when the type is known, else from the
    distance to the next tensor's offset (which includes at most `alignment - 1` bytes of padding).
    """
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        r = _Reader(buf)
        if buf[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        r.pos = 4
        gguf_version = r.scalar("<I")
        n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = r.string()
            kind = r.scalar("<I")
            meta[key] = r.value(kind, keep=kind != 9)  # arrays (token lists): their length only
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.scalar("<Q") for _ in range(r.scalar("<I"))]
            infos.append((name, dims, r.scalar("<I"), r.scalar("<Q")))
        align = int(meta.get("general.alignment", 32))
        data_start = (r.pos + align - 1) // align * align
    ends = sorted(off for *_, off in infos)[1:] + [size - data_start]
    next_offset = dict(zip(sorted(off for *_, off in infos), ends))
    tensors = {}
    for name, dims, kind, offset in infos:
        count = 1
        for d in dims:
            count *= d
        tname, block, block_bytes = GGML_TYPES.get(kind, (f"type{kind}", 0, 0))
        nbytes = count // block * block_bytes if block else next_offset[offset] - offset
        tensors[name] = {"type": tname, "shape": dims, "numbers": count, "bytes": nbytes}
    return {"version": gguf_version, "file_bytes": size, "metadata": meta, "tensors": tensors}


def gguf_summary(path: str | Path) -> dict[str, Any]:
    """What a decode step reads from a GGUF file, and what one cached token costs (f16 cache).

    Of the embedding table a decode step reads one row, so it is left out when the file has a
    separate output matrix; with tied embeddings (no output.weight) the same table is the output
    matrix and is read whole.
    """
    g = read_gguf(path)
    meta, tensors = g["metadata"], g["tensors"]
    arch = meta["general.architecture"]
    tensor_bytes = sum(t["bytes"] for t in tensors.values())
    numbers = sum(t["numbers"] for t in tensors.values())
    embed = tensors.get("token_embd.weight", {"bytes": 0})["bytes"]
    read = tensor_bytes - embed if "output.weight" in tensors else tensor_bytes
    layers = int(meta[f"{arch}.block_count"])
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", meta[f"{arch}.attention.head_count"])
    head_k = int(meta.get(f"{arch}.attention.key_length", 0)) or (
        int(meta[f"{arch}.embedding_length"]) // int(meta[f"{arch}.attention.head_count"])
    )
    head_v = int(meta.get(f"{arch}.attention.value_length", head_k))
    types: dict[str, int] = {}
    for t in tensors.values():
        types[t["type"]] = types.get(t["type"], 0) + t["bytes"]
    return {
        "architecture": arch,
        "file_bytes": g["file_bytes"],
        "tensor_bytes": tensor_bytes,
        "weights": numbers,
        "bytes_per_weight": tensor_bytes / numbers,
        "bits_per_weight": 8 * tensor_bytes / numbers,
        "read_bytes_per_token": read,
        "tied_embeddings": "output.weight" not in tensors,
        "layers": layers,
        "kv_heads": int(kv_heads),
        "head_dim_k": head_k,
        "head_dim_v": head_v,
        "context_length": int(meta.get(f"{arch}.context_length", 0)),
        "file_type": int(meta.get("general.file_type", -1)),
        "bytes_by_type": types,
    }


def kv_bytes_per_token(summary: dict[str, Any], cache_type: str = "f16") -> float:
    """Keys and values of one token in every layer, at llama.cpp's cache number format."""
    per_layer = summary["kv_heads"] * (summary["head_dim_k"] + summary["head_dim_v"])
    return summary["layers"] * per_layer * CACHE_TYPE_BYTES[cache_type]


# --- llama-server's log ---------------------------------------------------------------------

# src/llama-kv-cache.cpp, printed at LLAMA_LOG_INFO when the cache is made, e.g.
# llama_kv_cache: size =  448.00 MiB (  4096 cells,  28 layers,  4/1 seqs), K (f16):  224.00 MiB, V (f16):  224.00 MiB
KV_LINE = re.compile(
    r"llama_kv_cache(?:_unified)?: size = +(?P<mib>[\d.]+) MiB \( *(?P<cells>\d+) cells, +"
    r"(?P<layers>\d+) layers, *(?P<seqs>\d+)/ *(?P<streams>\d+) seqs\), "
    r"K \((?P<k_type>\w+)\): +(?P<k_mib>[\d.]+) MiB, V \((?P<v_type>\w+)\): +(?P<v_mib>[\d.]+) MiB"
)
# llama_kv_cache:      CUDA0 KV buffer size =   448.00 MiB
KV_BUFFER = re.compile(
    r"llama_kv_cache(?:_unified)?: +(?P<buffer>\S+) KV buffer size = +(?P<mib>[\d.]+) MiB"
)
CTX_LINE = re.compile(r"llama_context: n_ctx(?:_seq)? += (\d+)")


def parse_kv_log(text: str) -> list[dict[str, Any]]:
    """Every KV-cache size line of a llama.cpp log, as numbers (bytes from MiB with 2 decimals).

    llama.cpp prints these at verbosity 4 (`-lv 4`, "trace"): the library's INFO messages are
    mapped to that level by common/log.cpp, above the default threshold 3.
    """
    found = []
    for m in KV_LINE.finditer(text):
        mib, k_mib, v_mib = float(m["mib"]), float(m["k_mib"]), float(m["v_mib"])
        found.append(
            {
                "size_mib": mib,
                "bytes": round(mib * MIB),
                "cells": int(m["cells"]),
                "layers": int(m["layers"]),
                "seqs": int(m["seqs"]),
                "streams": int(m["streams"]),  # 1 when all sequences share one cache (kv_unified)
                "k_type": m["k_type"],
                "v_type": m["v_type"],
                "k_bytes": round(k_mib * MIB),
                "v_bytes": round(v_mib * MIB),
                "bytes_per_cell": mib * MIB / int(m["cells"]),
            }
        )
    buffers = [
        {"buffer": m["buffer"], "bytes": round(float(m["mib"]) * MIB)}
        for m in KV_BUFFER.finditer(text)
    ]
    for entry in found:
        entry["buffers"] = buffers
    return found


def kv_from_log(text: str) -> dict[str, Any]:
    """The main model's KV-cache line of a log (the first), or stop with a hint when none is there."""
    found = parse_kv_log(text)
    if not found:
        raise SystemExit(
            "no 'llama_kv_cache: size = ...' line in the log: start llama-server with -lv 4 "
            "(the line is logged at verbosity 4, above the default 3)"
        )
    return found[0]


# --- GPU memory, as nvidia-smi sees it ------------------------------------------------------


class GpuMemory:
    """Polls nvidia-smi's memory.used (whole device, all processes) while a block runs.

    `peak` is the highest reading and `idle` the reading before; their difference is what the
    program under test took, to within the 100 ms polling. None on a machine without nvidia-smi.
    """

    def __init__(self, index: int = 0, period_ms: int = 100) -> None:
        self.cmd = [
            "nvidia-smi",
            f"--id={index}",
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
        ]
        self.period = period_ms / 1000
        self.available = shutil.which("nvidia-smi") is not None
        self.idle: int | None = None
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> int | None:
        """memory.used now, in bytes (nvidia-smi reports MiB)."""
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

    def result(self) -> dict[str, int | None]:
        """Peak, idle and their difference, in bytes (None without a GPU)."""
        taken = self.peak - self.idle if self.peak is not None and self.idle is not None else None
        return {"peak_used": self.peak, "idle_used": self.idle, "peak_taken": taken}


def dump(data: Any) -> str:
    """JSON text as the results files hold it."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
