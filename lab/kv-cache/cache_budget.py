"""Step 5: the arithmetic a serving engine does at start-up, and a check that it holds.

The engine is vLLM, and its rule is the one the course's facts file writes down
(labkit/facts.toml, engines.vllm):

    room for the cache = ceil(gpu_memory_utilization x the GPU's memory as PyTorch sees it)
                         - weights - memory outside PyTorch (CUDA context, libraries)
                         - the activation peak of its profile run (- its CUDA graphs)
    tokens             = room / KV bytes per token, in whole blocks of 16 tokens
    conversations      = tokens / the longest conversation the engine accepts

The share is vLLM's default from the facts file (engines.vllm.gpu_memory_utilization). The
profile run is one forward pass over a batch of --profile-tokens tokens (vLLM's
max_num_batched_tokens; 8,192 here): its peak beyond the weights and the keys and values it
writes is measured, and so is the memory outside PyTorch's allocator. This step records no CUDA
graphs, so it reserves none for them. Then the cache is really reserved.

It sizes itself to the card: the model and its cache take the share of whatever GPU it finds
(on an H200, over 100 GiB of cache), so its peak memory is that share of the card by design. It
also works out, with the same rule, what vLLM would reserve on a real 24 GB card (an RTX 4090
as PyTorch sees it, from the facts file).

    python3 cache_budget.py
    python3 cache_budget.py --weights Qwen/Qwen3-8B   # real weights
    python3 cache_budget.py --device cpu --tiny       # pretends the CPU is a small GPU
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import torch
from labkit import device as devices
from labkit import facts
from labkit import memory as gpu_memory
from labkit.checks import check
from labkit.configs import kv_bytes_per_token
from labkit.results import write_results
from labkit.units import human, row
from transformers import DynamicCache

from kvlab import build_model, model_name, static_cache

CARD = "rtx-4090"  # the 24 GB card learners rent
PROFILE_TOKENS, TINY_PROFILE_TOKENS = 8_192, 256
TINY_MEMORY = 256 * 2**20  # the pretend GPU of --tiny


def profile_run(model: Any, per_token: int, memory: gpu_memory.PeakMemory, tokens: int) -> int:
    """The activation peak of one forward pass over `tokens` tokens: the peak beyond the weights
    and the keys and values it writes (what vLLM's profile run measures)."""
    device = memory.device
    if device.type != "cuda":
        return 16 * 2**20  # the CPU has no peak counter: an assumption, said so in the output
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)
    before = gpu_memory.allocated(device)
    memory.part()  # the peak counters start again here (the step's own peak is kept)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True, logits_to_keep=1)
    peak = memory.part()["allocated"] - before - tokens * per_token
    del ids
    gpu_memory.release(device)  # what the pass cached goes back before the cache is reserved
    return int(peak)


def vllm_rule(total: int, share: float, weights: int, outside: int, work: int) -> dict[str, int]:
    """vLLM's sum on a GPU of `total` bytes (as PyTorch sees it): the lines of the budget."""
    requested = math.ceil(share * total)
    return {"total": total, "requested": requested, "weights": weights, "non_torch": outside,
            "activation_peak": work, "cuda_graphs": 0,
            "cache": requested - weights - outside - work}  # fmt: skip


def counts(cache: int, per_token: int, context: int, block: int, peak: int) -> dict[str, Any]:
    """Tokens and conversations a cache of `cache` bytes holds, in whole blocks."""
    tokens = max(cache, 0) // (block * per_token) * block
    return {
        "room": cache,
        "tokens": tokens,
        "cache_bytes": tokens * per_token,
        "conversations": facts.conversations(max(cache, 0), per_token, context, block),
        "fraction_of_one": tokens / context,
        "peak_bytes": peak,
    }


