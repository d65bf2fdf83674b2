"""Steps 5 and 7: eight requests sharing an 8,000-token manual, arriving at once, across slots.

llama-server keeps one cache per slot (`-np` slots). A request goes to the idle slot whose
cached tokens share the most with it, if it shares more than a tenth of its prompt
(`--slot-prompt-similarity`, 0.1), else to the slot used longest ago; only that slot's tokens
can be reused. So a burst of requests that share a prefix is computed once per slot that serves
one of the first few: with one slot the other seven wait and reuse it, with four slots four
compute it side by side. Two ways to send them: all eight at once ("burst"), or one first and,
once it has answered, the other seven at once ("warm"). Each is repeated with a new copy of the
manual. The script counts how many times the manual was computed (the manual's tokens computed,
summed over the requests, over the manual's length) and times the first token of each request.

    python3 slots.py --port 8241 --name slots_1      # llama-server -np 1 ...
    python3 slots.py --port 8242 --name slots_4      # llama-server -np 4 ...
    python3 slots.py --port 8242 --name slots_4 --device cpu --tiny
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import prompts as p
from labkit.checks import check
from labkit.results import write_results
from labkit.timing import Spread
from llamakit import gpu
from llamakit.server import Answer, Server
from reuse import arguments, connect, warm_up

LENGTH = 8000
REQUESTS = 8


def burst(server: Server, chats: list[str], max_tokens: int) -> tuple[list[Answer], float]:
    """Send every prompt at once (one thread each); the answers in order, and the seconds until
    the last one ended."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(chats)) as pool:
        answers = list(pool.map(lambda c: server.complete(c, max_tokens, True), chats))
    return answers, time.perf_counter() - t0


def one_round(server: Server, mode: str, system: str, max_tokens: int) -> dict[str, Any]:
    """Eight requests sharing `system`: all at once, or one and then seven."""
    chats = [p.render(p.messages(system, q)) for q in p.QUESTIONS[:REQUESTS]]
    shared = p.common_prefix(*(server.tokenize(c) for c in chats[:2]))
    if mode == "burst":
        answers, seconds = burst(server, chats, max_tokens)
    else:
        t0 = time.perf_counter()
        first = server.complete(chats[0], max_tokens, True)
        rest, _ = burst(server, chats[1:], max_tokens)
        answers, seconds = [first, *rest], time.perf_counter() - t0
    computed = sum(max(0, shared - a.cache_n) for a in answers)
    return {
        "shared": shared,
        "passes": computed / shared,
        "prompt_n": sum(a.prompt_n for a in answers),
        "cache_n": sum(a.cache_n for a in answers),
        "slots_used": len({a.slot for a in answers}),
        "seconds": seconds,
        "ttft": [a.ttft for a in answers],
        "requests": [
            {"slot": a.slot, "cache_n": a.cache_n, "prompt_n": a.prompt_n, "ttft": a.ttft}
            for a in answers
        ],
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--name", default="slots", help="results/<name>.json")
    args = parser.parse_args()
    t_start = time.perf_counter()
    server, props = connect(args)
    slots = int(props.get("total_slots") or 1)
    rounds = args.rounds or (2 if args.tiny else 3)
    length = LENGTH // (p.TINY_DIVISOR if args.tiny else 1)
    sections = p.fit(length, lambda s: len(server.tokenize(s)))
    warm_up(server)
    runs: dict[str, list[dict[str, Any]]] = {"burst": [], "warm": []}
    with gpu.GpuMemory() as mem:
        for r in range(1, rounds + 1):
            for j, mode in enumerate(runs):
                system = p.manual(sections, p.label(r, 5 + j))
                runs[mode].append(one_round(server, mode, system, args.max_tokens))
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "slots": slots,
                               "rounds": rounds, "requests": REQUESTS, "modes": {}}  # fmt: skip
    print(f"\n{REQUESTS} requests share a manual of about {length:,} tokens; {slots} slot(s);"
          f" {rounds} rounds")  # fmt: skip
    print(f"  {'sent':<6} {'manual computed':>16} {'tokens computed':>16} {'slots used':>11}"
          f" {'first token: median':>20} {'last':>9}")  # fmt: skip
    for mode, got in runs.items():
        passes = Spread.of([g["passes"] for g in got])
        every = Spread.of([t for g in got for t in g["ttft"]])
        last = Spread.of([max(g["ttft"]) for g in got])
        whole = Spread.of([g["seconds"] for g in got])
        results["modes"][mode] = {
            "shared": got[0]["shared"],
            "passes": passes,
            "prompt_n": Spread.of([g["prompt_n"] for g in got]),
            "cache_n": Spread.of([g["cache_n"] for g in got]),
            "slots_used": max(g["slots_used"] for g in got),
            "ttft": every,
            "ttft_last": last,
            "seconds": whole,
            "rounds": got,
        }
        check(passes.min >= 0.99, f"{mode}: the manual was computed {passes.min:.2f} times")
        check(passes.max <= slots + 0.01, f"{mode}: computed more often than there are slots")
        print(
            f"  {mode:<6} {passes.median:>10.2f} times {results['modes'][mode]['prompt_n'].median:>16,.0f}"
            f" {results['modes'][mode]['slots_used']:>11} {every.median * 1e3:>14.0f} ms"
            f" {last.median * 1e3:>6.0f} ms"
        )
    results["seconds"] = time.perf_counter() - t_start
    print(gpu.record(results, mem.result(), "the server and its requests"))
    print(f"wrote {write_results(args.name, results)}; slots.py took {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
