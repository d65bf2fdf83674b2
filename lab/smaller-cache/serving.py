"""Step 4: how many 32K-token conversations each design serves from one GPU, by vLLM's rule.

From step 2's measured sizes (and step 3's, for the 8-bit cache), with vLLM's memory rule and
the cards' memory from the course's facts (labkit/facts.toml):

    cache         = gpu_memory_utilization x the card's memory as PyTorch sees it
                    - weights - memory outside PyTorch - activation peak
    conversations = cache / cache of one 32,768-token conversation   (rounded down)

The activation peak is the larger of two working spaces measured in step 2: a prompt of 8,192
tokens in one pass, and decoding. For one H200 and for a 24 GB card (an RTX 4090). Standard
library only: it reads results/designs.json (and results/fp8.json when step 3 has run).

    python3 serving.py
"""

from __future__ import annotations

import argparse
from typing import Any

from labkit import facts
from labkit.checks import check
from labkit.results import need_results, read_results, write_results
from labkit.timing import Stopwatch
from labkit.units import human

CARDS = {"h200": "h200", "card_24gb": "rtx-4090"}  # results key: the card in the facts file
FP8 = "grouped-query, cache stored as float8 with a scale per head and token"


def plan(card: str, r: dict[str, Any], outside: int) -> dict[str, Any]:
    """vLLM's cache on a card for one design's measured sizes, and the conversations it holds.
    A conversation of 32,768 tokens fills whole blocks of 16 tokens: no block is left part-full,
    so the count is the cache divided by one conversation's cache, rounded down."""
    budget = facts.vllm(
        card, activation_peak=r["activation"], non_torch=outside, weights=r["weights"]
    )
    return {
        "memory": budget.lines["total"],
        "room": budget.cache,
        "conversations": max(budget.cache, 0) // r["per_conversation"],
        "fits_weights": budget.cache > 0,
        "budget": budget,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    clock = Stopwatch()
    found = need_results("designs", "designs.py (step 2)")
    fp8 = read_results("fp8")
    context, outside = found["context_tokens"], found["outside_bytes"]
    print(
        f"conversations of {context:,} tokens; weights, working space and cache as measured in"
        f" step 2 ({found['device']});\nmemory outside PyTorch {human(outside)}"
    )
    ran = [r for r in found["designs"].values() if not r["skipped"]]
    measured = [r["prefill_work_bytes"] for r in ran if r["prefill_work_bytes"] is not None]
    prompt, chunk = max(measured, default=0), max((r["prompt_tokens"] for r in ran), default=0)
    if not measured:
        print("no design with plain heads ran in step 2: no prompt's working space is counted")

    rows: dict[str, dict[str, Any]] = {}
    for name in found["order"]:
        r = found["designs"][name]
        if r["skipped"]:
            print(f"  {name}: skipped in step 2 (it did not fit that GPU); left out")
            continue
        own = r["prefill_work_bytes"]
        rows[name] = {
            "description": r["description"],
            "weights": r["weight_bytes_allocated"],  # what the GPU's memory really holds
            "work": r["work_bytes"],
            # designs without a prompt pass of their own take the largest one measured
            "prefill": own if own is not None else prompt,
            "prefill_measured": own is not None,
            "per_conversation": r["cache_bytes_reserved"],
        }
        rows[name]["activation"] = max(rows[name]["prefill"], rows[name]["work"])
    if fp8 and "gqa" in rows and fp8["context_tokens"] == context:
        rows["gqa_fp8"] = dict(
            rows["gqa"],
            description=FP8,
            per_conversation=fp8["cache"]["fp8"]["cache_bytes_reserved"],
        )
    check(bool(rows), "step 2 measured no design")

    share = facts.fact("engines.vllm.gpu_memory_utilization").value
    cards: dict[str, Any] = {}
    for key, card in CARDS.items():
        c = facts.card(card)
        total = c.torch_total or 0
        cards[key] = {"card": card, "name": c.label, "memory": total, "share": share,
                      "requested": facts.vllm(card, activation_peak=0, non_torch=0,
                                              weights=0).lines["requested"]}  # fmt: skip
        print(
            f"{c.label}: {human(total)} as PyTorch sees it; vLLM takes {share:.2f} of it,"
            f" {human(cards[key]['requested'])}"
        )
    results: dict[str, Any] = {
        # the sizes it reads are step 2's: from a GPU, or from the CPU's shrunk models
        "device": found["device"],
        "tiny": found.get("tiny", False),
        "context_tokens": context,
        "outside_bytes": outside,
        "prefill_work_bytes": prompt,
        "prompt_tokens": chunk,
        "rule": facts.get("engines.vllm")["rule"],
        "share": share,
        "designs": {},
        "cards": cards,
    }
    print(
        f"\n{'design':<8} {'weights':>10} {'activation':>10} {'cache/conv':>11}"
        + "".join(f" {cards[k]['name']:>9}" for k in CARDS)
    )
    for name, r in rows.items():
        out: dict[str, Any] = {
            "description": r["description"],
            "weight_bytes": r["weights"],
            "work_bytes": r["work"],
            "prefill_work_bytes": r["prefill"],
            "prefill_measured": r["prefill_measured"],
            "activation_bytes": r["activation"],
            "cache_bytes_per_conversation": r["per_conversation"],
        }
        cells = []
        for key, card in CARDS.items():
            out[key] = plan(card, r, outside)
            cells.append(
                f" {out[key]['conversations']:>9,}" if out[key]["fits_weights"] else f" {'none':>9}"
            )
        results["designs"][name] = out
        print(
            f"{name:<8} {human(r['weights']):>10} {human(r['activation']):>10}"
            f" {human(r['per_conversation']):>11}" + "".join(cells)
        )
    if "gqa" in results["designs"]:
        base = results["designs"]["gqa"]["h200"]["conversations"]
        for out in results["designs"].values():
            out["h200"]["vs_gqa"] = out["h200"]["conversations"] / base if base else None
    print(
        f"\nvLLM's rule: cache = {share:.2f} x memory - weights - outside PyTorch - activation"
        f"\npeak (the larger of a prompt of {chunk:,} tokens in one pass and decoding, step 2);"
        "\nconversations = cache / the cache of one conversation"
    )
    results.update(
        peak_gpu_memory=0,
        gpu="none: this step does arithmetic on step 2's numbers",
        seconds=clock.seconds(),
    )
    print(f"wrote {write_results('serving', results)}")
    print(f"step time: {clock.seconds():.2f} s; peak GPU memory: 0 B (no GPU used)")


if __name__ == "__main__":
    main()
