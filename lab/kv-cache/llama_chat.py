"""llama.cpp step 3: two turns of a chat against a running llama-server, the second reusing its cache.

The chat is step 3's (prefix_reuse.py): a long station log and a question, then the whole
conversation again with a follow-up, sent to llama-server's OpenAI-compatible
/v1/chat/completions. The server keeps each slot's cached tokens and, on turn 2, computes only
those after the longest common prefix; its reply's `timings` say how many tokens came from the
cache (`cache_n`) and how many were computed (`prompt_n`), and how long that took. Turn 2 is
then sent once more with `cache_prompt: false`, to time the same prompt computed from scratch.
The three requests are made --repeats times (5; 2 with --tiny), each time as a new chat (its
system prompt starts with "Run N."), so every prefill time is written with its spread.

    llama-server -m gguf/qwen3-0_6b-bf16.gguf -ngl 99 -c 4096 --port 8231 &
    python3 llama_chat.py --port 8231 --model gguf/qwen3-0_6b-bf16.gguf
    python3 llama_chat.py --port 8231 --device cpu --tiny      # a shorter document
    python3 llama_chat.py --port 8231 --reply generated        # send back what the model wrote

Random weights write nonsense, so by default turn 2 carries step 3's fixed reply as the
assistant's answer (--reply story); with real weights, --reply generated sends the model's own.
Only the standard library is used (urllib, through llamakit/server.py).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from labkit import timing
from labkit.checks import check
from labkit.results import write_results
from labkit.timing import Spread

from llamakit.gpu import GpuMemory
from llamakit.server import Server
from story import FOLLOW_UP, QUESTION, SYSTEM, make_document, reply_text

LABEL_TOKENS = 8  # turn 1 may share the start of the system prompt ("Run N.") with an earlier run
TIMING_KEYS = (
    "cache_n",
    "prompt_n",
    "prompt_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_second",
)


def count(server: Server, text: str) -> int:
    """Tokens of `text` as the server's model tokenizes it (no special-token parsing)."""
    return len(server.call("/tokenize", {"content": text})["tokens"])


def chat(
    server: Server, messages: list[dict[str, str]], max_tokens: int, cache: bool
) -> dict[str, Any]:
    """One chat completion with greedy sampling: the server's JSON answer."""
    body = {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": 0,
        "cache_prompt": cache,
        "ignore_eos": True,  # always `max_tokens` tokens, whatever random weights write
    }
    return server.call("/v1/chat/completions", body)


def timings(answer: dict[str, Any]) -> dict[str, Any]:
    """The server's `timings` of one answer: tokens from the cache, computed, and their times."""
    check(
        "timings" in answer,
        "the server's answer has no 'timings' (llama-server adds them to every answer)",
    )
    return {k: answer["timings"][k] for k in TIMING_KEYS if k in answer["timings"]}


def reply_of(answer: dict[str, Any]) -> str:
    """The assistant message of an answer as the history carries it (<think> block first, if any)."""
    msg = answer["choices"][0]["message"]
    content, think = msg.get("content") or "", msg.get("reasoning_content") or ""
    return f"<think>\n{think}\n</think>\n\n{content}" if think else content


