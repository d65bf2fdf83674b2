"""Step 5: the arithmetic a serving engine does at start-up, and a check that it holds.

    room for the cache = GPU memory x utilisation - weights - working space
    tokens             = room / KV bytes per token
    conversations      = tokens / context length

The working space is measured: the peak memory of one prefill pass (activations and
buffers, beyond the weights and the cache it fills), plus what the CUDA context and
libraries hold outside PyTorch's allocator. Then the cache is really reserved.

It sizes itself to the card: the cache takes what is left of 90 % of whatever GPU it finds
(on an H200, over 100 GiB; on a 24 GB card, about 5 GiB), so its peak memory is 90 % of the
card by design. It also works out, on paper, what it would reserve on a 24 GB card.

    python3 cache_budget.py
    python3 cache_budget.py --weights Qwen/Qwen3-8B   # real weights
    python3 cache_budget.py --device cpu --tiny       # pretends the CPU is a small GPU
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from transformers import DynamicCache, StaticCache

from kvlab import (
    GpuMemory,
    add_device_args,
    build_model,
    check,
    describe,
    human,
    kv_bytes_per_token,
    model_name,
    pick_device,
    write_results,
)

UTILISATION = 0.90  # the share of GPU memory an engine such as vLLM takes by default
PREFILL_TOKENS = 2_048  # one prefill chunk of the size engines commonly schedule
CARD_24GB = 24 * 2**30  # a 24 GB consumer card (24 GiB, as such cards report)
TINY_MEMORY = 256 * 2**20  # the pretend GPU of --tiny
SIZING = f"the model and its cache take {UTILISATION:.0%} of the memory of whatever GPU it finds"


def working_space(
    model: Any, cfg: dict[str, Any], memory: GpuMemory, tokens: int
) -> tuple[int, int]:
    """Peak bytes of one prefill pass beyond the weights and the KV cache it writes, and the
    part of it that stays allocated afterwards (cuBLAS keeps its workspace)."""
    device = memory.device
    if device.type != "cuda":
        return 16 * 2**20, 0  # the CPU has no peak counter: an assumption, said so in the output
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    memory.phase()  # the peak counters start again here (the step's own peak is kept)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True, logits_to_keep=1)
    peak = memory.phase()[0] - before - tokens * kv_bytes_per_token(cfg)
    return peak, torch.cuda.memory_allocated(device) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    args = parser.parse_args()
    device = pick_device(args.device)
    print(describe(device))
    memory = GpuMemory(device)
    model, cfg, how = build_model("Qwen3-8B", device, args.tiny, args.weights)
    name = model_name("Qwen3-8B", args.weights)
    per_token, context = kv_bytes_per_token(cfg), cfg["max_position_embeddings"]
    weights = sum(p.nbytes for p in model.parameters())
    work, kept = working_space(model, cfg, memory, 256 if args.tiny else PREFILL_TOKENS)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        outside = total - free - torch.cuda.memory_reserved(device)  # CUDA context, libraries
    else:
        total, outside = TINY_MEMORY, 0
    print(f"{name}: {how}")
    print(f"this step sizes itself to the card: {SIZING}\n")

    def budget(memory: int) -> dict[str, int | float]:
        """The engine's start-up arithmetic for a card of `memory` bytes."""
        room = int(memory * UTILISATION) - weights - work - outside
        tokens = max(room, 0) // per_token
        return {
            "memory": memory,
            "peak_bytes": int(memory * UTILISATION) - outside,
            "cache_bytes": tokens * per_token,
            "room": room,
            "tokens": tokens,
            "conversations": tokens // context,
            "fraction_of_one": tokens / context,
        }

    here, card = budget(total), budget(CARD_24GB)
    where = "memory of this GPU" if device.type == "cuda" else "memory of the pretend GPU (--tiny)"
    lines = [
        (where, total),
        (f"x {UTILISATION:.2f} utilisation", int(total * UTILISATION)),
        ("- weights (bf16)", -weights),
        (
            f"- working space: peak of one {256 if args.tiny else PREFILL_TOKENS:,}-token prefill"
            + (" (assumed)" if device.type != "cuda" else ""),
            -work,
        ),
        ("- outside PyTorch (CUDA context, libraries)", -outside),
        ("= room for the KV cache", here["room"]),
    ]
    for label, value in lines:
        print(f"  {label:<58} {value:>17,} B  {human(abs(value)):>10}")
    print(f"  {f'/ {per_token:,} B per token':<58} {here['tokens']:>17,} tokens")
    print(
        f"  {f'/ {context:,} tokens per conversation':<58} {here['conversations']:>17,} conversations"
    )
    check(here["tokens"] > 0, "no room is left for the cache")

    # Reserve it for real, as an engine does.
    cache = StaticCache(config=model.config, max_cache_len=here["tokens"])
    cache.early_initialization(
        batch_size=1,
        num_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"],
        dtype=torch.bfloat16,
        device=device,
    )
    reserved = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        allocated = torch.cuda.memory_allocated(device)
    else:
        allocated = weights + reserved
    planned = allocated - kept + work + outside  # `kept` is part of both allocated and work
    print(
        f"\nreserved a StaticCache of {here['tokens']:,} tokens: {reserved:,} B ({human(reserved)})"
    )
    print(f"allocated now (weights and cache): {allocated:,} B ({human(allocated)})")
    print(
        f"with the working space and what lies outside PyTorch: {planned:,} B,"
        f" {planned / total:.2%} of the GPU (the plan: {UTILISATION:.0%})"
    )
    check(
        reserved == here["tokens"] * per_token, "the reserved cache differs from the sum on paper"
    )
    # the allocator rounds and keeps small buffers of its own: allow 0.1 % of the GPU over the plan
    check(
        planned <= total * (UTILISATION + 0.001),
        "the cache and the model do not fit in their share of the GPU",
    )

    print(
        f"\na 24 GB card ({CARD_24GB:,} B), on paper, with the same working space and the same"
        " memory outside PyTorch:"
    )
    print(
        f"  room {card['room']:,} B ({human(card['room'])}) -> {card['tokens']:,} tokens"
        f" -> {card['conversations']:,} conversations of {context:,} tokens"
        f" ({card['fraction_of_one']:.2f} of one)"
    )
    print(
        f"  this step would reserve a cache of {card['cache_bytes']:,} B"
        f" ({human(card['cache_bytes'])}) there and peak at {card['peak_bytes']:,} B"
        f" ({human(card['peak_bytes'])})"
    )
    what = f"{UTILISATION:.0%} of this GPU's memory, less what lies outside PyTorch"
    peak = memory.report(
        here["peak_bytes"], what, sized_to_card=f"this step sizes itself to the card: {SIZING}"
    )
    if device.type == "cuda":  # the plan holds for the whole step, not only at its end
        check(
            peak["allocated"] <= total * (UTILISATION + 0.001) - outside,
            f"the step peaked at {human(peak['allocated'])}, beyond its plan",
        )
    results = {
        "device": device.type,
        "weights": how,
        "weight_bytes": weights,
        "work_bytes": work,
        "outside_bytes": outside,
        "kept_bytes": kept,
        "utilisation": UTILISATION,
        "kv_bytes_per_token": per_token,
        "context_tokens": context,
        "gpu": here,
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "planned_bytes": planned,
        "card_24gb": card,
        "sized_to_card": True,
        "sizing": SIZING,
        "peak_gpu_memory": peak,
    }
    print(f"wrote {write_results('budget', results)}")


if __name__ == "__main__":
    main()
