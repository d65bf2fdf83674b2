"""Step 1: how many requests of a realistic mix fit a KV cache, reserved whole or in blocks.

A server that gives each request one reservation of the model's whole context (a static cache of
max_model_len tokens) holds few requests, and most of each reservation stays empty. A paged
cache gives each request whole blocks as it grows; only the last block of each is part empty.
For Qwen3-8B on a 24 GB RTX 4090 and on an H200, with the cache each card leaves under
transformers' rule (a share of the memory free once the weights are loaded), this counts the
requests of the mix (mix.py) that fit at once, and the slots left empty in last blocks against
the prediction of half a block per request.

    python3 paper.py
    python3 paper.py --blocks 16 1024     # other block sizes (the first one is kept as b16, ...)
"""

from __future__ import annotations

import argparse
import math
import textwrap
from pathlib import Path
from typing import Any

from labkit import configs, facts, results
from labkit.checks import check
from labkit.units import human
from mix import (
    REQUESTS,
    SEED,
    block_sizes,
    last_block_waste,
    paged_fit,
    static_fit,
    summary,
    the_mix,
)

MODEL = Path(__file__).with_name("models") / "Qwen3-8B" / "config.json"
CARDS = ("rtx-4090", "h200")


def card_budget(card: str, cfg: dict[str, Any], per_token: int) -> dict[str, Any]:
    """The cache a card leaves for Qwen3-8B under transformers' rule, in bytes and tokens."""
    weights = configs.weight_bytes(cfg)
    budget = facts.transformers(card, weights=weights)
    tokens = budget.cache // per_token
    return {
        "rule": budget.rule,
        "share": budget.share,
        "lines": budget.lines,
        "cache_bytes": budget.cache,
        "cache_tokens": tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--blocks", type=int, nargs=3, default=list(block_sizes()), metavar="TOKENS",
        help="three block sizes to compare (16 64 256)",
    )  # fmt: skip
    blocks = tuple(parser.parse_args().blocks)
    cfg = configs.load_config(MODEL)
    per_token = configs.kv_bytes_per_token(cfg, 2)
    check(per_token == 147_456, f"Qwen3-8B's cache is 147,456 B a token, not {per_token:,}")
    context = int(cfg["max_position_embeddings"])
    mix = the_mix()
    lengths = [r.tokens for r in mix]
    longest = max(lengths)
    tight = 2 ** math.ceil(math.log2(longest))  # the smallest power of two that holds any request
    mean = sum(lengths) / len(lengths)
    print(f"Qwen3-8B: {per_token:,} B of keys and values a token (bf16); context {context:,}")
    p, a = summary([r.prompt for r in mix]), summary([r.answer for r in mix])
    print(
        f"the mix: {len(mix):,} requests (seed {SEED}); prompts {p['min']:,}-{p['max']:,} tokens"
        f" (median {p['median']:,}),\n  answers {a['min']:,}-{a['max']:,} (median {a['median']:,})"
    )
    print(f"  a request holds {mean:,.0f} tokens on average at its end; the longest {longest:,}")

    cards: dict[str, Any] = {}
    for card in CARDS:
        b = card_budget(card, cfg, per_token)
        tokens = b["cache_tokens"]
        rule = textwrap.wrap(f"{facts.card(card).label}: {b['rule']}", 98, subsequent_indent="  ")
        print("\n" + "\n".join(rule))
        print(f"  cache {human(b['cache_bytes'])} = {tokens:,} token slots")
        fits = {
            "static_full": static_fit(tokens, context),
            "static_tight": static_fit(tokens, tight),
            "exact": paged_fit(mix, tokens, 1),
        }
        print(f"  {'one reservation of ' + format(context, ',') + ' tokens each':<44}"
              f" {fits['static_full']:>5,} requests")  # fmt: skip
        print(f"  {'one reservation of ' + format(tight, ',') + ' tokens each':<44}"
              f" {fits['static_tight']:>5,} requests")  # fmt: skip
        for label, block in zip(block_sizes(), blocks, strict=True):
            fits[f"b{label}"] = paged_fit(mix, tokens, block)
            print(f"  {'blocks of ' + str(block) + ' tokens':<44} {fits[f'b{label}']:>5,}"
                  " requests")  # fmt: skip
        print(f"  {'every token slot used (no blocks, no waste)':<44} {fits['exact']:>5,} requests")
        check(fits["exact"] < len(mix), f"the mix ran out before the {card}'s cache did")
        check(
            fits["static_full"]
            <= fits["static_tight"]
            <= fits["b256"]
            <= fits["b16"]
            <= fits["exact"],
            "the counts are out of order: smaller reservations must fit as many requests or more",
        )
        cards[card] = b | {
            "fits": fits,
            "paged_over_static": fits["b16"] / max(fits["static_full"], 1),
            "paged_over_tight": fits["b16"] / max(fits["static_tight"], 1),
        }

    print("\nempty slots in the last block of each request (all of the mix):")
    print(
        f"  {'block':>5} {'a request':>10} {'prediction':>11} {'of the slots':>13} {'a request':>10}"
    )
    wastes = {}
    for label, block in zip(block_sizes(), blocks, strict=True):
        w = last_block_waste(mix, block)
        wastes[f"b{label}"] = w
        print(
            f"  {block:>5} {w['wasted_per_request']:>6.1f} tok {w['predicted_per_request']:>7.1f} tok"
            f" {w['wasted_share']:>13.2%} {w['wasted_per_request'] * per_token / 2**20:>6.2f} MiB"
        )
        if block * 4 <= mean:  # requests span many blocks: the last one's fill is spread evenly
            check(
                0.8 < w["per_request_over_predicted"] < 1.2,
                f"blocks of {block}: the waste is far from half a block a request",
            )
        else:
            print(
                f"  (blocks of {block} are not small against the requests: half a block is no rule)"
            )
    used = mean / context
    print(
        f"\none reservation of {context:,} tokens: a request of the mix uses {used:.1%} of it"
        f" on average;\n  one of {tight:,}: {mean / tight:.1%}"
    )
    results.write_results(
        "paper",
        {
            "device": "none",
            "tiny": False,
            "model": "Qwen3-8B",
            "bytes_per_token": per_token,
            "context": context,
            "tight_reservation": tight,
            "blocks": list(blocks),
            "mix": {
                "seed": SEED,
                "requests": REQUESTS,
                "prompt": p,
                "answer": a,
                "tokens_mean": mean,
                "tokens_longest": longest,
                "lengths": [[r.prompt, r.answer] for r in mix],
            },
            "cards": cards,
            "waste": wastes,
            "static_used_share": used,
            "tight_used_share": mean / tight,
        },
    )
    print("wrote results/paper.json")


if __name__ == "__main__":
    main()
