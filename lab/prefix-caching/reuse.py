"""Step 3: the same requests with llama-server's prompt cache on and off, one slot.

For each length of the shared manual, four requests (four questions) go one after another to a
llama-server with one slot, first with `cache_prompt: true` (the slot's cached tokens are
reused up to the first token that differs), then the same four with `cache_prompt: false`
(every prompt computed from its first token). The server's own `timings` say how many prompt
tokens came from the cache (`cache_n`) and how many were computed (`prompt_n`); the client times
the wait for the first token (streamed). Every request's `cache_n` is checked against the count
on paper, from the server's own tokens: what the slot held, up to the first difference. Each
round uses a new copy of the manual (its label differs), so nothing of an earlier round is
reused past the label.

    llama-server -m gguf/qwen3-8b-q8_0.gguf -ngl 99 -fa on -np 1 -c 9216 --cache-ram 0 --port 8241 &
    python3 reuse.py --port 8241
    python3 reuse.py --port 8241 --device cpu --tiny      # lengths / 8, two rounds
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import prompts as p
from labkit import timing
from labkit.checks import check
from labkit.results import write_results
from labkit.timing import Spread
from llamakit import gpu
from llamakit.server import Answer, Server

BLOCK = 16


def arguments(doc: str) -> argparse.ArgumentParser:
    """The options every client script of this lab takes."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="recorded only: the server decides (-ngl)")
    parser.add_argument("--tiny", action="store_true", help="shorter manuals (lengths / 8)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8241)
    parser.add_argument("--rounds", type=int, help="rounds, each with a new copy of the manual")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens written per answer")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per request")
    return parser


def connect(args: argparse.Namespace) -> tuple[Server, dict[str, Any]]:
    """The server, once it answers, and what it says about itself."""
    server = Server(args.host, args.port, args.timeout)
    server.wait(120)
    props = server.props()
    settings = props.get("default_generation_settings", {})
    print(f"llama-server at {server.base}: {props.get('build_info', '?')}")
    print(f"  model {props.get('model_path', '?')}, {props.get('total_slots', '?')} slot(s) of"
          f" {settings.get('n_ctx', '?')} tokens")  # fmt: skip
    return server, props


def warm_up(server: Server) -> None:
    """A first request on another text pays the one-time costs (it shares no prefix)."""
    server.complete("Warm-up. " + p.entries(40)[-1] * 20, max_tokens=4, cache=False)


def check_template(server: Server, system: str) -> None:
    """The server's own chat template renders the chat as prompts.render does: what this lab
    sends to /completion is what /v1/chat/completions would compute."""
    chat = p.messages(system, p.QUESTIONS[0])
    check(
        server.apply_template(chat) == p.render(chat),
        "the server's chat template renders the chat differently from prompts.render",
    )


def send(server: Server, held: list[int], prompt: str, cache: bool, max_tokens: int
         ) -> tuple[Answer, list[int], dict[str, int]]:  # fmt: skip
    """One request; checked against what the slot held. Returns the answer, what the slot holds
    now (this prompt's tokens and the answer's) and the counts on paper."""
    ids = server.tokenize(prompt)
    want = p.llama_reuse(held, ids) if cache else 0
    got = server.complete(prompt, max_tokens, cache)
    check(got.prompt_tokens == len(ids), f"the server counted {got.prompt_tokens} prompt tokens,"
          f" /tokenize {len(ids)}")  # fmt: skip
    check(got.cache_n == want, f"cache_n = {got.cache_n}, on paper {want} (cache_prompt {cache})")
    paper = {"tokens": len(ids), "llama_reused": want,
             "block_reused": p.block_reuse(held, ids, BLOCK) if cache else 0}  # fmt: skip
    return got, ids + got.tokens, paper


