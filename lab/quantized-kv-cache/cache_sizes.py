"""Step 3: the cache llama-server reserves with f16, q8_0 and q4_0 keys and values.

llama-server is started three times with the model's whole context (40,960 tokens) and one
cache format for keys and values each time (`-ctk T -ctv T`, flash attention on, as a quantized
value cache requires), then stopped once it is ready. Its log's own line says what it reserved:

    llama_kv_cache: size = 5760.00 MiB ( 40960 cells,  36 layers,  1/1 seqs), K (f16): 2880.00 MiB, V (f16): 2880.00 MiB

Each size is checked against the sum on paper, from the GGUF file's shapes: cells x layers x
(one key row + one value row), a row being 8 heads x 128 numbers in the format's blocks (q8_0:
32 numbers in 34 bytes, q4_0: 32 in 18). The log also says whether keys and values are rotated
before they are quantized (`attn_rot_k`, `attn_rot_v`), and nvidia-smi what the whole server
took on the GPU.

    python3 cache_sizes.py --gguf gguf/qwen3-8b-q8_0.gguf
    python3 cache_sizes.py --gguf gguf/qwen3-8b-tiny-q8_0.gguf --device cpu --tiny
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.results import write_results
from labkit.units import human
from llamakit import gguf, gpu, logs, tools
from llamakit.server import Launched

TYPES = ("f16", "q8_0", "q4_0")


def arguments(doc: str) -> argparse.ArgumentParser:
    """The options this lab's llama.cpp scripts share."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (every layer on the GPU) or cpu")
    parser.add_argument("--tiny", action="store_true", help="the shrunk model: smaller runs")
    parser.add_argument("--gguf", default="gguf/qwen3-8b-q8_0.gguf", help="the model file")
    parser.add_argument("--llama", help="llama.cpp folder (else $LLAMA_CPP_DIR, else the PATH)")
    parser.add_argument("--types", default=",".join(TYPES), help="cache formats, comma-separated")
    return parser


def gpu_args(device: str, bench: bool = False) -> list[str]:
    """Every layer on the GPU; or none, and the weights not repacked for the CPU: some virtual
    machines report AMX instructions that then trap ("Illegal instruction") in the repacked
    matrix products. llama-bench spells the option its own way."""
    if device.startswith("cuda"):
        return ["-ngl", "99"]
    return ["-ngl", "0", *(["--repack", "0"] if bench else ["-nr"])]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--ctx", type=int, help="cells (default 40,960, the model's context)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    folder = tools.llama_dir(args.llama)
    binary = tools.tool("llama-server", folder)
    built = tools.build_of(tools.version(binary))
    shapes = gguf.summary(args.gguf)
    ctx = args.ctx or shapes["context_length"]
    print(f"llama-server: {tools.shown(binary)}\n  {built['version']}")
    print(f"{Path(args.gguf).name}: {shapes['layers']} layers, {shapes['kv_heads']} key-value"
          f" heads of {shapes['head_dim_k']} numbers; a cache of {ctx:,} cells")  # fmt: skip
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "cells": ctx,
                               "llama_cpp": built, "types": {}}  # fmt: skip
    peaks: list[dict[str, Any]] = []
    for t in args.types.split(","):
        log = Path(f"server-{t}.log")
        cmd = ["-m", args.gguf, *gpu_args(args.device), "-fa", "on", "-np", "1", "-c", str(ctx),
               "-ctk", t, "-ctv", t, "-lv", "4"]  # fmt: skip
        with gpu.GpuMemory() as mem, Launched(binary, cmd, log) as server:
            time.sleep(0.5)  # nvidia-smi is polled every 100 ms: let it see the server whole
            text = server.text()
        kv = logs.kv_cache(text)
        per = gguf.kv_bytes_per_token(shapes, t)
        paper = ctx * per
        check(kv["cells"] == ctx, f"{t}: the server made {kv['cells']} cells, asked for {ctx}")
        check(
            (kv["k_type"], kv["v_type"]) == (t, t),
            f"{t}: the log names {kv['k_type']}, {kv['v_type']}",
        )
        check(abs(kv["bytes"] - paper) <= 0.005 * logs.MIB + 1, f"{t}: llama.cpp reserved"
              f" {kv['bytes']:,} B, cells x bytes per token = {paper:,} B")  # fmt: skip
        got = mem.result()
        peaks.append(got)
        results["types"][t] = {**{k: kv[k] for k in ("bytes", "k_bytes", "v_bytes", "cells",
                                                     "layers", "line")},
                               "bytes_per_token": per, "paper": paper,
                               "rotated": {k: int(v) for k, v in logs.rotation(text).items()},
                               "buffers": logs.buffers(text),
                               "gpu_memory": got}  # fmt: skip
        head, _, tail = kv["line"].partition("), ")  # llama.cpp's own line, on two lines
        print(f"\n-ctk {t} -ctv {t}:\n  {head}),\n      {tail}")
        print(f"  on paper: {ctx:,} cells x {per:,} B = {paper:,} B ({human(paper)}): the same")
        rot = results["types"][t]["rotated"]
        print(f"  keys rotated before quantizing: {'yes' if rot.get('k') else 'no'},"
              f" values: {'yes' if rot.get('v') else 'no'}")  # fmt: skip
        print(gpu.report(got, "the whole server", indent="  "))
    f16 = results["types"].get("f16")
    if f16:
        for t, row in results["types"].items():
            row["share_of_f16"] = row["bytes"] / f16["bytes"]
    results["gpu_memory"] = gpu.worst(peaks)
    results["peak_gpu_memory"] = results["gpu_memory"]["peak_used"]
    results["seconds"] = time.perf_counter() - t_start
    print(
        f"\nwrote {write_results('sizes', results)}; cache_sizes.py took {results['seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
