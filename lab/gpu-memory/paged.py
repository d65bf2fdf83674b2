"""Step 2: start a real serving engine and read what its memory planner reserved.

transformers' continuous batching (model.generate_batch, in this process) serves a batch of
prompts large enough to fill its largest batch once. Its planner logs the memory it took and
the cache blocks it made; we read the same numbers from the engine's objects, set them beside
the planner's formula worked on paper (planner.py), and draw the GPU's whole budget twice:
on paper and as measured. The cache takes a fraction of whatever GPU it finds: this step
sizes itself to the card.

    python3 paged.py                        # Qwen3-8B, fraction 0.9, blocks of 256 tokens
    python3 paged.py --fraction 0.5 --model Qwen3-0.6B
    python3 paged.py --device cpu --tiny    # a shrunken model on a pretend 256 MiB GPU
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from math import ceil
from typing import Any

import torch

from labkit.checks import check
from labkit.configs import weight_bytes
from labkit.device import add_device_args, describe, pick_device
from labkit.facts import card_named, room
from labkit.results import write_results
from labkit.timing import Stopwatch
from labkit.units import human
from planner import (
    CONTEXTS,
    MODELS,
    SEGMENTS,
    Engine,
    block_cost,
    budget,
    conversations,
    plan,
    say,
    segments,
)
from serving import (
    ATTENTION,
    RELEASE,
    SECTORS,
    TINY_BATCH_TOKENS,
    Memory,
    build_model,
    make_prompts,
    serve,
)

SIZED = "this step sizes itself to the card: the engine takes a share of whatever memory is free"
LABELS = {
    "context": "CUDA context (before the model)",
    "weights": "weights",
    "cache": "KV cache tensors (+ 2 padding blocks)",
    "batch_tensors": "batch tensors: mask, indices",
    "activations": "working space of the largest batch",
    "allocator": "allocator's cached, unused blocks",
    "libraries": "libraries loaded while serving",
    "free": "left free (1 - F, rounding, reserve)",
}


def finish(name: str, results: dict[str, Any], memory: Memory, clock: Stopwatch) -> None:
    """The last lines of a step that serves on the engine: its peak GPU memory (the step sizes
    itself to the card), its wall time, and results/<name>.json written."""
    print()
    results["peak_gpu_memory"] = memory.peaks.report(sized_to_card=SIZED)
    results["wall_s"] = clock.seconds()
    print(f"wall time {results['wall_s']:.1f} s")
    print(f"wrote {write_results(name, results)}")


def scaled_contexts(tiny: bool) -> dict[str, int]:
    """Conversation lengths to count: 8K, 32K and the full 40,960; divided by 16 with --tiny."""
    return {k: c // 16 for k, c in CONTEXTS.items()} if tiny else dict(CONTEXTS)


def match_card(device: torch.device, memory: Memory) -> tuple[str, dict[str, Any]]:
    """The card of the course's facts this GPU is (by its name); else this GPU as measured."""
    name = "pretend GPU (--tiny)" if memory.pretend else torch.cuda.get_device_name(device)
    card = None if memory.pretend else card_named(name)
    if card is not None and card.torch_total is not None:
        key = {"h200": "h200", "rtx-4090": "card_24gb"}.get(card.key, card.key)
        return key, {"name": card.label, "total_bytes": card.torch_total,
                     "usable_bytes": room(card.key).bytes}  # fmt: skip
    return "this_gpu", {
        "name": name,
        "total_bytes": memory.total,
        "usable_bytes": memory.total - memory.context,
    }


def measured_segments(memory: Memory, weights: int, facts: dict[str, Any]) -> dict[str, int]:
    """The GPU's budget as measured: allocator counters and the driver's free memory."""
    seg = dict.fromkeys(SEGMENTS, 0)
    seg["context"], seg["weights"], seg["cache"] = (
        memory.context,
        weights,
        facts["cache_tensor_bytes"],
    )
    if not memory.pretend:
        seg["batch_tensors"] = (
            facts["allocated_after"] - facts["allocated_before"] - facts["cache_tensor_bytes"]
        )
        seg["activations"] = facts["peak_allocated"] - facts["allocated_after"]
        seg["allocator"] = facts["peak_reserved"] - facts["peak_allocated"]
        outside = memory.total - facts["free_after"] - facts["reserved_after"]
        seg["libraries"] = max(outside - memory.context, 0)
    seg["free"] = memory.total - sum(seg.values())
    return seg