def summarize(
    turn1: dict[str, Any], turn2: dict[str, Any], scratch: dict[str, Any], gpu: bool
) -> dict[str, Any]:
    """Tokens reused and computed on turn 2, and prefill times, from the three answers; checked."""
    t1, t2, t0 = timings(turn1), timings(turn2), timings(scratch)
    turn1_tokens = t1["cache_n"] + t1["prompt_n"]
    turn2_tokens = t2["cache_n"] + t2["prompt_n"]
    reused, computed = t2["cache_n"], t2["prompt_n"]
    check(
        t1["cache_n"] <= LABEL_TOKENS,
        f"turn 1 found {t1['cache_n']} of its tokens already cached: this server holds the chat from an "
        "earlier run; restart llama-server or pass --nonce",
    )
    usage2 = turn2.get("usage", {})
    if "prompt_tokens" in usage2:
        check(
            usage2["prompt_tokens"] == turn2_tokens,
            f"usage says {usage2['prompt_tokens']} prompt tokens, timings {reused} + {computed}",
        )
    cached = usage2.get("prompt_tokens_details", {}).get("cached_tokens")
    if cached is not None:
        check(cached == reused, f"usage says {cached} cached tokens, timings {reused}")
    check(
        t0["cache_n"] == 0 and t0["prompt_n"] == turn2_tokens,
        f"turn 2 from scratch reused {t0['cache_n']} tokens and computed {t0['prompt_n']} of {turn2_tokens}",
    )
    check(turn2_tokens > turn1_tokens, "turn 2's prompt is not longer than turn 1's")
    # the cache holds turn 1's prompt and the reply the server wrote; turn 2 starts with the prompt
    check(
        turn1_tokens - 1 <= reused <= turn1_tokens + t1["predicted_n"],
        f"turn 2 reused {reused:,} tokens; turn 1's prompt was {turn1_tokens:,}",
    )
    speedup = t0["prompt_ms"] / t2["prompt_ms"]
    if gpu:  # on a shared CPU the times are too noisy to judge
        check(
            speedup > 1,
            f"computing {computed} new tokens took longer than all {turn2_tokens} ({speedup:.2f}x)",
        )
    return {
        "turn1_tokens": turn1_tokens,
        "turn2_tokens": turn2_tokens,
        "tokens_reused": reused,
        "tokens_computed": computed,
        "reused_fraction": reused / turn2_tokens,
        "reply_tokens": t1["predicted_n"],
        "prefill_seconds": {
            "turn1": t1["prompt_ms"] / 1e3,
            "turn2_reuse": t2["prompt_ms"] / 1e3,
            "turn2_scratch": t0["prompt_ms"] / 1e3,
        },
        "decode_tok_s": {"turn1": t1["predicted_per_second"], "turn2": t2["predicted_per_second"]},
        "speedup": speedup,
        "timings": {"turn1": t1, "turn2": t2, "turn2_scratch": t0},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="recorded only: the server decides (-ngl)")
    parser.add_argument("--tiny", action="store_true", help="a shorter document (600 tokens)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--tokens", type=int, help="document length in tokens (default 3,000; 600 with --tiny)"
    )
    parser.add_argument(
        "--max-tokens", type=int, default=32, help="tokens the server writes per turn"
    )
    parser.add_argument(
        "--reply",
        choices=["story", "generated"],
        default="story",
        help="turn 2's assistant message: step 3's fixed reply, or what the server wrote",
    )
    parser.add_argument(
        "--model", help="the GGUF file the server should be serving (checked against its /props)"
    )
    parser.add_argument("--name", default="llama_chat", help="results/<name>.json")
    parser.add_argument("--save-responses", help="also write the raw JSON answers to this file")
    parser.add_argument(
        "--nonce",
        help="words added to the system prompt, so that a server that "
        "already holds this chat from an earlier run cannot reuse it",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per request")
    parser.add_argument(
        "--repeats", type=int, help="chats timed, each from a new turn 1 (default 5; --tiny 2)"
    )
    args = parser.parse_args()
    t_start = time.perf_counter()
    server = Server(args.host, args.port, args.timeout)
    server.wait(60)
    props = server.call("/props")
    n_ctx = int(props.get("default_generation_settings", {}).get("n_ctx") or 0)
    print(
        f"llama-server at {server.base}: {props.get('build_info', '?')}, model {props.get('model_path', '?')}"
    )
    print(f"context per slot: {n_ctx:,} tokens, {props.get('total_slots', '?')} slots")
    if args.model:
        served = Path(str(props.get("model_path", ""))).name
        check(served == Path(args.model).name, f"the server serves {served!r}, not {args.model!r}")

    want = args.tokens or (600 if args.tiny else 3_000)
    if n_ctx:  # leave room in the slot for the reply, the follow-up and the answers
        want = min(want, int(0.8 * n_ctx) - 3 * args.max_tokens - 200)
    check(want > 50, f"a context of {n_ctx} tokens per slot leaves no room for the document")
    document, facts = make_document(want, lambda text: count(server, text))
    repeats = args.repeats or (2 if args.tiny else 5)

    def opening(run: int) -> list[dict[str, str]]:
        """Turn 1 of the run-th chat: its own system prompt, so nothing of an earlier chat past
        the first few tokens can be reused."""
        system = f"Run {run}. {SYSTEM}" + (f" (Conversation {args.nonce}.)" if args.nonce else "")
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"{document}\n\n{QUESTION}"},
        ]

    # a first request on another text warms the server up (the first one pays one-time costs)
    # without sharing a prefix with turn 1: no chat template, so no special tokens in common
    server.call(
        "/completion",
        {"prompt": "Warm-up: " + document[-400:], "n_predict": 4, "cache_prompt": False},
    )
    answers = []
    with GpuMemory() as gpu:
        for run in range(1, repeats + 1):
            turn1 = opening(run)
            r1 = chat(server, turn1, args.max_tokens, cache=True)
            reply = reply_text(facts) if args.reply == "story" else reply_of(r1)
            turn2 = turn1 + [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": FOLLOW_UP},
            ]
            r2 = chat(server, turn2, args.max_tokens, cache=True)
            r0 = chat(server, turn2, args.max_tokens, cache=False)
            answers.append((r1, r2, r0))
    r1, r2, r0 = answers[0]
    if args.save_responses:
        with open(args.save_responses, "w") as f:
            json.dump({"turn1": r1, "turn2": r2, "turn2_scratch": r0}, f, indent=2, sort_keys=True)
    doc_tokens = count(server, document)
    runs = [summarize(*a, gpu=args.device.startswith("cuda")) for a in answers]
    got = runs[0]
    for other in runs[1:]:  # every chat the same tokens: only the times differ
        for key in ("turn1_tokens", "turn2_tokens", "tokens_reused", "tokens_computed"):
            check(other[key] == got[key], f"{key}: {other[key]} in one chat, {got[key]} in another")
    # each prefill time with its spread over the chats; the speed-up pairs their extremes
    got["prefill_seconds"] = {
        key: Spread.of([r["prefill_seconds"][key] for r in runs]) for key in got["prefill_seconds"]
    }
    got["speedup"] = timing.ratio(
        got["prefill_seconds"]["turn2_scratch"], got["prefill_seconds"]["turn2_reuse"]
    )
    got["repeats"] = repeats
    t1, t2, t0 = (got["timings"][k] for k in ("turn1", "turn2", "turn2_scratch"))
    reused, computed, turn2_tokens = (
        got["tokens_reused"],
        got["tokens_computed"],
        got["turn2_tokens"],
    )
    print(f"\ndocument: {doc_tokens:,} tokens; turn 2's assistant message: {args.reply} reply")
    print(
        f"turn 1 prompt : {got['turn1_tokens']:>6,} tokens, computed in {t1['prompt_ms']:.1f} ms; "
        f"then {t1['predicted_n']} tokens written at {t1['predicted_per_second']:.1f} tok/s"
    )
    print(f"turn 2 prompt : {turn2_tokens:>6,} tokens")
    print(
        f"  reused      : {reused:>6,} tokens from the cache (cache_n, {reused / turn2_tokens:.1%})"
    )
    print(f"  computed    : {computed:>6,} tokens (prompt_n) in {t2['prompt_ms']:.1f} ms")
    print(
        f"  from scratch: {t0['prompt_n']:>6,} tokens in {t0['prompt_ms']:.1f} ms (cache_prompt false)"
    )
    seconds = got["prefill_seconds"]
    print(f"\nover {repeats} chats, median [min to max] of each prefill:")
    for label, key in (
        ("turn 1", "turn1"),
        ("turn 2, reusing the cache", "turn2_reuse"),
        ("turn 2, from scratch", "turn2_scratch"),
    ):
        t = seconds[key]
        print(f"  {label:<26} {t.median * 1e3:>8.1f} ms  [{t.min * 1e3:.1f} to {t.max * 1e3:.1f}]")
    speedup = got["speedup"]
    print(
        f"  reusing the cache made turn 2's prefill {speedup.median:.1f}x faster"
        f" [{speedup.min:.1f} to {speedup.max:.1f}]"
    )

    peak = gpu.result()
    results = {
        "device": args.device,
        "tiny": args.tiny,  # a shorter document: not the page's token counts
        "server": {
            "build_info": props.get("build_info"),
            "model_path": props.get("model_path"),
            "n_ctx_slot": n_ctx,
            "total_slots": props.get("total_slots"),
        },
        "reply_mode": args.reply,
        "document_tokens": doc_tokens,
        **got,
        "peak_gpu_memory": peak["peak_used"],
        "gpu_memory": peak,
        "seconds": time.perf_counter() - t_start,
    }
    path = write_results(args.name, results)
    if peak["peak_used"] is not None:
        print(
            f"\npeak GPU memory in use during the chat (nvidia-smi, whole device): {peak['peak_used'] / 2**30:.2f} GiB"
        )
    print(f"wrote {path}; llama_chat.py wall time {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
