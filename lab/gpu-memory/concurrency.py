"""Step 5: the cache budget sets how many requests run at once, and so the output speed.

The engine serves N = 1, 8, 32 and 64 requests at once (prompts of 300 tokens, 64 new tokens
each), first with the cache a fraction of 0.9 gives (room for all of them), then N = 8, 32 and
64 with a cache of only 16 blocks (4,096 tokens). With the small cache the scheduler runs only
a few requests at once, the others wait their turn, and the output speed stops growing with N.
The first budget sizes itself to the card.

    python3 concurrency.py                      # Qwen3-8B
    python3 concurrency.py --model Qwen3-0.6B   # quicker
    python3 concurrency.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
from math import ceil
from typing import Any

from memlab import MODELS, Clock, check, human, write_results
from planner import cache_bytes_per_token
from serving import Memory, add_device_args, build_model, describe, make_prompts, pick_device, serve

COUNTS = (1, 8, 32, 64)
SMALL_BLOCKS = 16


def predicted_concurrency(blocks: int, per_request: int, margin: float) -> int:
    """Requests the scheduler admits at once: none new once fewer than margin x blocks are free."""
    free, running = blocks, 0
    while free >= per_request and (running == 0 or free >= margin * blocks):
        free -= per_request
        running += 1
    return running


def run_budget(
    model: Any,
    cfg: dict[str, Any],
    memory: Memory,
    counts: tuple[int, ...],
    shape: tuple[int, int, int],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Serve each N with one cache budget; print and return speed, concurrency and memory."""
    block, prompt, new = shape
    per_request = ceil((prompt + new) / block)
    runs: dict[str, Any] = {}
    for n in counts:
        prompts = make_prompts(n, prompt, cfg["vocab_size"], seed=n)
        facts = serve(model, prompts, new, memory, block_size=block, **settings)
        runs[str(n)] = {
            "tok_s": facts["generated_tokens"] / facts["wall_s"],
            **{
                k: facts[k]
                for k in (
                    "wall_s",
                    "generated_tokens",
                    "peak_concurrency",
                    "peak_allocated",
                    "peak_reserved",
                    "max_batch_tokens",
                )
            },
            "cache_in_use_at_peak": facts["peak_concurrency"]
            * per_request
            * block
            * cache_bytes_per_token(cfg),
        }
        blocks, margin = facts["num_blocks"], facts["safety_margin"]
    predicted = predicted_concurrency(blocks, per_request, margin)
    print(
        f"  {blocks:,} blocks of {block} tokens ({blocks * block:,} tokens), {per_request} per"
        f" request; the scheduler keeps {margin:.0%} of them for running requests to grow:"
        f" {predicted:,} requests can run at once"
    )
    print(
        f"  {'N':>4} {'at once':>8} {'tok/s':>9} {'wall s':>8} {'peak allocated':>16}"
        f" {'peak reserved':>16}"
    )
    for n, r in runs.items():
        print(
            f"  {n:>4} {r['peak_concurrency']:>8} {r['tok_s']:>9,.1f} {r['wall_s']:>8.2f}"
            f" {human(r['peak_allocated']):>16} {human(r['peak_reserved']):>16}"
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument("--model", default="Qwen3-8B", choices=list(MODELS.values()))
    args = parser.parse_args()
    clock, device = Clock(), pick_device(args.device, args.tiny)
    shape = (32, 40, 4) if args.tiny else (256, 300, 64)  # block size, prompt, new tokens
    block, prompt, new = shape
    memory = Memory(device)
    print(describe(device))
    model, cfg, how = build_model(args.model, device, args.tiny, memory, args.weights)
    print(f"{args.model}: {how}; {prompt}-token prompts, {new} new tokens each")
    # a request takes its blocks when it starts (prompt + 1 token) and needs no more to finish
    per_request = ceil((prompt + new) / block)
    check((prompt + 1) // block + 1 == per_request, "a request would need a block while decoding")
    warm = make_prompts(2, prompt, cfg["vocab_size"], seed=99)
    serve(model, warm, 4, memory, max_memory_percent=0.9, block_size=block)  # loads the kernels

    print("\nthe cache of a 0.9 fraction:")
    full = run_budget(model, cfg, memory, COUNTS, shape, {"max_memory_percent": 0.9})
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
    )
    ratio = small["runs"]["64"]["tok_s"] / full["runs"]["64"]["tok_s"]
    print(
        f"\n64 requests: {full['runs']['64']['tok_s']:,.1f} tok/s with room for all,"
        f" {small['runs']['64']['tok_s']:,.1f} tok/s with {SMALL_BLOCKS} blocks ({ratio:.2f} x)"
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
        "speedup_full_64_over_1": full["runs"]["64"]["tok_s"] / full["runs"]["1"]["tok_s"],
        "small_over_full_64": ratio,
        "peak_gpu_memory": memory.step_peak(),
        "wall_s": clock.seconds(),
    }
    print(
        f"\npeak GPU memory: {human(results['peak_gpu_memory']['reserved'])} reserved (the 0.9"
        f" budget sizes itself to the card); wall time {results['wall_s']:.1f} s"
    )
    print(f"wrote {write_results('concurrency', results)}")


if __name__ == "__main__":
    main()
