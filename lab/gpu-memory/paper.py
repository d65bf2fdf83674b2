"""Step 1: where a GPU's memory goes when a model is served, worked out on paper.

For Qwen3-8B and Qwen3-0.6B, on an H200 and on a 24 GB card (cards.json), line by line: the
card's memory, what the CUDA context and libraries take, the weights, the share the serving
engine takes (a fraction F of what is still free, as transformers' continuous batching does),
and how its planner divides that share: the working space of its largest batch, the batch's
tensors and attention mask, and the KV cache in whole blocks. Then the cache in tokens, the
conversations it holds, and what one conversation-hour costs at the cards' dated prices.

Last, a published cross-check (crosscheck.json): a vLLM start-up log on an A100-40GB serving
Llama-3-8B, whose own answer the same arithmetic must give.

Standard library only:
    python3 paper.py
    python3 paper.py --fraction 0.5 --card a100=40960:39.5   # a card: total MiB : usable GiB
"""

from __future__ import annotations

import argparse
from typing import Any

from memlab import (
    CONTEXTS,
    GIB,
    MIB,
    MODELS,
    check,
    human,
    load_cards,
    load_config,
    load_crosscheck,
    row,
    weight_bytes,
    write_results,
)
from planner import SEGMENTS, budget, cache_bytes_per_token, segments

SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def parse_card(text: str) -> tuple[str, dict[str, Any]]:
    """NAME=TOTAL_MIB:USABLE_GIB -> a card like those of cards.json."""
    name, _, sizes = text.partition("=")
    total, _, usable = sizes.partition(":")
    card = {
        "name": name,
        "total_bytes": int(float(total) * MIB),
        "usable_bytes": int(float(usable) * GIB),
    }
    check(
        0 < card["usable_bytes"] <= card["total_bytes"],
        f"--card {text}: usable must be within the total",
    )
    return name.lower().replace(".", "_").replace("-", "_"), card


def show_budget(card: dict[str, Any], model: str, cfg: dict[str, Any], b: dict[str, Any]) -> None:
    """Print one card's budget for one model, line by line."""
    f = b["fraction"]
    print(f"\n{model} on {card['name']}, memory fraction {f:.2f}")
    print(row("card memory (the total nvidia-smi shows)", b["total"]))
    print(row("- CUDA context, libraries, driver (the card's total - usable)", -b["context"]))
    print(row("- weights (bf16, counted from config.json)", -b["weights"]))
    print(row("= free when the engine starts", b["free"]))
    print(row(f"x {f:.2f} = the engine's share (max_memory_percent)", b["available"]))
    p = b["plan"]
    if p is None:
        print(f"  no cache fits: {b['problem']}")
        return
    m, lines = p["max_batch_tokens"], p["lines"]
    print(
        row(
            f"    activations of the largest batch, {m:,} tokens (fp32 logits)",
            lines["activations"],
        )
    )
    print(row("    that batch's tensors (token ids, cache indices)", lines["batch_tensors"]))
    print(
        row(f"    attention mask, {m:,} x (cache + batch) tokens in bf16", lines["attention_mask"])
    )
    print(
        row(
            f"    KV cache, {p['num_blocks']:,} blocks x {p['block_size']} tokens x"
            f" {p['cache_bytes_per_token']:,} B",
            lines["cache"],
        )
    )
    print(row("    left over, less than one block", lines["rounding"]))
    print(row(f"left unplanned, the 1 - {f:.2f} share of the free memory", b["slack"]))
    convs = ", ".join(f"{b['conversations'][k]:,} of {c:,}" for k, c in CONTEXTS.items())
    print(f"  => {p['cache_tokens']:,} tokens of cache: conversations {convs} tokens")
    print(
        "  the same fraction of the whole card (vLLM's way) would leave"
        f" {human(b['available_if_whole_card'])}"
        f" to the engine instead of {human(b['available'])}"
    )


def prices(data: dict[str, Any], card_key: str, b: dict[str, Any]) -> dict[str, Any]:
    """Each dated price of a card, and what one conversation-hour costs at it."""
    out = {}
    for offer in (o for o in data["prices"] if o["card"] == card_key):
        per = {
            f"per_conversation_hour_{k}": (
                offer["usd_per_hour"] / b["conversations"][k] if b["conversations"][k] else None
            )
            for k in CONTEXTS
        }
        out[offer["offer"]] = {**offer, **per}
    return out


