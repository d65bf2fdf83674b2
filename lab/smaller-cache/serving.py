"""Step 4: how many 32K-token conversations each design serves from one GPU.

From step 2's measured sizes (and step 3's, for the 8-bit cache):

    room          = GPU memory - memory outside PyTorch - weights - working space
    conversations = room / cache of one 32,768-token conversation   (rounded down)

for one H200 (139 GiB usable) and for a 24 GB card. Standard library only: it reads
results/designs.json (and results/fp8.json when step 3 has run).

    python3 serving.py
"""

from __future__ import annotations

import argparse
from typing import Any

from cachelab import (
    CARD_24GB,
    DESCRIPTIONS,
    DESIGN_NAMES,
    H200_USABLE,
    Stopwatch,
    check,
    human,
    read_results,
    write_results,
)

CARDS = {"h200": ("one H200", H200_USABLE), "card_24gb": ("a 24 GB card", CARD_24GB)}


def plan(
    memory: int, outside: int, weights: int, work: int, per_conversation: int
) -> dict[str, Any]:
    """The room left for caches on a card of `memory` bytes, and the conversations it holds."""
    room = memory - outside - weights - work
    return {
        "memory": memory,
        "room": room,
        "conversations": max(room, 0) // per_conversation,
        "fits_weights": room > 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    clock = Stopwatch()
    found = read_results("designs")
    check(found is not None, "results/designs.json is missing: run designs.py first (step 2)")
    assert found is not None
    fp8 = read_results("fp8")
    context, outside = found["context_tokens"], found["outside_bytes"]
    print(
        f"conversations of {context:,} tokens; weights and cache sizes as measured in step 2"
        f" ({found['device']}); memory outside PyTorch {human(outside)}"
    )

    rows: dict[str, dict[str, Any]] = {}
    for name in [n for n in DESIGN_NAMES if n in found["designs"]]:
        r = found["designs"][name]
        if r["skipped"]:
            print(f"  {name}: skipped in step 2 (it did not fit that GPU); left out")
            continue
        rows[name] = {
            "weights": r["weight_bytes_allocated"],  # what the GPU's memory really holds
            "work": r["work_bytes"],
            "per_conversation": r["cache_bytes_reserved"],
        }
    if fp8 and "gqa" in rows and fp8["context_tokens"] == context:
        rows["gqa_fp8"] = dict(
            rows["gqa"], per_conversation=fp8["cache"]["fp8"]["cache_bytes_reserved"]
        )
    check(bool(rows), "step 2 measured no design")

    results: dict[str, Any] = {
        # the sizes it reads are step 2's: from a GPU, or from the CPU's shrunk models
        "device": found["device"],
        "tiny": found.get("tiny", False),
        "context_tokens": context,
        "outside_bytes": outside,
        "designs": {},
        "cards": {k: {"name": v[0], "memory": v[1]} for k, v in CARDS.items()},
    }
    print(
        f"\n{'design':<8} {'weights':>10} {'work':>9} {'cache/conv':>11}"
        + "".join(f" {label:>16}" for label, _ in CARDS.values())
    )
    for name, r in rows.items():
        out = {
            "description": DESCRIPTIONS[name],
            "weight_bytes": r["weights"],
            "work_bytes": r["work"],
            "cache_bytes_per_conversation": r["per_conversation"],
        }
        cells = []
        for key, (_, memory) in CARDS.items():
            out[key] = plan(memory, outside, r["weights"], r["work"], r["per_conversation"])
            cells.append(
                f"{out[key]['conversations']:>16,}"
                if out[key]["fits_weights"]
                else f"{'no room':>16}"
            )
        results["designs"][name] = out
        print(
            f"{name:<8} {human(r['weights']):>10} {human(r['work']):>9} {human(r['per_conversation']):>11}"
            + "".join(cells)
        )
    if "gqa" in results["designs"]:
        base = results["designs"]["gqa"]["h200"]["conversations"]
        for name, out in results["designs"].items():
            out["h200"]["vs_gqa"] = out["h200"]["conversations"] / base if base else None
    print(
        "\nroom = memory - outside PyTorch - weights - working space (the decode peak beyond"
        " weights and cache, measured in step 2); conversations = room / cache per conversation"
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