def main() -> None:
    args = arguments(__doc__).parse_args()
    t_start = time.perf_counter()
    server, props = connect(args)
    rounds = args.rounds or (2 if args.tiny else 5)
    scale = p.TINY_DIVISOR if args.tiny else 1
    lengths = [n // scale for n in p.LENGTHS]
    keys = {n // scale: p.length_key(n) for n in p.LENGTHS}
    sections = {n: p.fit(n, lambda s: len(server.tokenize(s))) for n in lengths}
    check_template(server, p.manual(sections[lengths[0]], "00A"))
    warm_up(server)
    held: list[int] = []
    samples: dict[int, dict[str, list[float]]] = {n: {} for n in lengths}
    counts: dict[int, dict[str, Any]] = {}
    with gpu.GpuMemory() as mem:
        for r in range(1, rounds + 1):
            for i, n in enumerate(lengths):
                system = p.manual(sections[n], p.label(r, i))
                chats = [p.render(p.messages(system, q)) for q in p.QUESTIONS[:4]]
                for cache in (True, False):
                    rows = []
                    for k, prompt in enumerate(chats):
                        got, held, paper = send(server, held, prompt, cache, args.max_tokens)
                        key = f"{'on' if cache else 'off'}_{'first' if k == 0 else 'later'}"
                        for name, value in (
                            ("ttft", got.ttft),
                            ("prompt_s", got.timings["prompt_ms"] / 1e3),
                        ):
                            samples[n].setdefault(f"{name}_{key}", []).append(value)
                        rows.append({"cache_n": got.cache_n, "prompt_n": got.prompt_n} | paper)
                    counts.setdefault(n, {})[f"{'on' if cache else 'off'}_{r}"] = rows
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "rounds": rounds,
                               "block": BLOCK, "lengths": {}}  # fmt: skip
    print(f"\n4 requests a round, {rounds} rounds; times: median [min to max] over the requests")
    print(f"  {'manual':>7} {'cache':>5} {'computed, requests 2-4':>23} {'time to first token':>20}"
          f" {'blocks of 16':>13}")  # fmt: skip
    for n in lengths:
        rows = {key: v for key, v in counts[n].items()}
        on, off = rows["on_1"], rows["off_1"]
        for key, v in rows.items():  # every round computes the same tokens (only times differ)
            ref = on if key.startswith("on") else off
            check([x["prompt_n"] for x in v[1:]] == [x["prompt_n"] for x in ref[1:]],
                  f"{n} tokens, {key}: other counts than round 1")  # fmt: skip
        s = {key: Spread.of(v) for key, v in samples[n].items()}
        entry = {
            "target": n,
            "sections": sections[n],
            "prompt_tokens": on[0]["tokens"],
            "shared": min(x["cache_n"] for x in on[1:]),
            "later_tokens": sum(x["tokens"] for x in on[1:]),
            "later_computed_on": sum(x["prompt_n"] for x in on[1:]),
            "later_computed_off": sum(x["prompt_n"] for x in off[1:]),
            "later_block_computed": sum(x["tokens"] - x["block_reused"] for x in on[1:]),
            "first_cache_n": on[0]["cache_n"],
            "requests_on": on,
            "requests_off": off,
            **s,
            "speedup": timing.ratio(s["ttft_off_later"], s["ttft_on_later"]),
            "prefill_speedup": timing.ratio(s["prompt_s_off_later"], s["prompt_s_on_later"]),
        }
        results["lengths"][keys[n]] = entry
        for mode in ("on", "off"):
            t = s[f"ttft_{mode}_later"]
            blocks = f"{entry['later_block_computed']:>13,}" if mode == "on" else ""
            print(
                f"  {on[0]['tokens']:>7,} {mode:>5} {entry[f'later_computed_{mode}']:>23,}"
                f" {t.median * 1e3:>9.1f} ms [{t.min * 1e3:.0f}-{t.max * 1e3:.0f}] {blocks}"
            )
        sp = entry["speedup"]
        print(f"          reuse cut the wait {sp.median:.1f}x [{sp.min:.1f} to {sp.max:.1f}]")
    results["server"] = {"build_info": props.get("build_info"), "slots": props.get("total_slots"),
                         "model_path": props.get("model_path")}  # fmt: skip
    results["seconds"] = time.perf_counter() - t_start
    print(gpu.record(results, mem.result(), "the server and its requests"))
    print(f"wrote {write_results('reuse', results)}; reuse.py took {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
