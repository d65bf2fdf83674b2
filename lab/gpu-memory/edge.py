"""Step 4: the longest single context that fits, found by allocating it for real.

With Qwen3-8B's weights on the GPU, the budget is what the engine would take at a memory
fraction of 0.9: 0.9 x the memory still free. Inside that budget (PyTorch's allocator is capped
at it) we try to allocate the cache of one conversation of n tokens, in the engine's layout
(a key and a value tensor per layer), and bisect on torch.OutOfMemoryError. The prediction is
the budget / bytes per token; the CUDA allocator rounds every large tensor up to 2 MiB, which
we predict too. This step sizes itself to the card.

    python3 edge.py
    python3 edge.py --device cpu --tiny   # a pretend 256 MiB GPU whose allocator is imitated
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from labkit import facts
from labkit.checks import check
from labkit.configs import load_config, weight_bytes
from labkit.device import add_device_args, describe, pick_device
from labkit.timing import Stopwatch
from labkit.units import human
from paged import finish
from planner import Engine, cache_bytes_per_token, plan, say
from serving import LAB, LARGE_ROUND, RELEASE, SECTORS, TINY_BATCH_TOKENS, Memory, build_model

FRACTION = 0.9


def fits(memory: Memory, tokens: int, layers: int, heads: int, dim: int, budget: int) -> bool:
    """Whether the keys and values of `tokens` tokens, all layers, can be allocated in budget."""
    left, tensors = [budget], []
    try:
        for _ in range(2 * layers):
            tensors.append(memory.empty((tokens, heads, dim), torch.bfloat16, left))
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        del tensors  # reference counting frees them at once (no gc pass needed)
        memory.free()  # hand the blocks back, so each try starts from the same state


def bisect(memory: Memory, cfg: dict[str, Any], budget: int, high: int) -> tuple[int, int]:
    """The largest n for which fits() holds, below `high` (which must not fit); and the tries."""
    args = (cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], budget)
    check(
        not fits(memory, high, *args),
        f"{high:,} tokens fit in a budget made for fewer: is the cap working?",
    )
    low, tries = 0, 1
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(memory, mid, *args) else (low, mid)
        tries += 1
    return low, tries


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_args(parser, weights=True)
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny, cpu_needs_tiny=True)
    memory = Memory(device)
    print(describe(device, "torch", "transformers"))
    model, cfg, how = build_model("Qwen3-8B", device, args.tiny, memory, args.weights)
    per_token, layers = cache_bytes_per_token(cfg), cfg["num_hidden_layers"]
    free = memory.free()
    budget = int(free * FRACTION)
    print(f"Qwen3-8B: {how}; {per_token:,} B per token of cache")
    print(f"free with the weights in: {free:,} B ({human(free)})")
    print(f"budget, {FRACTION} of it:     {budget:,} B ({human(budget)})")
    per_tensor = cfg["num_key_value_heads"] * cfg["head_dim"] * 2  # bytes per token in one tensor
    predicted = budget // per_token
    # each of the 2 x layers tensors is rounded up to 2 MiB: whole 2 MiB pieces per tensor
    rounded = (budget // (2 * layers)) // LARGE_ROUND * LARGE_ROUND // per_tensor
    eng = Engine(
        release=RELEASE, max_batch_tokens=TINY_BATCH_TOKENS if SECTORS and args.tiny else None
    )
    engine = plan(cfg, budget, eng)["cache_tokens"]
    cap = "a pretend allocator rounding like CUDA's" if memory.pretend else "PyTorch's allocator"
    if not memory.pretend:  # the allocator refuses once its reserved memory would pass the cap
        fraction = (memory.reserved() + budget) / memory.total
        # the allocator wants the device's index, not `cuda`
        torch.cuda.set_per_process_memory_fraction(fraction, torch.cuda.current_device())
    memory.peaks.part()
    try:
        found, tries = bisect(memory, cfg, budget, predicted + 1)
    finally:
        if not memory.pretend:
            torch.cuda.set_per_process_memory_fraction(1.0, torch.cuda.current_device())
    say(f"\nbisection on torch.OutOfMemoryError ({cap}, capped at the budget), {tries} tries:")
    print(f"  predicted, budget / bytes per token:                 {predicted:>12,} tokens")
    print(
        f"  predicted with each of {2 * layers} tensors rounded to 2 MiB:   {rounded:>12,} tokens"
    )
    print(f"  found by allocating:                                 {found:>12,} tokens")
    print(f"    ({found / predicted:.4f} of the prediction)")
    say(f"  what the engine's planner gives its cache (room kept for a batch): {engine:,} tokens")
    say(
        f"  the config allows {cfg['max_position_embeddings']:,} tokens (max_position_embeddings):"
        f" memory would hold {found / cfg['max_position_embeddings']:.1f} times that"
    )
    native, yarn = (
        facts.fact(f"models.qwen3-8b.{k}").value for k in ("native_context", "yarn_context")
    )
    print(f"  (Qwen3-8B was trained for {native:,} tokens; {yarn:,} with YaRN rope scaling)")
    # With the allocator's defaults the answer is the rounded prediction to the token; a
    # PYTORCH_CUDA_ALLOC_CONF of your own (expandable segments) may round in larger pieces.
    check(0.98 * predicted <= found <= predicted, "the longest context found is off the prediction")
    print(f"  found - rounded prediction: {found - rounded:+,} tokens")
    room = facts.room("rtx-4090")  # PyTorch's total less the CUDA context
    full = load_config(LAB / "models" / "Qwen3-8B" / "config.json")  # real shapes, even --tiny
    budget_24 = int((room.bytes - weight_bytes(full)) * FRACTION)
    paper_24 = budget_24 // cache_bytes_per_token(full)
    engine_24 = plan(full, budget_24, Engine(release=RELEASE))["cache_tokens"]
    say(f"on paper, Qwen3-8B on {room.text}:")
    print(
        f"  budget {human(budget_24)} -> {paper_24:,} tokens of cache alone,"
        f" {engine_24:,} once the engine keeps room for a batch"
    )
    results = {
        "device": device.type,
        "sizes_to_card": True,
        "fraction": FRACTION,
        "weights_how": how,
        "free": free,
        "budget": budget,
        "bytes_per_token": per_token,
        "predicted_tokens": predicted,
        "predicted_rounded_tokens": rounded,
        "found_minus_rounded": found - rounded,
        "found_tokens": found,
        "found_over_predicted": found / predicted,
        "engine_cache_tokens": engine,
        "tries": tries,
        "model_context": cfg["max_position_embeddings"],
        "contexts_of_model": found / cfg["max_position_embeddings"],
        "card_24gb": {
            "budget": budget_24,
            "predicted_tokens": paper_24,
            "engine_cache_tokens": engine_24,
        },
    }
    finish("edge", results, memory, clock)
    del model  # held until here: the weights stay on the GPU while the budget is tried


if __name__ == "__main__":
    main()
