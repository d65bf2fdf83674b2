"""Step 2: the blocks a real engine gives each request of the mix, against the paper's count.

transformers' continuous batching serves the first 16 requests of the mix (each prompt with its
own answer length) from a paged cache of 24,576 token slots, three times: in blocks of 16, 64
and 256 tokens. The script watches the engine's own cache object: the blocks each request holds
when it ends, the most blocks and requests held at once. Every request's blocks must equal the
paper's ceil(tokens / block size), and the slots left empty in last blocks are set against the
prediction of half a block per request. The cache is fixed, not a share of the card, so the
step needs the same memory on a 24 GB card as on an H200.

    python3 blocks.py
    python3 blocks.py --weights Qwen/Qwen3-8B     # real weights from the Hugging Face Hub
    python3 blocks.py --device cpu --tiny         # a shrunken model, in seconds, on a CPU
"""

from __future__ import annotations

import random
from typing import Any

import engine
from labkit import device, memory, results
from labkit.checks import check
from labkit.timing import Stopwatch
from labkit.units import human
from mix import BLOCKS, TINY_DIVISOR, block_sizes, blocks_for, paged_fit, static_fit, the_mix

REQUESTS = 16
CACHE_TOKENS = 24_576  # 3.375 GiB for Qwen3-8B: less than one reservation of its whole context
MAX_BATCH_TOKENS = 1024  # the largest batch: keeps the working space under 1 GiB


def prompts_for(lengths: list[int], vocab: int, seed: int = 0) -> list[list[int]]:
    """Random token ids, every prompt different (no prefix is shared)."""
    rng = random.Random(seed)
    return [[rng.randrange(1, vocab) for _ in range(n)] for n in lengths]


