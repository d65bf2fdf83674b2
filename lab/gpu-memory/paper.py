"""Step 1: where a GPU's memory goes when a model is served, worked out on paper.

For Qwen3-8B and Qwen3-0.6B, on an H200 and on a 24 GB card (the course's facts,
labkit/facts.toml), line by line: the card's memory as PyTorch sees it, the CUDA context, the
weights, the share the serving engine takes (a fraction F of what is still free, as
transformers' continuous batching does), and how its planner divides that share: the working
space of its largest batch, the batch's tensors and attention mask, and the KV cache in whole
blocks. Then the cache in tokens, the conversations it holds, and what one conversation-hour
costs at the cards' dated prices.

Last, vLLM's rule (vllm_rule.py): worked on the published A100 start-up log, then predicted for
the same models and cards from what is known before vLLM starts.

Standard library only:
    python3 paper.py
    python3 paper.py --fraction 0.5 --card a100=40960:39.5   # a card: total MiB : usable GiB
    python3 paper.py --transformers 5.24.0                   # that release's planner
"""

from __future__ import annotations

import argparse
import importlib.metadata
import textwrap
from pathlib import Path
from typing import Any

from labkit import facts
from labkit.checks import check
from labkit.configs import load_config, weight_bytes
from labkit.results import write_results
from labkit.units import GIB, MIB, human, row
from planner import (
    CONTEXTS,
    MODELS,
    SEGMENTS,
    Engine,
    budget,
    cache_bytes_per_token,
    release_of,
    segments,
)
from vllm_rule import PROFILE_TOKENS, crosscheck, on_card, show_on_card

SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
LAB = Path(__file__).resolve().parent
CARDS = {"h200": "h200", "card_24gb": "rtx-4090"}  # results key -> facts.toml card
WIDTH = 50  # label column of a budget line: a line fits 100 columns


def config(folder: str) -> dict[str, Any]:
    """models/<folder>/config.json, the model's published Hugging Face config."""
    return load_config(LAB / "models" / folder / "config.json")


def card_of(key: str) -> dict[str, Any]:
    """A card of the facts: its total as PyTorch sees it, what is left after the CUDA context."""
    c = facts.card(key)
    room = facts.room(key)
    assert c.torch_total is not None
    return {"name": c.label, "total_bytes": c.torch_total, "usable_bytes": room.bytes,
            "facts": key, "room": room.text}  # fmt: skip


def parse_card(text: str) -> tuple[str, dict[str, Any]]:
    """NAME=TOTAL_MIB:USABLE_GIB -> a card like those of the facts."""
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


def show_budget(card: dict[str, Any], model: str, b: dict[str, Any]) -> None:
    """Print one card's budget for one model, line by line."""
    f = b["fraction"]

    def line(label: str, value: int) -> None:
        print(row(label, value, WIDTH))

    print(f"\n{model} on {card['name']}, memory fraction {f:.2f}")
    line("card memory (PyTorch's total)", b["total"])
    line("- CUDA context", -b["context"])
    line("- weights (bf16, from config.json)", -b["weights"])
    line("= free when the engine starts", b["free"])
    line(f"x {f:.2f} = the engine's share", b["available"])
    p = b["plan"]
    if p is None:
        print(f"  no cache fits: {b['problem']}")
        return
    m, lines = p["max_batch_tokens"], p["lines"]
    line(f"    working space, a batch of {m:,} tokens", lines["activations"])
    line("    that batch's tensors (ids, indices)", lines["batch_tensors"])
    line(f"    attention mask, {m:,} x (cache + batch)", lines["attention_mask"])
    line(f"    KV cache, {p['num_blocks']:,} blocks of {p['block_size']}", lines["cache"])
    if lines["padding"]:
        line("    two padding blocks", lines["padding"])
    line("    left over, less than a block", lines["rounding"])
    line(f"left unplanned (1 - {f:.2f} of the free)", b["slack"])
    print(f"  {p['cache_tokens']:,} tokens of cache, {p['cache_bytes_per_token']:,} B each")
    convs = ", ".join(f"{b['conversations'][k]:,} of {c:,}" for k, c in CONTEXTS.items())
    print(f"  conversations: {convs} tokens")


