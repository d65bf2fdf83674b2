"""Step 2: reserve a KV cache on the GPU and compare what the allocator took with the sum on paper.

The model is built from its config.json with random bf16 weights (the cache's size does not
depend on what the weights are), or loaded with --weights when you have them. The cache is
transformers' StaticCache, the kind an engine reserves ahead of time; it normally allocates
its buffers on first use, so we ask it to allocate them now and read PyTorch's allocator
counters before and after.

    python3 gpu_check.py                      # both models, random weights
    python3 gpu_check.py --weights Qwen/Qwen3-0.6B   # one model, real weights
    python3 gpu_check.py --device cpu --tiny  # a quick run without a GPU
"""

from __future__ import annotations

import argparse
import gc
import weakref
from typing import Any

import torch
from labkit import memory as gpu_memory
from labkit.checks import check
from labkit.configs import kv_bytes_per_token, weight_bytes
from labkit.results import write_results
from labkit.units import BF16_BYTES, human

from kvlab import build_model, start, static_cache

TOKEN_COUNTS = [4_096, 32_768]
TINY_TOKEN_COUNTS = [256, 2_048]


def allocator(device: torch.device) -> tuple[int, int]:
    """Bytes allocated to live tensors, and bytes the allocator holds from the GPU."""
    if device.type != "cuda":
        return 0, 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()  # hand back cached free blocks, so "reserved" moves only for the cache
    return torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)


def reserve(model: Any, cfg: dict[str, Any], tokens: int, device: torch.device) -> dict[str, int]:
    """Reserve a StaticCache of `tokens` tokens and return what it cost, in bytes."""
    allocated0, reserved0 = allocator(device)
    cache = static_cache(model, cfg, tokens, device)  # its constructor allocates nothing
    allocated1, reserved1 = allocator(device)
    tensors = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    # The cache must be usable as it is: run one token through the model with it.
    with torch.no_grad():
        model(input_ids=torch.tensor([[1]], device=device), past_key_values=cache, use_cache=True)
    del cache
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if device.type != "cuda":  # no allocator counters on the CPU: show the tensors' own bytes
        return {"allocated": tensors, "reserved": tensors, "tensors": tensors}
    return {
        "allocated": allocated1 - allocated0,
        "reserved": reserved1 - reserved0,
        "tensors": tensors,
    }


def repeat_bytes(cfg: dict[str, Any], tokens: int) -> int:
    """Bytes of one layer's keys and values repeated for every query head: transformers' attention
    does that, for the length of the whole cache, when a mask hides its unused positions."""
    if cfg["num_attention_heads"] == cfg["num_key_value_heads"]:
        return 0
    return 2 * tokens * cfg["num_attention_heads"] * cfg["head_dim"] * BF16_BYTES


def check_model(
    folder: str, name: str, args: argparse.Namespace, device: torch.device, counts: list[int]
) -> tuple[dict[str, Any], int, str, Any]:
    """Reserve each cache for one model; return its row, its peak on paper (and how that sum is
    made up), and a weak reference to the model, which must be gone once this returns."""
    model, cfg, how = build_model(folder, device, args.tiny, args.weights)
    weights = sum(p.nbytes for p in model.parameters())
    per_token = kv_bytes_per_token(cfg)
    print(f"\n{name}: {how}")
    print(f"  weights: {weights:,} B ({human(weights)}); on paper {per_token:,} B per token")
    print(
        f"  {'tokens':>8}  {'on paper (B)':>27}  {'allocated (B)':>15}  {'reserved (B)':>15}"
        f"  {'difference':>10}"
    )
    row: dict[str, Any] = {"weights": how, "weight_bytes": weights, "bytes_per_token": per_token}
    for tokens in counts:
        paper = tokens * per_token
        got = reserve(model, cfg, tokens, device)
        extra = got["allocated"] - paper
        print(
            f"  {tokens:>8,}  {paper:>15,} {'(' + human(paper) + ')':>11}  {got['allocated']:>15,}"
            f"  {got['reserved']:>15,}  {extra:>8,} B"
        )
        check(
            got["tensors"] == paper,
            f"the cache's tensors hold {got['tensors']:,} B, not {paper:,} B",
        )
        check(
            0 <= extra < 2**20,
            f"the allocator took {got['allocated']:,} B for a cache of {paper:,} B on paper",
        )
        for what in ("paper", "allocated", "reserved"):
            value = paper if what == "paper" else got[what]
            row.setdefault(f"{what}_bytes", {})[str(tokens)] = value
    if device.type == "cuda":
        layers = cfg["num_hidden_layers"]
        print(
            f"  allocated - paper: {extra:,} B = {extra / layers:,.0f} B per layer, the cache's own"
            " small bookkeeping tensors\n    (the allocator's smallest block is 512 B)"
        )
        print(
            "  reserved counts whole segments: blocks of 1 to 10 MiB are cut from 20 MiB"
            " segments,\n    larger ones rounded up to 2 MiB"
        )
    # The largest moment: the weights, the largest cache, and attention's repeated keys and values.
    on_paper = weight_bytes(cfg), counts[-1] * per_token, repeat_bytes(cfg, counts[-1])
    what = (
        f"weights of {name} {human(on_paper[0])} + its {counts[-1]:,}-token cache"
        f" {human(on_paper[1])} + one layer's keys and values repeated for each query head"
        f" {human(on_paper[2])}"
    )
    return row, sum(on_paper), what, weakref.ref(model)


def main() -> None:
    args, todo, device = start(__doc__)
    memory = gpu_memory.PeakMemory(device)
    counts = TINY_TOKEN_COUNTS if args.tiny else TOKEN_COUNTS
    results: dict[str, Any] = {"device": device.type, "tiny": args.tiny}
    peaks = []
    for key, (folder, name) in todo.items():
        before = gpu_memory.allocated(device)
        results[key], paper, what, gone = check_model(folder, name, args, device, counts)
        results[key]["peak_gpu_memory"] = {**memory.part(), "paper": paper}
        peaks.append((paper, what))
        # Free this model before the next is built: only one set of weights at a time.
        results[key]["left_after_free_bytes"] = gpu_memory.check_freed(
            device, before, name, [gone], strict=False
        )
    results["peak_gpu_memory"] = memory.report(*max(peaks))
    print(f"\nwrote {write_results('gpu_check', results)}")


if __name__ == "__main__":
    main()
