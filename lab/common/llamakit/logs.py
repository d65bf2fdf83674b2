"""What llama.cpp's programs print about memory, read back as numbers.

llama-server prints these lines when it loads a model, at log verbosity 4 (`-lv 4`, "trace": the
library's INFO messages are mapped to that level by common/log.cpp, one above the default 3):

    load_tensors:        CUDA0 model buffer size =  8148.56 MiB
    llama_kv_cache:      CUDA0 KV buffer size =  4608.00 MiB
    llama_kv_cache: size = 4608.00 MiB ( 32768 cells,  36 layers,  1/1 seqs), K (f16): 2304.00 MiB, V (f16): 2304.00 MiB
    llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 128
    sched_reserve:      CUDA0 compute buffer size =   304.75 MiB

(src/llama-kv-cache.cpp, src/llama-model.cpp, src/llama-context.cpp). Every size is printed in
MiB with two decimals, so a byte count read back is exact to 0.005 MiB.
"""

from __future__ import annotations

import re
from typing import Any

MIB = 2**20

KV_LINE = re.compile(
    r"llama_kv_cache(?:_unified)?: size = +(?P<mib>[\d.]+) MiB \( *(?P<cells>\d+) cells, +"
    r"(?P<layers>\d+) layers, *(?P<seqs>\d+)/ *(?P<streams>\d+) seqs\), "
    r"K \((?P<k_type>\w+)\): +(?P<k_mib>[\d.]+) MiB, V \((?P<v_type>\w+)\): +(?P<v_mib>[\d.]+) MiB"
)
BUFFER = re.compile(
    r"(?P<who>load_tensors|llama_kv_cache(?:_unified)?|llama_context|sched_reserve): +"
    r"(?P<device>\S+) +(?P<kind>model|KV|compute|output) buffer size = +(?P<mib>[\d.]+) MiB"
)
ROTATION = re.compile(r"llama_kv_cache: attn_rot_(?P<which>[kv]) = (?P<on>\d)")
SLOTS = re.compile(
    r"initializing, n_slots = (?P<slots>\d+), n_ctx_slot = (?P<ctx>\d+), kv_unified = '(?P<u>\w+)'"
)


def mib_bytes(text: str) -> int:
    """'448.00' (MiB, as the log prints it) in bytes."""
    return round(float(text) * MIB)


def kv_lines(text: str) -> list[dict[str, Any]]:
    """Every KV-cache size line of a log, as numbers."""
    found = []
    for m in KV_LINE.finditer(text):
        cells = int(m["cells"])
        found.append(
            {
                "bytes": mib_bytes(m["mib"]),
                "cells": cells,
                "layers": int(m["layers"]),
                "seqs": int(m["seqs"]),
                "streams": int(m["streams"]),  # 1 when all sequences share one cache (kv_unified)
                "k_type": m["k_type"],
                "v_type": m["v_type"],
                "k_bytes": mib_bytes(m["k_mib"]),
                "v_bytes": mib_bytes(m["v_mib"]),
                # a cache per slot (-np N without --kv-unified) prints each stream's cells
                "total_cells": cells * int(m["streams"]),
                "bytes_per_cell": float(m["mib"]) * MIB / (cells * int(m["streams"])),
                "line": m.group(0),
            }
        )
    return found


def kv_cache(text: str) -> dict[str, Any]:
    """The model's KV-cache line (the first), or stop with the flag that prints it."""
    found = kv_lines(text)
    if not found:
        raise SystemExit(
            "no 'llama_kv_cache: size = ...' line in the log: start llama-server with -lv 4 "
            "(the line is logged at verbosity 4, above the default 3)"
        )
    return found[0]


def buffers(text: str) -> dict[str, dict[str, int]]:
    """Bytes of each kind of buffer (model, KV, compute, output) by device ('CUDA0', 'CPU',
    'CUDA_Host', 'CPU_Mapped'), summed over the lines that name them."""
    out: dict[str, dict[str, int]] = {}
    for m in BUFFER.finditer(text):
        kind = out.setdefault(m["kind"], {})
        kind[m["device"]] = kind.get(m["device"], 0) + mib_bytes(m["mib"])
    return out


def rotation(text: str) -> dict[str, bool]:
    """Whether llama.cpp rotates keys and values before quantizing them (a Hadamard transform,
    used when the cache is quantized and a head has a multiple of 64 numbers)."""
    return {f"{m['which']}": m["on"] == "1" for m in ROTATION.finditer(text)}


def slots(text: str) -> dict[str, Any] | None:
    """llama-server's slots: how many, the context of each, whether they share one cache."""
    m = SLOTS.search(text)
    if m is None:
        return None
    return {"slots": int(m["slots"]), "ctx_per_slot": int(m["ctx"]), "unified": m["u"] == "true"}