def prices(card: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Each dated price of a card, and what one conversation-hour costs at it."""
    out = {}
    if "facts" not in card:
        return out
    for key, offer in facts.card(card["facts"]).prices.items():
        per = {
            f"per_conversation_hour_{k}": (
                offer["per_hour"] / b["conversations"][k] if b["conversations"][k] else None
            )
            for k in CONTEXTS
        }
        name = key.removeprefix("runpod-")  # community, secure
        out[name] = {"offer": name, "usd_per_hour": offer["per_hour"], "date": str(offer["date"]),
                     "source": offer["source"], **per}  # fmt: skip
    return out


def show_sweep(cards: dict[str, Any], sweep: dict[str, Any]) -> None:
    """Conversations at full context (and at 8K) against the memory fraction, per card and model."""
    print(
        f"\nconversations of {CONTEXTS['full']:,} tokens by fraction (of {CONTEXTS['8k']:,} below):"
    )
    print(f"  {'':<22}" + "".join(f"{f:>7.2f}" for f in SWEEP))
    for card_key, card in cards.items():
        for key, folder in MODELS.items():
            s = sweep[card_key][key]
            name = f"{folder}, {card['name']}"[:22]
            print(f"  {name:<22}" + "".join(f"{a:>7,}" for a in s["conversations_full"]))
            print(f"  {'':<22}" + "".join(f"{f'({a:,})':>7}" for a in s["conversations_8k"]))


def show_prices(cards: dict[str, Any], by_card: dict[str, Any], fraction: float) -> None:
    """What one conversation of 8K tokens costs an hour at each dated price."""
    print(f"\nwhat one conversation of {CONTEXTS['8k']:,} tokens costs an hour, at {fraction:.2f}:")
    for card_key, by_model in by_card.items():
        for key, offers in by_model.items():
            for o in offers.values():
                cost = o["per_conversation_hour_8k"]
                print(
                    f"  {MODELS[key]} on {cards[card_key]['name']}, {o['offer']}"
                    f" ${o['usd_per_hour']:.2f}/h ({o['date']}): "
                    + (f"${cost:.3f}" if cost else "none fits")
                )


def installed_transformers() -> str | None:
    """The transformers release installed here, read from its metadata (nothing is imported)."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fraction", type=float, default=0.9, help="max_memory_percent, 0 to 1")
    parser.add_argument(
        "--card", action="append", default=[], help="NAME=TOTAL_MIB:USABLE_GIB, repeatable"
    )
    version = installed_transformers() or str(facts.get("engines.transformers.version"))
    parser.add_argument(
        "--transformers",
        default=version,
        help=f"whose planner: 5.17.0 or 5.24.0 (default {version}: the one installed, if any,"
        " so that step 1 plans as the engine of steps 2 to 5 will)",
    )
    args = parser.parse_args()
    cards = {k: card_of(v) for k, v in CARDS.items()} | dict(parse_card(c) for c in args.card)
    configs = {key: config(folder) for key, folder in MODELS.items()}
    eng = Engine(release=release_of(args.transformers))
    print(f"the planner of transformers {args.transformers} (its {eng.release} transcription)")
    results: dict[str, Any] = {
        "fraction": args.fraction,
        "release": eng.release,
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
        if "room" in card:
            print(textwrap.fill(f"{card['name']}: {card['room']}", 98, subsequent_indent="  "))
    for card_key, card in cards.items():
        for key, folder in MODELS.items():
            cfg, weights = configs[key], weight_bytes(configs[key])
            total, context = card["total_bytes"], card["total_bytes"] - card["usable_bytes"]
            b = budget(cfg, total, context, weights, args.fraction, eng)
            show_budget(card, folder, b)
            results["budgets"].setdefault(card_key, {})[key] = b
            results["prices"].setdefault(card_key, {})[key] = prices(card, b)
            results["chart"].setdefault(card_key, {})[key] = list(
                segments(total, b["free"], weights, b["plan"]).values()
            )
            sweep = [budget(cfg, total, context, weights, f, eng) for f in SWEEP]
            results["sweep"].setdefault(card_key, {})[key] = {
                "cache_tokens": [s["cache_tokens"] for s in sweep],
                **{f"conversations_{k}": [s["conversations"][k] for s in sweep] for k in CONTEXTS},
            }
    show_sweep(cards, results["sweep"])
    show_prices(cards, results["prices"], args.fraction)
    results["crosscheck"] = crosscheck()
    share = facts.fact("engines.vllm.gpu_memory_utilization")
    print(
        f"\nvLLM's rule on this lesson's cards, predicted: its default share {share.value:.2f}"
        f" (since {facts.get('engines.vllm.gpu_memory_utilization.since')}),\n  a profile batch"
        f" of {PROFILE_TOKENS:,} tokens; memory outside PyTorch and CUDA graphs not estimated:"
        "\n  each cache is an upper bound"
    )
    results["vllm"] = {}
    for card_key, card in cards.items():
        if "facts" not in card:
            continue
        for key, folder in MODELS.items():
            p = on_card(card["facts"], configs[key], CONTEXTS)
            show_on_card(card["name"], folder, p)
            results["vllm"].setdefault(card_key, {})[key] = p
    results["peak_gpu_memory"] = {"allocated": 0, "reserved": 0, "device": "none"}  # no GPU used
    print(f"\nwrote {write_results('paper', results)}")


if __name__ == "__main__":
    main()
