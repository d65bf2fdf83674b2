"""Step 1: what a shared prefix saves, counted on paper with Qwen's tokenizer.

For each length of the shared manual (1,000 to 8,000 tokens), four requests carry it with four
different questions. Each prompt is tokenized as the server will tokenize it; a server that
keeps the last prompt's tokens (llama-server's slot) computes only the tokens after the first
one that differs, and a block-hashing engine (vLLM, blocks of 16 tokens) only the tokens after
the last whole block before it. Then where reuse stops: one reading changed early, midway and
late in the manual, and a template that writes today's date at the top. Last, what the GPU steps
hold on a 24 GB card: the weights in bf16 or Q8_0, and the cache of one slot or of four.

    python3 paper.py
    python3 paper.py --tiny      # the lengths the CPU mode uses (a eighth)
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

import prompts as p
from labkit import facts
from labkit.checks import check
from labkit.configs import kv_bytes_per_token, load_config, weight_count
from labkit.results import write_results
from labkit.units import human
from llamakit import qwen3

BLOCK = 16  # vLLM's default block size on CUDA
REQUESTS = 4
EDITS = {"early": 0.1, "middle": 0.5, "late": 0.9}
EDIT_LENGTH = 4000
DATES = ("Wednesday, 2 December 2026", "Thursday, 3 December 2026")
SLOT_CONTEXT = 9216  # each slot: 8,000 shared tokens, a question and the answer, rounded up


def qwen3_counter() -> Any:
    """A tiktoken encoding with Qwen's vocabulary and Qwen3's added tokens (as the GGUF has)."""
    import tiktoken

    ranks = qwen3.read_ranks(qwen3.tiktoken_file())
    pattern = (
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
        r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
    )
    special = {t: qwen3.N_BPE + i for i, t in enumerate(qwen3.ADDED)}
    return tiktoken.Encoding(
        "qwen3", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special
    )


def series(length: int, tokens: Any) -> dict[str, Any]:
    """Four requests sharing one copy of the manual, sent one after another to one slot."""
    sections = p.fit(length, lambda s: len(tokens(s)))
    system = p.manual(sections, p.label(1, 0))
    ids = [tokens(p.render(p.messages(system, q))) for q in p.QUESTIONS[:REQUESTS]]
    rows = []
    for k, prompt in enumerate(ids):
        held = ids[k - 1] if k else []
        rows.append(
            {
                "tokens": len(prompt),
                "llama_reused": p.llama_reuse(held, prompt),
                "block_reused": p.block_reuse(held, prompt, BLOCK),
            }
        )
    later = rows[1:]
    shared = p.common_prefix(ids[0], ids[1])
    out = {
        "sections": sections,
        "manual_tokens": len(tokens(system)),
        "shared": shared,
        "requests": rows,
        "tokens_all": sum(r["tokens"] for r in rows),
        # requests 2..4: what each engine computes once the first has filled the cache
        "later_tokens": sum(r["tokens"] for r in later),
        "later_llama_computed": sum(r["tokens"] - r["llama_reused"] for r in later),
        "later_block_computed": sum(r["tokens"] - r["block_reused"] for r in later),
        "block_lost": sum(r["llama_reused"] - r["block_reused"] for r in later),
    }
    for r in later:  # whole blocks never hold more than the tokens themselves
        check(r["block_reused"] <= r["llama_reused"] < r["tokens"], f"reuse counted wrong: {r}")
    return out


def edits(length: int, tokens: Any) -> dict[str, Any]:
    """Where reuse stops: the same request with one reading changed, and with a dated template."""
    sections = p.fit(length, lambda s: len(tokens(s)))
    system = p.manual(sections, p.label(1, 2))
    base = tokens(p.render(p.messages(system, p.QUESTIONS[0])))
    cases: dict[str, Any] = {}
    for name, fraction in EDITS.items():
        at = min(sections - 1, round(fraction * sections))
        changed = p.manual(sections, p.label(1, 2), edit_at=at)
        ids = tokens(p.render(p.messages(changed, p.QUESTIONS[0])))
        cases[name] = {"section": at + 1, "tokens": len(ids)}
        cases[name] |= reuse_of(base, ids)
    day1 = tokens(p.render(p.messages(system, p.QUESTIONS[0]), date=DATES[0]))
    day2 = tokens(p.render(p.messages(system, p.QUESTIONS[0]), date=DATES[1]))
    cases["date"] = {"tokens": len(day2)} | reuse_of(day1, day2)
    cases["same"] = {"tokens": len(base)} | reuse_of(base, base)
    return {"sections": sections, "tokens": len(base), "cases": cases}


def reuse_of(held: list[int], prompt: list[int]) -> dict[str, int]:
    """Where two prompts part, and what each engine reuses and computes."""
    llama, block = p.llama_reuse(held, prompt), p.block_reuse(held, prompt, BLOCK)
    return {
        "first_difference": p.common_prefix(held, prompt),
        "llama_reused": llama,
        "llama_computed": len(prompt) - llama,
        "block_reused": block,
        "block_computed": len(prompt) - block,
    }


def memory(cfg: dict[str, Any]) -> dict[str, Any]:
    """Weights and cache of the GPU steps against a 24 GB card's room (the course's facts)."""
    per_token = kv_bytes_per_token(cfg)
    weights = weight_count(cfg)
    room = facts.room("rtx-4090")
    out: dict[str, Any] = {"bytes_per_token": per_token, "weights": weights,
                           "room_24gb": room.bytes, "room_text": room.text}  # fmt: skip
    for fmt in ("bf16", "q8_0"):
        w = qwen3.tensor_bytes(cfg, fmt.upper())["bytes"]
        for slots in (1, 4):
            cache = slots * SLOT_CONTEXT * per_token
            out[f"{fmt}_{slots}"] = {"weights": w, "cache": cache, "total": w + cache,
                                     "left": room.bytes - w - cache}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the CPU mode's lengths (an eighth)")
    args = parser.parse_args()
    enc = qwen3_counter()

    def tokens(text: str) -> list[int]:
        return list(enc.encode(text, allowed_special="all"))

    scale = p.TINY_DIVISOR if args.tiny else 1
    results: dict[str, Any] = {"device": "cpu", "tiny": args.tiny, "block": BLOCK,
                               "requests": REQUESTS, "lengths": {}}  # fmt: skip
    print(f"{REQUESTS} requests share one manual; each asks its own question (Qwen's tokenizer)")
    print(f"  {'manual':>7} {'prompt':>7} {'shared':>7} {'requests 2-4':>13} {'computed: kept'}"
          f" {'slot':>6} {'blocks of 16':>13}")  # fmt: skip
    for length in p.LENGTHS:
        got = series(length // scale, tokens) | {"target": length // scale}
        results["lengths"][p.length_key(length)] = got
        r0 = got["requests"][0]
        print(
            f"  {got['manual_tokens']:>7,} {r0['tokens']:>7,} {got['shared']:>7,}"
            f" {got['later_tokens']:>13,} {'':>14} {got['later_llama_computed']:>6,}"
            f" {got['later_block_computed']:>13,}"
        )
    ed = edits(EDIT_LENGTH // scale, tokens)
    results["edits"] = ed
    print(f"\nwhere reuse stops, a request of {ed['tokens']:,} tokens against the one cached:")
    print(f"  {'change':<36} {'first differing token':>21} {'slot reuses':>12} {'blocks':>8}")
    names = {"same": "none (the same request again)", "date": "the date line of a dated template"}
    for name, c in ed["cases"].items():
        what = names.get(name, f"a reading in section {c.get('section')} ({name})")
        print(f"  {what:<36} {c['first_difference']:>21,} {c['llama_reused']:>12,}"
              f" {c['block_reused']:>8,}")  # fmt: skip
    cfg = load_config(Path("models") / "Qwen3-8B" / "config.json")
    mem = memory(cfg)
    results["memory"] = mem
    print("\n" + textwrap.fill(f"Qwen3-8B on {mem['room_text']}:", 98))
    for key in ("bf16_1", "bf16_4", "q8_0_1", "q8_0_4"):
        fmt, slots = key.rsplit("_", 1)
        m = mem[key]
        print(
            f"  {fmt:>5} weights {human(m['weights']):>10} + {slots} slot(s) of {SLOT_CONTEXT:,}"
            f" cells {human(m['cache']):>10} = {human(m['total']):>10}, left {human(m['left'])}"
        )
    path = write_results("paper", results)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