def compare(facts: dict[str, Any], paper: dict[str, Any], fraction: float) -> float:
    """Print the engine's numbers beside planner.py's; stop if the blocks differ by over 1 %."""
    print("\nthe planner's own log (ContinuousBatchingLogger):")
    for line in facts["planner_lines"]:
        print(line)
    available, block = facts["available"], facts["block_size"]
    if facts["available_logged_mib"] is not None:
        check(
            abs(facts["available_logged_mib"] - available // 2**20) <= 1,
            "the planner saw a different free memory than this script read",
        )
    diff = (facts["num_blocks"] - paper["num_blocks"]) / paper["num_blocks"]
    say(f"\non paper: planner.py fed this GPU's free memory ({facts['free_before']:,} B)")
    print(f"  x {fraction:.2f}{'':<36} {'paper':>15} {'engine':>15}")
    for label, key_paper, key_engine in (
        ("memory available to the planner (B)", "available", "available"),
        ("largest batch (max_batch_tokens)", "max_batch_tokens", "max_batch_tokens"),
        ("cache blocks", "num_blocks", "num_blocks"),
        ("cache tokens", "cache_tokens", "cache_tokens"),
        ("cache tensors, 2 padding blocks too (B)", "cache_bytes_allocated", "cache_tensor_bytes"),
    ):
        print(f"  {label:<42} {paper[key_paper]:>15,} {facts[key_engine]:>15,}")
    print(f"  blocks, engine against paper: {diff:+.2%}")
    check(abs(diff) <= 0.01, "the engine's blocks differ from the planner's formula by over 1 %")
    check(
        facts["cache_tensor_bytes"]
        == (facts["num_blocks"] + 2) * block * paper["cache_bytes_per_token"],
        "the cache tensors are not (blocks + 2) x block size x bytes per token",
    )
    return diff


def explain_card(
    card: dict[str, Any],
    nominal: dict[str, Any],
    facts: dict[str, Any],
    paper: dict[str, Any],
    memory: Memory,
    held: int,
    cfg: dict[str, Any],
) -> None:
    """How far the card's figures on paper were from this GPU, line by line, in blocks."""
    n_blocks = nominal["plan"]["num_blocks"] if nominal["plan"] else 0
    eng, fraction, free = facts["engine"], nominal["fraction"], facts["free_before"]
    per_block = block_cost(cfg, eng, paper)
    usable = memory.total - memory.context
    say(
        f"\non paper from the card's figures ({card['name']}, {human(card['usable_bytes'])}"
        f" usable): {n_blocks:,} blocks; the engine made {facts['num_blocks'] - n_blocks:+,}"
    )
    print(f"  {'':<34} {'paper (B)':>17} {'here (B)':>17} {'blocks':>8}")
    for label, p_val, m_val, sign in (
        ("usable before the model", card["usable_bytes"], usable, 1),
        ("weights", nominal["weights"], held, -1),
        ("other memory taken before start", 0, usable - held - free, -1),
        ("= free when the engine started", nominal["free"], free, 1),
    ):
        effect = sign * (m_val - p_val)  # bytes more (+) or fewer (-) free for the engine
        print(f"  {label:<34} {p_val:>17,} {m_val:>17,} {effect * fraction / per_block:>+8,.1f}")


def show_whole_gpu(
    memory: Memory, on_paper: dict[str, int], measured: dict[str, int], paper: dict[str, Any]
) -> None:
    """The whole GPU, segment by segment, paper against measured."""
    print(f"\nthe whole GPU, {memory.total:,} B ({human(memory.total)}):")
    print(f"  {'':<38} {'paper (B)':>17} {'measured (B)':>17}")
    for seg in SEGMENTS:
        print(f"  {LABELS[seg]:<38} {on_paper[seg]:>17,} {measured[seg]:>17,}")
    if memory.pretend:
        print("  (on the pretend GPU only the weights and the cache tensors are real figures)")
    reserve = paper["lines"]["activations"]
    say(
        f"  the planner kept {human(reserve)} for the activations of a"
        f" {paper['max_batch_tokens']:,}-token batch;"
        f" the batch used {human(measured['activations'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_args(parser, weights=True)
    parser.add_argument("--model", default="Qwen3-8B", choices=list(MODELS.values()))
    parser.add_argument("--fraction", type=float, default=0.9, help="max_memory_percent, 0 to 1")
    parser.add_argument("--block-size", type=int, help="tokens per block (256; 32 with --tiny)")
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny, cpu_needs_tiny=True)
    block = args.block_size or (32 if args.tiny else 256)
    prompt_tokens, new_tokens = (32 if args.tiny else 256), 8
    contexts = scaled_contexts(args.tiny)
    memory = Memory(device)
    print(describe(device, "torch", "transformers"))
    start = memory.allocated() if not memory.pretend else 0
    model, cfg, how = build_model(args.model, device, args.tiny, memory, args.weights)
    weights, held = weight_bytes(cfg), memory.allocated() - start
    if not args.weights:
        count = sum(p.nbytes for p in model.parameters())
        check(count == weights, "the weights differ from config.json's count")
    say(f"{args.model}: {how}; weights {weights:,} B ({human(weights)}), {held:,} B allocated")
    say(
        f"engine: transformers {RELEASE} continuous batching, paged KV cache, attention {ATTENTION},"
        f" block size {block}, max_memory_percent {args.fraction:.2f}"
    )

    # enough prompts to fill the engine's largest batch once, so its activation peak is reached
    batch = TINY_BATCH_TOKENS if SECTORS and memory.pretend else None
    first = plan(
        cfg, int(memory.free() * args.fraction), Engine(release=RELEASE, max_batch_tokens=batch)
    )
    count = ceil(first["max_batch_tokens"] / prompt_tokens)
    prompts = make_prompts(count, prompt_tokens, cfg["vocab_size"])
    print(f"serving {count} prompts of {prompt_tokens} tokens, {new_tokens} new tokens each")
    facts = serve(
        model,
        prompts,
        new_tokens,
        memory,
        contexts,
        max_memory_percent=args.fraction,
        block_size=block,
    )
    paper = plan(cfg, facts["available"], facts["engine"])
    diff = compare(facts, paper, args.fraction)

    key, card = match_card(device, memory)
    nominal = budget(
        cfg,
        card["total_bytes"],
        card["total_bytes"] - card["usable_bytes"],
        weights,
        args.fraction,
        facts["engine"],
        contexts,
    )
    n_blocks = nominal["plan"]["num_blocks"] if nominal["plan"] else 0
    nominal["blocks_diff"] = (facts["num_blocks"] - n_blocks) / n_blocks if n_blocks else None
    explain_card(card, nominal, facts, paper, memory, held, cfg)

    free = facts["free_before"]
    measured = measured_segments(memory, weights if memory.pretend else held, facts)
    on_paper = segments(memory.total, free, weights, paper)
    show_whole_gpu(memory, on_paper, measured, paper)
    whole = int(memory.total * args.fraction) - (memory.total - free)
    say(
        f"  the fraction applies to the free memory: {human(facts['available'])} for the engine;"
        f" applied to the whole card (vLLM's way) it would be {human(whole)}"
    )
    print(f"\nconversations the engine's block manager admits ({facts['cache_tokens']:,} tokens):")
    for k, c in contexts.items():
        on_p = conversations(paper["num_blocks"], block, c)
        print(f"  {c:>7,} tokens each: {facts['admitted'][k]:>5,}  (paper {on_p:,})")
    print()
    peak = memory.peaks.report(sized_to_card=SIZED)
    seconds = clock.seconds()
    print(f"wall time {seconds:.1f} s")
    planner_keys = (
        "num_blocks",
        "max_batch_tokens",
        "cache_tokens",
        "cache_tensor_bytes",
        "available",
        "available_logged_mib",
        "planner_lines",
    )
    serving_keys = ("requests", "generated_tokens", "wall_s", "peak_concurrency")
    results = {
        "device": device.type,
        "gpu": describe(device, "torch", "transformers"),
        "release": RELEASE,
        "model": args.model,
        "weights_how": how,
        "sizes_to_card": True,
        "fraction": args.fraction,
        "block_size": block,
        "card": key,
        "total": memory.total,
        "context": memory.context,
        "usable": memory.total - memory.context,
        "weights_paper": weights,
        "weights_allocated": held,
        "free_before": free,
        "engine_settings": asdict(facts["engine"]),
        "resolved": facts["resolved"],
        "attention": facts["attention"],
        "planner": {k: facts[k] for k in planner_keys},
        "paper": paper,
        "nominal": nominal,
        "blocks_diff": diff,
        "contexts": contexts,
        "conversations": facts["admitted"],
        "paper_conversations": {
            k: conversations(paper["num_blocks"], block, c) for k, c in contexts.items()
        },
        "chart": {
            "segments": list(SEGMENTS),
            "paper": [on_paper[s] for s in SEGMENTS],
            "measured": [measured[s] for s in SEGMENTS],
        },
        "paper_segments": on_paper,
        "measured_segments": measured,
        "serving": {k: facts[k] for k in serving_keys}
        | {"prompt_tokens": prompt_tokens, "new_tokens": new_tokens},
        "peak_gpu_memory": peak,
        "wall_s": seconds,
    }
    print(f"wrote {write_results('paged', results)}")


if __name__ == "__main__":
    main()
