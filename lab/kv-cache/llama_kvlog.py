"""llama.cpp step 2: the KV cache llama-server made, read from its log and checked against paper.

llama-server prints one line when it makes its KV cache, at log verbosity 4 (`-lv 4`):

    llama_kv_cache: size =  448.00 MiB (  4096 cells,  28 layers,  4/1 seqs), K (f16): 224.00 MiB, ...

(src/llama-kv-cache.cpp logs it with LLAMA_LOG_INFO, which common/log.cpp maps to verbosity 4,
"trace", one above the default 3; `-v` shows it too, among every debug message.) This script
reads that line from each log it is given, and compares the size with what step 1's arithmetic
says a cache of that many cells costs: cells x bytes per token from the model's config.json.

    llama-server -m gguf/qwen3-0_6b-bf16.gguf -ngl 99 -c 4096 -lv 4 2>&1 | tee server-4096.log
    python3 llama_kvlog.py server-4096.log server-32768.log --model Qwen3-0.6B
    python3 llama_kvlog.py server-4096.log --model Qwen3-0.6B --tiny
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.configs import head_size, kv_bytes_per_token, kv_heads, tiny_config
from labkit.results import write_results
from labkit.units import human

from kvlab import MODELS, config_of
from llamakit.gguf import kv_bytes_per_token as llama_bytes_per_token
from llamakit.logs import MIB, buffers, kv_cache

KEYS = {folder: key for key, folder in MODELS.items()}


def read_log(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The KV line of one log, with the size that config.json predicts for its cells and formats."""
    text = path.read_text(errors="replace")
    kv = kv_cache(text)
    kv["buffers"] = [{"buffer": dev, "bytes": b} for dev, b in buffers(text).get("KV", {}).items()]
    # K and V may be stored in other formats (--cache-type-k/-v): per layer one row of all the
    # key-value heads in each one's format, as llama.cpp lays out its cache (f16: step 1's sum)
    shape = {"layers": cfg["num_hidden_layers"], "kv_heads": kv_heads(cfg),
             "head_dim_k": head_size(cfg), "head_dim_v": head_size(cfg)}  # fmt: skip
    per_token = llama_bytes_per_token(shape, kv["k_type"].lower(), kv["v_type"].lower())
    predicted = kv["total_cells"] * per_token  # cells x streams: one cache per slot, or one
    kv.update(log=path.name, bytes_per_token_paper=per_token, predicted_bytes=predicted)
    check(
        kv["layers"] == cfg["num_hidden_layers"],
        f"{path.name}: {kv['layers']} layers with a cache, the config has {cfg['num_hidden_layers']}",
    )
    # the log prints MiB with two decimals: a difference under 0.005 MiB is rounding
    check(
        abs(kv["bytes"] - predicted) <= 0.005 * MIB + 1,
        f"{path.name}: llama.cpp's cache is {kv['bytes']:,} B, cells x bytes per token = {predicted:,} B",
    )
    check(
        abs(kv["k_bytes"] + kv["v_bytes"] - kv["bytes"]) <= 0.01 * MIB + 1,
        f"{path.name}: K + V != size",
    )
    return kv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="llama-server logs (started with -lv 4)")
    parser.add_argument("--model", default="Qwen3-0.6B", choices=list(KEYS))
    parser.add_argument("--tiny", action="store_true", help="the server ran the shrunk model")
    parser.add_argument("--name", default="llama_kv", help="results/<name>.json")
    args = parser.parse_args()
    cfg = tiny_config(config_of(args.model), vocab=None) if args.tiny else config_of(args.model)
    per_token = kv_bytes_per_token(cfg)
    print(
        f"{args.model}{' (--tiny)' if args.tiny else ''}: {per_token:,} bytes per token on paper (16-bit)"
    )
    results: dict[str, Any] = {
        "model": args.model,
        "tiny": args.tiny,
        "bytes_per_token": per_token,
        "cells": {},
    }
    print(f"  {'log':<24} {'cells':>8} {'K, V':>10} {'llama.cpp':>12} {'on paper':>12} {'seqs':>5}")
    for path in args.logs:
        kv = read_log(path, cfg)
        results["cells"][str(kv["cells"])] = kv
        print(
            f"  {path.name:<24} {kv['cells']:>8,} {kv['k_type'] + ', ' + kv['v_type']:>10} "
            f"{human(kv['bytes']):>12} {human(kv['predicted_bytes']):>12} {kv['seqs']:>5}"
        )
        for buf in kv["buffers"]:
            print(f"      buffer {buf['buffer']}: {human(buf['bytes'])}")
    path = write_results(args.name, results)
    print(f"the sizes agree with cells x {per_token:,} B; wrote {path}")


if __name__ == "__main__":
    main()
