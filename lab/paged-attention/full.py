"""Step 4: what the engine does when its blocks run out, in its own log.

A paged engine admits a request when its prompt's blocks are free, not its whole future: the
answer's blocks come one at a time as it grows. So it may admit more requests than the cache can
hold to their ends, and when a growing request finds no free block, the engine must take blocks
back from another: it preempts it, throws its cache away, puts it back in the queue and computes
it again later. Here 12 requests of 256 prompt tokens and 256 answer tokens go with
generate_batch to an engine whose cache holds 32 blocks of 64 tokens (2,048 slots): four such
requests to their ends. The engine's own log lines are printed as it wrote them, and its cache
object is watched: how many requests it held at once, how often it preempted, and how many
token slots of computed cache it threw away.

    python3 full.py
    python3 full.py --device cpu --tiny      # a shrunken model, in seconds, on a CPU
"""

from __future__ import annotations

import re

import engine
from blocks import prompts_for
from labkit import device, memory, results
from labkit.checks import check
from labkit.timing import Stopwatch
from mix import blocks_for

REQUESTS, PROMPT, ANSWER, BLOCK, NUM_BLOCKS = 12, 256, 256, 64, 32
TINY = {"prompt": 32, "answer": 32, "block": 8}  # --tiny: the same counts of blocks, / 8


def shown(line: str) -> str:
    """A log line cut to 100 characters for the terminal (the results file keeps it whole)."""
    return line if len(line) <= 98 else line[:95] + "..."


def main() -> None:
    parser = device.arguments(__doc__, weights=True)
    args = parser.parse_args()
    dev = device.pick(args, cpu_needs_tiny=True)
    clock, peak = Stopwatch(), memory.PeakMemory(dev)
    print(device.describe(dev, "torch", "transformers"))
    prompt, answer, block = (TINY["prompt"], TINY["answer"], TINY["block"]) if args.tiny else (
        PROMPT, ANSWER, BLOCK)  # fmt: skip
    model, cfg, how = engine.build_model(dev, args.tiny, args.weights)
    print(f"Qwen3-8B: {how}")
    final = prompt + answer - 1
    whole = NUM_BLOCKS // blocks_for(final, block)
    print(
        f"{REQUESTS} requests of {prompt} prompt tokens and {answer} answer tokens: each ends with"
        f" {final} tokens = {blocks_for(final, block)} blocks of {block}"
    )
    print(
        f"the cache: {NUM_BLOCKS} blocks of {block} tokens, enough for {whole} requests to their ends"
    )
    prompts = prompts_for([prompt] * REQUESTS, int(cfg["vocab_size"]), seed=1)
    settings = engine.cb_config(block, NUM_BLOCKS, 4 * prompt)
    with engine.engine_log() as lines, engine.trace() as seen, engine.memory_reading(dev):
        outputs = model.generate_batch(
            prompts, generation_config=engine.greedy(answer), continuous_batching_config=settings
        )
    check(len(outputs) == REQUESTS, f"{REQUESTS - len(outputs)} requests got no answer")
    for rid, out in outputs.items():
        check(out.error is None, f"{rid} failed in the engine: {out.error}")
        check(len(out.generated_tokens) == answer, f"{rid} stopped before its {answer} tokens")
    print("\nthe engine's log (ContinuousBatchingLogger, level INFO), in order:")
    kept = [s for s in lines if s.startswith(("Paged cache", "Offloaded", "Breaking"))]
    for line in kept:
        print(f"  {shown(line)}")
    offloads = [s for s in lines if s.startswith("Offloaded")]
    waits = [s for s in lines if s.startswith("Breaking mid-loop")]
    soft = sum(int(m) for s in offloads for m in re.findall(r"(\d+) soft reset", s))
    final_frees = seen.final_blocks()
    # every free but each request's last one gave back blocks holding computed cache
    last_index = {rid: i for i, (rid, _) in enumerate(seen.freed)}
    thrown = sum(b for i, (rid, b) in enumerate(seen.freed) if last_index[rid] != i) * block
    check(seen.preempted() > 0, "the engine never preempted: the cache did not run out")
    check(seen.peak_requests > whole, "the engine never held more requests than fit to their ends")
    check(len(final_frees) == REQUESTS, "not every request gave its blocks back")
    check(seen.preempted() == soft, f"the engine's log reset {soft} requests, its cache was seen"
          f" taking blocks back {seen.preempted()} times")  # fmt: skip
    cache = seen.caches[0]
    print(
        f"\nthe cache object: at most {seen.peak_requests} requests held blocks at once"
        f" ({seen.peak_blocks} of {cache['num_blocks']} blocks);\n{seen.preempted()} preemptions"
        f" threw away {thrown:,} token slots of computed cache, to be computed again"
    )
    print(f"log lines: {len(offloads)} 'Offloaded ...' ({soft} requests reset),"
          f" {len(waits)} 'Breaking mid-loop ... cache is full'")  # fmt: skip
    report = peak.report()
    results.write_results(
        "full",
        {
            "device": dev.type,
            "tiny": args.tiny,
            "gpu": device.describe(dev, "torch", "transformers"),
            "weights_how": how,
            "requests": REQUESTS,
            "prompt": prompt,
            "answer": answer,
            "block": block,
            "num_blocks": cache["num_blocks"],
            "final_tokens": final,
            "blocks_per_request": blocks_for(final, block),
            "whole_fit": whole,
            "peak_requests": seen.peak_requests,
            "peak_blocks": seen.peak_blocks,
            "preempted": seen.preempted(),
            "thrown_slots": thrown,
            "offload_lines": len(offloads),
            "soft_resets_logged": soft,
            "wait_lines": len(waits),
            "first_offload": offloads[0] if offloads else "",
            "planner_line": engine.planner_lines(lines)[-1],
            "log": kept,
            "peak_gpu_memory": report,
            "wall_s": clock.seconds(),
        },
    )
    print(f"wrote results/full.json ({clock.seconds():.1f} s)")


if __name__ == "__main__":
    main()
