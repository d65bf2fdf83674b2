"""Step 5: the cache budget sets how many requests run at once, and so the output speed.

The engine serves N = 1, 8, 32 and 64 requests at once (prompts of 300 tokens, 64 new tokens
each), first with the cache a fraction of 0.9 gives (room for all of them), then N = 8, 32 and
64 with a cache of only 16 blocks (4,096 tokens). With the small cache the scheduler runs only
a few requests at once, the others wait their turn, and the output speed stops growing with N.
The first budget sizes itself to the card.

Each N is served REPEATS times, each time by a fresh engine, and timed as a user waits (engine
start included); the output speed is written with its spread (median, quartiles, extremes).
This engine's scheduler is Python code on the host, between the GPU's steps: its speed
depends on the host's CPU as much as on the GPU, and moves from run to run.

    python3 concurrency.py                      # Qwen3-8B
    python3 concurrency.py --model Qwen3-0.6B   # quicker
    python3 concurrency.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
from math import ceil
from typing import Any

from labkit.checks import check
from labkit.device import add_device_args, describe, pick_device
from labkit.timing import Spread, Stopwatch, derive, ratio
from labkit.units import human
from paged import finish
from planner import MODELS, cache_bytes_per_token, say
from serving import RELEASE, Memory, build_model, make_prompts, serve

COUNTS = (1, 8, 32, 64)
SMALL_BLOCKS = 16
REPEATS = 3  # engine runs per N, each timed
HOST_BOUND = (
    "the output speed is this engine's: a Python scheduler on the host between the GPU's steps,"
    " so it depends on the host's CPU too and moves from run to run (see the spread)"
)


def predicted_concurrency(blocks: int, per_request: int, margin: float) -> int:
    """Requests the scheduler admits at once: none new once fewer than margin x blocks are free.

    transformers 5.17 checks the margin before each request it admits; 5.24 once per step,
    then admits every waiting request whose blocks fit."""
    free, running = blocks, 0
    while free >= per_request and (running == 0 or free >= margin * blocks):
        admit = 1 if RELEASE == "5.17" else free // per_request
        free -= admit * per_request
        running += admit
    return running


def run_budget(
    model: Any,
    cfg: dict[str, Any],
    memory: Memory,
    counts: tuple[int, ...],
    shape: tuple[int, int, int],
    settings: dict[str, Any],
    repeats: int,
) -> dict[str, Any]:
    """Serve each N with one cache budget; print and return speed, concurrency and memory."""
    block, prompt, new = shape
    per_request = ceil((prompt + new) / block)
    runs: dict[str, Any] = {}
    for n in counts:
        prompts = make_prompts(n, prompt, cfg["vocab_size"], seed=n)
        served = [
            serve(model, prompts, new, memory, block_size=block, **settings) for _ in range(repeats)
        ]
        facts = served[-1]
        wall = Spread.of([f["wall_s"] for f in served])
        tokens = facts["generated_tokens"]
        runs[str(n)] = {
            "wall_s": wall,
            "tok_s": derive(wall, lambda s, t=tokens: t / s),
            "peak_concurrency": max(f["peak_concurrency"] for f in served),
            "peak_allocated": max(f["peak_allocated"] for f in served),
            "peak_reserved": max(f["peak_reserved"] for f in served),
            **{k: facts[k] for k in ("generated_tokens", "max_batch_tokens")},
            "cache_in_use_at_peak": facts["peak_concurrency"]
            * per_request
            * block
            * cache_bytes_per_token(cfg),
        }
        blocks, margin = facts["num_blocks"], facts["safety_margin"]
    predicted = predicted_concurrency(blocks, per_request, margin)
    say(
        f"  {blocks:,} blocks of {block} tokens ({blocks * block:,} tokens), {per_request} per"
        f" request; the scheduler keeps {margin:.0%} of them for running requests to grow:"
        f" {predicted:,} requests can run at once"
    )
    print(
        f"  {'N':>4} {'at once':>8} {'tok/s':>9} {'(min':>8} {'max)':>8} {'wall s':>7}"
        f" {'peak allocated':>15} {'peak reserved':>14}"
    )
    for n, r in runs.items():
        t = r["tok_s"]
        print(
            f"  {n:>4} {r['peak_concurrency']:>8} {t.median:>9,.1f} {t.min:>8,.1f} {t.max:>8,.1f}"
            f" {r['wall_s'].median:>7.2f} {human(r['peak_allocated']):>15}"
            f" {human(r['peak_reserved']):>14}"
        )
        most = min(predicted, int(n))
        check(
            r["peak_concurrency"] <= most,
            f"{r['peak_concurrency']} requests ran at once, more than the {most} the cache admits",
        )
    return {
        "num_blocks": blocks,
        "cache_tokens": blocks * block,
        "safety_margin": margin,
        "predicted_concurrency": min(predicted, max(counts)),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_args(parser, weights=True)
    parser.add_argument("--model", default="Qwen3-8B", choices=list(MODELS.values()))
    parser.add_argument(
        "--repeats", type=int, help=f"engine runs per N ({REPEATS}; 2 with --tiny; at least 2)"
    )
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny, cpu_needs_tiny=True)
    shape = (32, 40, 4) if args.tiny else (256, 300, 64)  # block size, prompt, new tokens
    block, prompt, new = shape
    memory = Memory(device)
    print(describe(device, "torch", "transformers"))
    model, cfg, how = build_model(args.model, device, args.tiny, memory, args.weights)
    say(f"{args.model}: {how}; {prompt}-token prompts, {new} new tokens each")
    # a request takes its blocks when it starts (prompt + 1 token) and needs no more to finish
    per_request = ceil((prompt + new) / block)
    check((prompt + 1) // block + 1 == per_request, "a request would need a block while decoding")
    warm = make_prompts(2, prompt, cfg["vocab_size"], seed=99)
    serve(model, warm, 4, memory, max_memory_percent=0.9, block_size=block)  # loads the kernels

    repeats = args.repeats or (2 if args.tiny else REPEATS)
    check(repeats >= 2, "--repeats: at least 2 runs of each N, to show how far they spread")
    say(f"{HOST_BOUND}; {repeats} runs of each N")
    print("\nthe cache of a 0.9 fraction:")
    full = run_budget(model, cfg, memory, COUNTS, shape, {"max_memory_percent": 0.9}, repeats)
    # the small cache keeps the full one's largest batch, so that only the cache differs
    batch = full["runs"]["1"]["max_batch_tokens"]
    print(f"\na cache of {SMALL_BLOCKS} blocks:")
    small = run_budget(
        model,
        cfg,
        memory,
        COUNTS[1:],
        shape,
        {"num_blocks": SMALL_BLOCKS, "max_batch_tokens": batch},
        repeats,
    )
    share = ratio(small["runs"]["64"]["tok_s"], full["runs"]["64"]["tok_s"])
    growth = ratio(small["runs"]["64"]["tok_s"], small["runs"]["32"]["tok_s"])
    say(
        f"\n64 requests: {full['runs']['64']['tok_s'].median:,.1f} tok/s with room for all,"
        f" {small['runs']['64']['tok_s'].median:,.1f} tok/s with {SMALL_BLOCKS} blocks"
        f" ({share.median:.2f} x; {share.min:.2f} to {share.max:.2f} over the runs)"
    )
    say(
        f"with {SMALL_BLOCKS} blocks, 32 -> 64 requests: {growth.median:.2f} x the output"
        f" ({growth.min:.2f} to {growth.max:.2f}), as many running at once"
        f" ({small['runs']['32']['peak_concurrency']} and {small['runs']['64']['peak_concurrency']})"
    )
    results = {
        "device": device.type,
        "model": args.model,
        "weights_how": how,
        "sizes_to_card": True,
        "prompt_tokens": prompt,
        "new_tokens": new,
        "block_size": block,
        "blocks_per_request": per_request,
        "counts": list(COUNTS),
        "full": full,
        "small": small,
        "repeats": repeats,
        "host_bound": HOST_BOUND,
        "speedup_full_64_over_1": ratio(full["runs"]["64"]["tok_s"], full["runs"]["1"]["tok_s"]),
        "small_over_full_64": share,
        "small_64_over_32": growth,
        "full_64_over_32": ratio(full["runs"]["64"]["tok_s"], full["runs"]["32"]["tok_s"]),
    }
    finish("concurrency", results, memory, clock)


if __name__ == "__main__":
    main()
