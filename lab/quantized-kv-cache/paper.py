"""Step 1: what 8-bit and 4-bit keys and values take, and what they should buy, on paper.

llama.cpp stores a quantized cache in blocks of 32 numbers, each block with its own scale: q8_0
keeps 32 one-byte integers and a 2-byte scale (34 bytes, 8.5 bits a number), q4_0 32 four-bit
integers and a 2-byte scale (18 bytes, 4.5 bits), f16 2 bytes a number. For Qwen3-8B (36 layers,
8 key-value heads of 128 numbers) that gives each token's keys and values, the cache of a whole
context, how many conversations of 32,768 tokens fit beside the weights on a 24 GB card, and how
much faster a decode step should be when it reads fewer bytes: every new token reads the weights
once and every cached key and value once, so at depth d it reads weights + d x bytes per token.

    python3 paper.py
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from labkit import facts
from labkit.configs import load_config
from labkit.results import write_results
from labkit.units import human
from llamakit import gguf, qwen3

TYPES = ("f16", "q8_0", "q4_0")
CONTEXTS = (4096, 32768, 40960)
DEPTHS = (0, 8192, 16384, 32768)
CONVERSATION = 32768
TIMED = 64  # tokens llama-bench times after each depth: the bound is taken at their middle


def shapes(cfg: dict[str, Any]) -> dict[str, int]:
    """The numbers that size the cache, as llama.cpp reads them from the GGUF file."""
    head = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    return {"layers": cfg["num_hidden_layers"], "kv_heads": cfg["num_key_value_heads"],
            "head_dim_k": head, "head_dim_v": head}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    cfg = load_config(Path("models") / "Qwen3-8B" / "config.json")
    s = shapes(cfg)
    numbers = 2 * s["layers"] * s["kv_heads"] * s["head_dim_k"]  # keys and values of a token
    room = facts.room("rtx-4090")
    w = {"q8_0": qwen3.tensor_bytes(cfg, "Q8_0"), "bf16": qwen3.tensor_bytes(cfg, "BF16")}
    results: dict[str, Any] = {"device": "cpu", "tiny": False, "numbers_per_token": numbers,
                               "weights": w, "room_24gb": room.bytes, "types": {}}  # fmt: skip
    print(f"Qwen3-8B: {s['layers']} layers x {s['kv_heads']} key-value heads x {s['head_dim_k']}"
          f" numbers, keys and values: {numbers:,} numbers a token")  # fmt: skip
    print(f"  {'cache':<6} {'bytes/token':>12} {'bits/number':>12} "
          + " ".join(f"{f'{c:,} tokens':>14}" for c in CONTEXTS))  # fmt: skip
    for t in TYPES:
        per = gguf.kv_bytes_per_token(s, t)
        row: dict[str, Any] = {"bytes_per_token": per, "bits_per_number": 8 * per / numbers,
                               "cache": {str(c): c * per for c in CONTEXTS}}  # fmt: skip
        for fmt, wb in w.items():
            left = room.bytes - wb["bytes"]
            row[f"conversations_{fmt}"] = left // (CONVERSATION * per)
        depths = {}
        for d in DEPTHS:
            read = w["q8_0"]["read"] + (d + (TIMED - 1) / 2) * per
            depths[str(d)] = {"bytes_read": read}
        row["depths"] = depths
        results["types"][t] = row
        print(f"  {t:<6} {per:>12,} {row['bits_per_number']:>12.2f} "
              + " ".join(f"{human(c * per):>14}" for c in CONTEXTS))  # fmt: skip
    f16 = results["types"]["f16"]
    for t in TYPES:  # a decode step's bytes against f16's at the same depth, and against depth 0
        row = results["types"][t]
        for d, e in row["depths"].items():
            e["speedup_vs_f16"] = f16["depths"][d]["bytes_read"] / e["bytes_read"]
            e["slowdown_vs_0"] = e["bytes_read"] / row["depths"]["0"]["bytes_read"]
        row["saved_vs_f16"] = 1 - row["bytes_per_token"] / f16["bytes_per_token"]
    print("\n" + textwrap.fill(f"on {room.text}, beside the weights:", 98))
    for fmt, wb in w.items():
        fits = ", ".join(f"{t} {results['types'][t][f'conversations_{fmt}']}" for t in TYPES)
        print(f"  {fmt} weights ({human(wb['bytes'])}): conversations of {CONVERSATION:,} tokens:"
              f" {fits}")  # fmt: skip
    print(f"\na decode step reads the Q8_0 weights ({human(w['q8_0']['read'])}) and the cache;")
    print("on paper, how much faster than with f16 at the same depth:")
    print(f"  {'depth':>8} " + " ".join(f"{t:>8}" for t in TYPES))
    for d in DEPTHS:
        print(
            f"  {d:>8,} "
            + " ".join(
                f"{results['types'][t]['depths'][str(d)]['speedup_vs_f16']:>7.2f}x" for t in TYPES
            )
        )
    print(f"wrote {write_results('paper', results)}")


if __name__ == "__main__":
    main()
