"""Step 2: reserve a KV cache on the GPU and compare what the allocator took with the sum on paper.

The model is built from its config.json with random bf16 weights (the cache's size does not
depend on what the weights are), or loaded with --weights when you have them. The cache is
transformers' StaticCache, the kind an engine reserves ahead of time; it normally allocates
its buffers on first use, so we ask it to allocate them now and read PyTorch's allocator
counters before and after.

    python3 gpu_check.py                      # both models, random weights
    python3 gpu_check.py --weights Qwen/Qwen3-0.6B --models qwen3-0_6b
    python3 gpu_check.py --device cpu --tiny  # a quick run without a GPU
"""

from __future__ import annotations

import argparse
import gc
from typing import Any

import torch
from transformers import StaticCache

from kvlab import (
    MODELS,
    add_device_args,
    build_model,
    check,
    describe,
    human,
    kv_bytes_per_token,
    pick_device,
    write_results,
)

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
    cache = StaticCache(config=model.config, max_cache_len=tokens)
    allocated0, reserved0 = allocator(device)
    cache.early_initialization(
        batch_size=1,
        num_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"],
        dtype=torch.bfloat16,
        device=device,
    )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--weights", help="a Hugging Face model id or local folder with weights")
    args = parser.parse_args()
    device = pick_device(args.device)
    print(describe(device))
    counts = TINY_TOKEN_COUNTS if args.tiny else TOKEN_COUNTS
    results: dict[str, Any] = {"device": device.type}

    for key in args.models:
        model, cfg, how = build_model(MODELS[key], device, args.tiny, args.weights)
        weights = sum(p.nbytes for p in model.parameters())
        per_token = kv_bytes_per_token(cfg)
        print(f"\n{MODELS[key]}: {how}")
        print(f"  weights: {weights:,} B ({human(weights)}); on paper {per_token:,} B per token")
        print(f"  {'tokens':>8}  {'on paper (B)':>27}  {'allocated (B)':>15}  {'reserved (B)':>15}  {'difference':>10}")
        row: dict[str, Any] = {"weights": how, "weight_bytes": weights, "bytes_per_token": per_token}
        for tokens in counts:
            paper = tokens * per_token
            got = reserve(model, cfg, tokens, device)
            extra = got["allocated"] - paper
            print(
                f"  {tokens:>8,}  {paper:>15,} {'(' + human(paper) + ')':>11}  {got['allocated']:>15,}"
                f"  {got['reserved']:>15,}  {extra:>8,} B"
            )
            check(got["tensors"] == paper, f"the cache's tensors hold {got['tensors']:,} B, not {paper:,} B")
            check(
                0 <= extra < 2**20,
                f"the allocator took {got['allocated']:,} B for a cache of {paper:,} B on paper",
            )
            for name in ("paper", "allocated", "reserved"):
                value = paper if name == "paper" else got[name]
                row.setdefault(f"{name}_bytes", {})[str(tokens)] = value
        layers = cfg["num_hidden_layers"]
        if device.type == "cuda":
            print(f"  allocated - paper: {extra:,} B = {extra / layers:,.0f} B per layer, the cache's own small"
                  " bookkeeping tensors (the allocator's smallest block is 512 B)")
            print("  reserved counts whole segments: blocks of 1 to 10 MiB are cut from 20 MiB"
                  " segments, larger ones rounded up to 2 MiB")
        results[key] = row
        del model
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    print(f"\nwrote {write_results('gpu_check', results)}")


if __name__ == "__main__":
    main()