def run_one(model: Any, dev: Any, block: int, mix: list[Any], prompts: list[list[int]],
            cache_tokens: int, batch: int) -> dict[str, Any]:  # fmt: skip
    """Serve the requests once in blocks of `block` tokens; what the engine held, and the paper's."""
    settings = engine.cb_config(block, cache_tokens // block, batch)
    _, seen, lines = engine.serve(model, prompts, [r.answer for r in mix], settings, dev)
    check(len(seen.caches) == 1, f"the engine built {len(seen.caches)} caches, not one")
    cache = seen.caches[0]
    check(
        cache["block_size"] == block,
        f"the engine made blocks of {cache['block_size']}, not {block}",
    )
    held = seen.final_blocks()
    paper = [blocks_for(r.tokens, block) for r in mix]
    got = [held[f"req_{i}"] for i in range(len(mix))]
    for i, (g, p) in enumerate(zip(got, paper, strict=True)):
        check(g == p, f"blocks of {block}: request {i} ({mix[i].tokens:,} tokens) held {g} blocks,"
              f" the paper says {p}")  # fmt: skip
    tokens = sum(r.tokens for r in mix)
    wasted = sum(got) * block - tokens
    return {
        "block": block,
        "engine": cache,
        "planner_line": engine.planner_lines(lines)[-1],
        "blocks": sum(got),
        "paper_blocks": sum(paper),
        "slots": sum(got) * block,
        "tokens": tokens,
        "wasted_tokens": wasted,
        "wasted_per_request": wasted / len(mix),
        "predicted_per_request": block / 2,
        "wasted_share": wasted / (sum(got) * block),
        "peak_blocks": seen.peak_blocks,
        "peak_slots": seen.peak_blocks * block,
        "peak_requests": seen.peak_requests,
        "preempted": seen.preempted(),
        "paper_fit": paged_fit(mix, cache_tokens, block),
        "per_request": [[r.tokens, g] for r, g in zip(mix, got, strict=True)],
    }


def main() -> None:
    parser = device.arguments(__doc__, weights=True)
    parser.add_argument(
        "--requests", type=int, default=REQUESTS, help="first N requests of the mix"
    )
    args = parser.parse_args()
    dev = device.pick(args, cpu_needs_tiny=True)
    clock, peak = Stopwatch(), memory.PeakMemory(dev)
    print(device.describe(dev, "torch", "transformers"))
    scale = TINY_DIVISOR if args.tiny else 1
    cache_tokens, batch = CACHE_TOKENS // scale, MAX_BATCH_TOKENS // scale
    mix = the_mix(tiny=args.tiny)[: args.requests]
    model, cfg, how = engine.build_model(dev, args.tiny, args.weights)
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    print(f"Qwen3-8B: {how}; {per_token:,} B of cache a token")
    context = int(cfg["max_position_embeddings"]) // scale
    longest = max(r.tokens for r in mix)
    tight = 2 ** (longest - 1).bit_length()
    print(
        f"engine: transformers continuous batching, attention {engine.ATTENTION}, setting"
        f" '{engine.PAGE_SIZE}';\n  cache of {cache_tokens:,} token slots"
        f" ({human(cache_tokens * per_token)}), batches of at most {batch:,} tokens"
    )
    print(
        f"{len(mix)} requests of the mix: {sum(r.prompt for r in mix):,} prompt tokens,"
        f" answers of {min(r.answer for r in mix):,}-{max(r.answer for r in mix):,} tokens;\n "
        f" {sum(r.tokens for r in mix):,} tokens in the cache at their ends"
    )
    print(
        f"reserved whole, this cache holds {static_fit(cache_tokens, context)} requests of"
        f" {context:,} tokens, or {static_fit(cache_tokens, tight)} of {tight:,}"
    )
    prompts = prompts_for([r.prompt for r in mix], int(cfg["vocab_size"]))
    runs: dict[str, Any] = {}
    print(f"\n{'block':>6} {'blocks held':>12} {'paper':>7} {'empty slots':>12} {'a request':>10}"
          f" {'(half a block)':>15} {'at once':>8} {'peak slots':>11}")  # fmt: skip
    for label, block in zip(BLOCKS, block_sizes(args.tiny), strict=True):
        r = run_one(model, dev, block, mix, prompts, cache_tokens, batch)
        r["peak_gpu_memory"] = peak.part()
        memory.release(dev)  # the engine's cache is gone: hand its memory back before the next
        runs[f"b{label}"] = r  # keyed by the full-size block: b16 holds blocks of 4 with --tiny
        print(f"{block:>6} {r['blocks']:>12,} {r['paper_blocks']:>7,} {r['wasted_tokens']:>12,}"
              f" {r['wasted_per_request']:>10.1f} {r['predicted_per_request']:>15.1f}"
              f" {r['peak_requests']:>8} {r['peak_slots']:>11,}")  # fmt: skip
    print("\nthe engine's own log line, each time:")
    for r in runs.values():
        print(f"  {r['planner_line']}")
    smallest, largest = runs[f"b{BLOCKS[0]}"], runs[f"b{BLOCKS[-1]}"]
    check(largest["wasted_tokens"] > smallest["wasted_tokens"], "larger blocks wasted no more")
    report = peak.report(
        paper=cache_tokens * per_token + sum(p.nbytes for p in model.parameters()),
        what="weights + the fixed cache",
    )
    results.write_results(
        "blocks",
        {
            "device": dev.type,
            "tiny": args.tiny,
            "gpu": device.describe(dev, "torch", "transformers"),
            "weights_how": how,
            "setting": engine.PAGE_SIZE,
            "attention": engine.ATTENTION,
            "bytes_per_token": per_token,
            "cache_tokens": cache_tokens,
            "cache_bytes": cache_tokens * per_token,
            "max_batch_tokens": batch,
            "requests": len(mix),
            "tokens": sum(r.tokens for r in mix),
            "context": context,
            "tight_reservation": tight,
            "static_full_fit": static_fit(cache_tokens, context),
            "static_tight_fit": static_fit(cache_tokens, tight),
            "runs": runs,
            "peak_gpu_memory": report,
            "wall_s": clock.seconds(),
        },
    )
    print(f"wrote results/blocks.json ({clock.seconds():.1f} s)")


if __name__ == "__main__":
    main()