def main() -> None:
    parser = devices.arguments(__doc__, weights=True)
    parser.add_argument(
        "--profile-tokens",
        type=int,
        help=f"tokens of the profile run (default {PROFILE_TOKENS:,}; --tiny {TINY_PROFILE_TOKENS})",
    )
    args = parser.parse_args()
    device = devices.pick(args)
    print(devices.describe(device, "torch", "transformers"))
    memory = gpu_memory.PeakMemory(device)
    share_fact = facts.fact("engines.vllm.gpu_memory_utilization")
    share, block = float(share_fact.value), int(facts.fact("engines.vllm.block_size").value)
    model, cfg, how = build_model("Qwen3-8B", device, args.tiny, args.weights)
    name = model_name("Qwen3-8B", args.weights)
    per_token, context = kv_bytes_per_token(cfg), cfg["max_position_embeddings"]
    weights = sum(p.nbytes for p in model.parameters())
    profile = args.profile_tokens or (TINY_PROFILE_TOKENS if args.tiny else PROFILE_TOKENS)
    work = profile_run(model, per_token, memory, profile)
    if device.type == "cuda":
        total = gpu_memory.total_bytes(device) or 0
        outside = gpu_memory.outside_bytes(device)  # CUDA context, libraries
    else:
        total, outside = TINY_MEMORY, 0
    sizing = f"the model and its cache take vLLM's share, {share:.2f}, of whatever GPU it finds"
    print(f"{name}: {how}")
    print(
        textwrap.fill(f"this step sizes itself to the card: {sizing}", 98, subsequent_indent="  ")
    )
    print(f"(gpu_memory_utilization: {share_fact.cite})\n")
    lines = vllm_rule(total, share, weights, outside, work)
    here = counts(lines["cache"], per_token, context, block, lines["requested"] - outside)
    where = "memory of this GPU" if device.type == "cuda" else "memory of the pretend GPU (--tiny)"
    print(textwrap.fill(f"vLLM's rule: {facts.get('engines.vllm.rule')}", 98) + "\n")
    for label, value in [
        (f"{where}, as PyTorch sees it", total),
        (f"x {share:.2f} (gpu_memory_utilization), rounded up", lines["requested"]),
        ("- weights (bf16)", -weights),
        ("- outside PyTorch (CUDA context, libraries)", -outside),
        (
            f"- activation peak of a {profile:,}-token profile run"
            + (" (assumed)" if device.type != "cuda" else ""),
            -work,
        ),
        ("- CUDA graphs (none recorded here)", 0),
        ("= room for the KV cache", here["room"]),
    ]:
        print(row(label, value, 58))
    print(
        f"  {f'/ {per_token:,} B per token, in blocks of {block}':<58} {here['tokens']:>17,} tokens"
    )
    print(
        f"  {f'/ {context:,} tokens per conversation':<58} {here['conversations']:>17,} conversations"
    )
    check(here["tokens"] > 0, "no room is left for the cache")
    known = facts.card_named(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    if known is not None and known.torch_total == total:  # the kit's rule agrees with this sum
        check(
            facts.vllm(known.key, activation_peak=work, non_torch=outside, weights=weights).cache
            == lines["cache"],
            "the sum above differs from the facts file's vLLM rule",
        )

    # Reserve it for real, as an engine does.
    cache = static_cache(model, cfg, here["tokens"], device)
    reserved = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    allocated = gpu_memory.allocated(device) if device.type == "cuda" else weights + reserved
    planned = allocated + work + outside
    print(
        f"\nreserved a StaticCache of {here['tokens']:,} tokens: {reserved:,} B ({human(reserved)})"
    )
    print(f"allocated now (weights and cache): {allocated:,} B ({human(allocated)})")
    print(
        f"with the activation peak and what lies outside PyTorch: {planned:,} B,"
        f"\n  {planned / total:.2%} of the GPU (the plan: {share:.0%})"
    )
    check(
        reserved == here["tokens"] * per_token, "the reserved cache differs from the sum on paper"
    )
    # the allocator rounds and keeps small buffers of its own: allow 0.1 % of the GPU over the plan
    check(
        planned <= total * (share + 0.001),
        "the cache and the model do not fit in their share of the GPU",
    )

    room = facts.room(CARD)
    # outside PyTorch there: what it is here on a GPU; on the CPU, the CUDA context of the facts
    card_outside = outside if device.type == "cuda" else facts.context_of(CARD)[0]
    budget = facts.vllm(CARD, activation_peak=work, non_torch=card_outside, weights=weights)
    card = counts(
        budget.cache, per_token, context, block, budget.lines["requested"] - card_outside
    ) | {"memory": budget.lines["total"]}
    head = (
        f"the same rule on {room.text}, with the same activation peak and"
        f" {human(card_outside)} outside PyTorch: {budget.rule}"
    )
    print("\n" + textwrap.fill(head, 98))
    print(
        f"  room {card['room']:,} B ({human(card['room'])}) -> {card['tokens']:,} tokens"
        f"\n  -> {card['conversations']:,} conversations of {context:,} tokens"
        f" ({card['fraction_of_one']:.2f} of one)"
    )
    print(
        f"  vLLM would reserve a cache of {card['cache_bytes']:,} B"
        f" ({human(card['cache_bytes'])}) there,\n  and PyTorch would peak at"
        f" {card['peak_bytes']:,} B ({human(card['peak_bytes'])})"
    )
    what = f"{share:.0%} of this GPU, less what is outside PyTorch"
    peak = memory.report(here["peak_bytes"], what, sized_to_card="this step sizes itself")
    if device.type == "cuda":  # the plan holds for the whole step, not only at its end
        check(
            peak["allocated"] <= total * (share + 0.001) - outside,
            f"the step peaked at {human(peak['allocated'])}, beyond its plan",
        )
    results = {
        "device": device.type,
        "tiny": args.tiny,  # the shrunk models of --device cpu --tiny: not the page's sizes
        "weights": how,
        "engine": "vllm",
        "rule": budget.rule,
        "share": share,
        "share_source": share_fact.cite,
        "block_size": block,
        "profile_tokens": profile,
        "weight_bytes": weights,
        "work_bytes": work,
        "outside_bytes": outside,
        "kv_bytes_per_token": per_token,
        "context_tokens": context,
        "gpu": here | {"memory": total, "lines": lines},
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "planned_bytes": planned,
        "card_24gb": card | {"card": CARD, "lines": budget.lines, "room_text": room.text},
        "sized_to_card": True,
        "sizing": sizing,
        "peak_gpu_memory": peak,
    }
    print(f"wrote {write_results('budget', results)}")


if __name__ == "__main__":
    main()
