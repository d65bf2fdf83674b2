"""Step 4: where reuse stops, on the same one-slot llama-server.

A request with a 4,000-token manual is cached (sent once), then another request goes to the same
slot: the same request again; another question; the manual with one reading changed early,
midway or late; and the same chat rendered by a template that writes today's date at the top,
one day later. The slot's cache is reused up to the first token that differs and not one token
further: `cache_n` must equal that position (checked), and the rest is computed again. Beside
each, what a block-hashing engine (vLLM, blocks of 16) would reuse: the whole blocks before
that token. Each case is repeated, each time after caching the first request again.

    python3 limits.py --port 8241
    python3 limits.py --port 8241 --device cpu --tiny
"""

from __future__ import annotations

import time
from typing import Any

import prompts as p
from labkit import timing
from labkit.checks import check
from labkit.results import write_results
from labkit.timing import Spread
from llamakit import gpu
from reuse import BLOCK, arguments, connect, send, warm_up

LENGTH = 4000
EDITS = {"early": 0.1, "middle": 0.5, "late": 0.9}
DATES = ("Wednesday, 2 December 2026", "Thursday, 3 December 2026")
SHOWN = {"same": "the same request again", "question": "another question",
         "date": "a dated template, a day later"}  # fmt: skip


def cases(sections: int, label: str) -> dict[str, tuple[str, str]]:
    """Each case: the request cached first, then the one measured."""
    system = p.manual(sections, label)
    base = p.render(p.messages(system, p.QUESTIONS[0]))
    out = {"same": (base, base), "question": (base, p.render(p.messages(system, p.QUESTIONS[1])))}
    for name, fraction in EDITS.items():
        at = min(sections - 1, round(fraction * sections))
        changed = p.manual(sections, label, edit_at=at)
        out[name] = (base, p.render(p.messages(changed, p.QUESTIONS[0])))
    chat = p.messages(system, p.QUESTIONS[0])
    out["date"] = (p.render(chat, date=DATES[0]), p.render(chat, date=DATES[1]))
    return out


def main() -> None:
    parser = arguments(__doc__)
    args = parser.parse_args()
    t_start = time.perf_counter()
    server, _ = connect(args)
    rounds = args.rounds or (2 if args.tiny else 3)
    length = LENGTH // (p.TINY_DIVISOR if args.tiny else 1)
    sections = p.fit(length, lambda s: len(server.tokenize(s)))
    warm_up(server)
    held: list[int] = []
    found: dict[str, dict[str, Any]] = {}
    ttft: dict[str, list[float]] = {}
    with gpu.GpuMemory() as mem:
        for r in range(1, rounds + 1):
            label = p.label(r, 7)
            for name, (first, then) in cases(sections, label).items():
                _, held, _ = send(server, held, first, True, args.max_tokens)  # cache `first`
                got, held, paper = send(server, held, then, True, args.max_tokens)
                row = {"cache_n": got.cache_n, "prompt_n": got.prompt_n} | paper
                check(found.get(name, row) == row, f"{name}: other counts than in round 1")
                found[name] = row
                ttft.setdefault(name, []).append(got.ttft)
            base = cases(sections, label)["same"][0]
            got, held, _ = send(server, held, base, False, args.max_tokens)  # from scratch
            ttft.setdefault("scratch", []).append(got.ttft)
            found["scratch"] = {"cache_n": got.cache_n, "prompt_n": got.prompt_n}
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "rounds": rounds,
                               "block": BLOCK, "sections": sections, "cases": {}}  # fmt: skip
    scratch = Spread.of(ttft["scratch"])
    results["scratch"] = found["scratch"] | {"ttft": scratch}
    print(
        f"\na request of {found['same']['tokens']:,} tokens is cached, then (median of {rounds}):"
    )
    print(f"  {'the next request':<32} {'reused':>7} {'computed':>9} {'first token':>12}"
          f" {'blocks of 16':>13}")  # fmt: skip
    for name, row in found.items():
        if name == "scratch":
            continue
        t = Spread.of(ttft[name])
        at = min(sections - 1, round(EDITS[name] * sections)) + 1 if name in EDITS else None
        results["cases"][name] = row | {"ttft": t, "saved": timing.ratio(scratch, t),
                                        "section": at}  # fmt: skip
        what = SHOWN.get(name, f"one reading changed, section {at}")
        print(
            f"  {what:<32} {row['cache_n']:>7,} {row['prompt_n']:>9,}"
            f" {t.median * 1e3:>9.1f} ms {row['block_reused']:>13,}"
        )
    print(f"  {'nothing cached (cache_prompt off)':<32} {0:>7} {found['scratch']['prompt_n']:>9,}"
          f" {scratch.median * 1e3:>9.1f} ms")  # fmt: skip
    results["seconds"] = time.perf_counter() - t_start
    print(gpu.record(results, mem.result(), "the server and its requests"))
    print(f"wrote {write_results('limits', results)}; limits.py took {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