def crosscheck() -> dict[str, Any]:
    """vLLM's published start-up figures through the same arithmetic; prints both answers."""
    x = load_crosscheck()
    shape = x["model_shape"]
    per_token = (
        2
        * shape["num_hidden_layers"]
        * shape["num_key_value_heads"]
        * shape["head_dim"]
        * shape["bytes_per_number"]
    )
    cache_gib = round(
        x["usable_gib"] - x["weights_gib"] - x["non_torch_gib"] - x["activation_peak_gib"], 2
    )
    concurrency = cache_gib * GIB / (per_token * x["tokens_per_request"])
    blocks = int(cache_gib * GIB // (16 * per_token))  # vLLM counts whole blocks of 16 tokens
    via_blocks = blocks * 16 / x["tokens_per_request"]
    print(f"\ncross-check: {x['engine']} on an {x['gpu']} serving {x['model']} ({x['source']})")
    print(
        f"  usable {x['usable_gib']:.2f} GiB - weights {x['weights_gib']:.2f} - outside PyTorch"
        f" {x['non_torch_gib']:.2f} - activation peak {x['activation_peak_gib']:.2f}"
        f" = KV cache {cache_gib:.2f} GiB (the log: {x['kv_cache_gib']:.2f} GiB)"
    )
    print(
        f"  bytes per token: 2 x {shape['num_hidden_layers']} layers"
        f" x {shape['num_key_value_heads']} kv heads"
        f" x {shape['head_dim']} x {shape['bytes_per_number']} B = {per_token:,} B"
    )
    print(
        f"  {cache_gib:.2f} GiB / ({per_token:,} B x {x['tokens_per_request']:,} tokens)"
        f" = {concurrency:.2f}x; in whole 16-token blocks {blocks:,} x 16"
        f" / {x['tokens_per_request']:,} = {via_blocks:.2f}x"
    )
    print(f'  the log says: "{x["logged_line"]}"')
    check(
        per_token == x["bytes_per_token"], "the crosscheck's bytes per token differ from its shape"
    )
    check(cache_gib == x["kv_cache_gib"], "the log's memory lines do not add up to its KV cache")
    check(
        round(concurrency, 2) == x["logged_concurrency"],
        "our arithmetic does not give vLLM's concurrency",
    )
    return {
        **x,
        "bytes_per_token_computed": per_token,
        "kv_cache_gib_computed": cache_gib,
        "concurrency": round(concurrency, 2),
        "vllm_blocks": blocks,
        "concurrency_via_blocks": round(via_blocks, 2),
    }


def show_sweep(cards: dict[str, Any], sweep: dict[str, Any]) -> None:
    """Conversations at full context (and at 8K) against the memory fraction, per card and model."""
    print(f"\nconversations of {CONTEXTS['full']:,} tokens (of {CONTEXTS['8k']:,}) by fraction:")
    print(f"  {'':<36}" + "".join(f"{f:>12.2f}" for f in SWEEP))
    for card_key, card in cards.items():
        for key, folder in MODELS.items():
            s = sweep[card_key][key]
            pairs = zip(s["conversations_full"], s["conversations_8k"], strict=True)
            cells = "".join(f"{a:>6,} ({b:>3,})" for a, b in pairs)
            print(f"  {folder + ', ' + card['name']:<36}{cells}")


def show_prices(cards: dict[str, Any], by_card: dict[str, Any], fraction: float) -> None:
    """What one conversation of 8K tokens costs an hour at each dated price."""
    print(f"\nwhat one conversation of {CONTEXTS['8k']:,} tokens costs an hour, at {fraction:.2f}:")
    for card_key, by_model in by_card.items():
        for key, offers in by_model.items():
            for o in offers.values():
                cost = o["per_conversation_hour_8k"]
                print(
                    f"  {MODELS[key]} on {cards[card_key]['name']}, {o['offer']}"
                    f" ${o['usd_per_hour']:.2f}/h ({o['source']}, {o['date']}): "
                    + (f"${cost:.3f}" if cost else "none fits")
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fraction", type=float, default=0.9, help="max_memory_percent, 0 to 1")
    parser.add_argument(
        "--card", action="append", default=[], help="NAME=TOTAL_MIB:USABLE_GIB, repeatable"
    )
    args = parser.parse_args()
    data = load_cards()
    cards = dict(data["cards"]) | dict(parse_card(c) for c in args.card)
    configs = {key: load_config(folder) for key, folder in MODELS.items()}
    results: dict[str, Any] = {
        "fraction": args.fraction,
        "contexts": CONTEXTS,
        "budgets": {},
        "prices": {},
        "cards": cards,
        "chart": {"segments": list(SEGMENTS)},
        "sweep": {"fractions": list(SWEEP)},
    }
    for key, folder in MODELS.items():
        cfg = configs[key]
        print(
            f"{folder}: {cache_bytes_per_token(cfg):,} B of cache per token;"
            f" weights {human(weight_bytes(cfg))}"
        )
    for card_key, card in cards.items():
        for key, folder in MODELS.items():
            cfg, weights = configs[key], weight_bytes(configs[key])
            total, context = card["total_bytes"], card["total_bytes"] - card["usable_bytes"]
            b = budget(cfg, total, context, weights, args.fraction)
            show_budget(card, folder, cfg, b)
            results["budgets"].setdefault(card_key, {})[key] = b
            results["prices"].setdefault(card_key, {})[key] = prices(data, card_key, b)
            results["chart"].setdefault(card_key, {})[key] = list(
                segments(total, b["free"], weights, b["plan"]).values()
            )
            sweep = [budget(cfg, total, context, weights, f) for f in SWEEP]
            results["sweep"].setdefault(card_key, {})[key] = {
                "cache_tokens": [s["cache_tokens"] for s in sweep],
                **{f"conversations_{k}": [s["conversations"][k] for s in sweep] for k in CONTEXTS},
            }
    show_sweep(cards, results["sweep"])
    show_prices(cards, results["prices"], args.fraction)
    results["crosscheck"] = crosscheck()
    results["peak_gpu_memory"] = {"allocated": 0, "reserved": 0, "device": "none"}  # no GPU used
    print(f"\nwrote {write_results('paper', results)}")


if __name__ == "__main__":
    main()
