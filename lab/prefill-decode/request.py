"""Step 5: one chat request end to end, streamed, timed as its user sees it.

A prompt of 4,096 tokens goes in; an answer of 256 tokens comes out, each token handed over
(copied to the host) the moment it exists. Time to first token (TTFT) runs from sending the
prompt to the first token; time per output token (TPOT) is the mean gap between the tokens
after it. Beside each, the prediction from steps 1 and 2: the prefill's FLOPs at the measured
peak, and each decode step's bytes at the measured bandwidth.

The engine is this lab's own: engine.py's prefill pass, then lesson 2.4's decoder, one CUDA
graph replayed per token. Its graphs are made for one position each, so, as a server records
its graphs when it starts rather than while a user waits, we record one per position the
answer will reach before the request comes in.

    python3 request.py
    python3 request.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import measure
import pdlab as pd
import torch
from engine import Decoder, Prefill, build


def stream(
    prefill: Prefill, dec: Decoder, steps: list[Callable[[], Any]], prompt: torch.Tensor
) -> Iterator[tuple[int, float]]:
    """The answer to `prompt` (token ids on the host), token by token: each token and the time
    (perf_counter) at which it reached the host."""
    first = prefill(prompt.to(dec.cache.device)).argmax()
    dec.token.copy_(first.view(1))  # the decoder's next input
    yield int(first), time.perf_counter()
    for step in steps:  # step i decodes the token at position len(prompt) + i
        step()
        yield int(dec.token.item()), time.perf_counter()


def timed(
    prefill: Prefill, dec: Decoder, steps: list[Callable[[], Any]], prompt: torch.Tensor
) -> dict[str, Any]:
    """Send the prompt, collect the streamed answer; TTFT, TPOT and the split between the two."""
    measure.sync(dec.cache.device)
    sent = time.perf_counter()
    arrivals = list(stream(prefill, dec, steps, prompt))
    times = [t - sent for _, t in arrivals]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    total = times[-1]
    return {
        "tokens": [tok for tok, _ in arrivals],
        "arrivals": times,
        "ttft": times[0],
        "tpot": statistics.mean(gaps),
        "tpot_median": statistics.median(gaps),
        "gap_min": min(gaps),
        "gap_max": max(gaps),
        "total": total,
        "prefill_seconds": times[0],
        "decode_seconds": total - times[0],
        "prefill_share": times[0] / total,
        "decode_share": 1 - times[0] / total,
        "prefill_percent": 100 * times[0] / total,
        "decode_percent": 100 - 100 * times[0] / total,
        "decode_tok_s": len(gaps) / (total - times[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    measure.add_device_args(parser)
    parser.add_argument(
        "--weights", help="real weights: a Hugging Face name or folder (needs network)"
    )
    parser.add_argument("--prompt", type=int, help="prompt tokens (default 4,096)")
    parser.add_argument("--output", type=int, help="answer tokens (default 256)")
    parser.add_argument(
        "--chunk", type=int, help="prefill chunk, tokens (default 4,096; --tiny 64)"
    )
    parser.add_argument(
        "--peak", type=float, help="matrix-product peak, FLOP/s (default: step 2's)"
    )
    parser.add_argument("--bandwidth", type=float, help="memory bandwidth, B/s (default: step 2's)")
    parser.add_argument(
        "--no-compile", action="store_true", help="run the small operations unfused"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    device = measure.pick_device(args.device)
    memory, cuda = measure.PeakMemory(device), device.type == "cuda"
    print(measure.describe(device))
    peak, bw, source = measure.limits(device, args.tiny, args.peak, args.bandwidth)
    print(f"peak {pd.flop_rate(peak)} and bandwidth {pd.byte_rate(bw)}, {source}")
    sizes = pd.TINY_REQUEST if args.tiny else pd.REQUEST
    n_prompt, n_output = args.prompt or sizes["prompt"], args.output or sizes["output"]
    pd.check(n_output >= 2, "the answer needs at least 2 tokens to have a gap between tokens")
    compiled = cuda and not args.no_compile

    dec, cfg, how = build(device, args.tiny, n_prompt + n_output, compiled, args.weights)
    prefill = Prefill(dec, args.chunk or (64 if args.tiny else 4_096), compiled)
    print(f"\n{pd.MODEL}: {how}")
    recording = time.perf_counter()
    pool = torch.cuda.graph_pool_handle() if cuda else None
    steps = [
        measure.graphed(lambda pos=pos: dec.step(pos), device, pool, warmup=2 if i == 0 else 1)
        for i, pos in enumerate(range(n_prompt, n_prompt + n_output - 1))
    ]
    recorded = time.perf_counter() - recording
    how_run = (
        f"engine.py's prefill in chunks of {prefill.chunk:,} tokens, then lesson 2.4's decoder"
        + (" replaying one CUDA graph per token" if cuda else " eager on the CPU")
    )
    print(f"engine: {how_run}")
    ready = f"{len(steps)} decode steps made ready in {recorded:.1f} s"
    print(f"  {ready}, before the request" + (" (compiling included)" if compiled else ""))
    prompt = torch.randint(0, cfg["vocab_size"], (n_prompt,))
    timed(prefill, dec, steps, prompt)  # one request to warm up, untimed
    got = timed(prefill, dec, steps, prompt)
    ask = pd.request_prediction(cfg, n_prompt, n_output, peak, bw)
    ask.update(prefill_percent=100 * ask["prefill_share"], decode_percent=100 * ask["decode_share"])

    shown = [f"{tok} at {pd.duration(t)}" for tok, t in zip(got["tokens"][:3], got["arrivals"][:3])]
    print(
        f"\nrequest: {n_prompt:,} prompt tokens, {n_output} tokens out (random token ids: with random"
    )
    print("  weights words would mean nothing, and the speed does not depend on which tokens)")
    print(f"  streamed: {', '.join(shown)}, ... token {n_output} at {pd.duration(got['total'])}")
    print(f"\n  {'':<24} {'measured':>10} {'predicted':>10} {'predicted / measured':>21}")
    for label, key in (
        ("time to first token", "ttft"),
        ("time per output token", "tpot"),
        ("whole answer", "total"),
    ):
        print(
            f"  {label:<24} {pd.duration(got[key]):>10} {pd.duration(ask[key]):>10}"
            f" {ask[key] / got[key]:>21.1%}"
        )
    print(f"  {'prefill share':<24} {got['prefill_share']:>10.1%} {ask['prefill_share']:>10.1%}")
    print(f"  {'decode share':<24} {got['decode_share']:>10.1%} {ask['decode_share']:>10.1%}")
    print(
        f"  gaps between tokens: {pd.duration(got['gap_min'])} to {pd.duration(got['gap_max'])},"
        f" median {pd.duration(got['tpot_median'])}; {got['decode_tok_s']:,.1f} tokens per second"
        " after the first"
    )
    print(
        f"  (predicted: prefill FLOPs / {pd.flop_rate(peak)}; each decode step's bytes"
        f" / {pd.byte_rate(bw)})"
    )
    pd.check(
        got["ttft"] > 0.9 * ask["ttft"] if cuda else got["ttft"] > 0,
        f"the first token came in {pd.duration(got['ttft'])}, faster than the arithmetic allows",
    )
    pd.check(
        got["tpot"] > 0.9 * ask["tpot"] if cuda else got["tpot"] > 0,
        f"tokens came every {pd.duration(got['tpot'])}, faster than the bytes allow",
    )

    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,
        "model": how,
        "config": cfg,
        "engine": how_run,
        "peak_flop_s": peak,
        "bandwidth": bw,
        "limits_source": source,
        "prompt_tokens": n_prompt,
        "output_tokens": n_output,
        "graphs_seconds": recorded,
        "measured": {k: v for k, v in got.items() if k != "tokens"},
        "predicted": ask,
        "ttft_ratio": ask["ttft"] / got["ttft"],
        "tpot_ratio": ask["tpot"] / got["tpot"],
        "ttft_percent_of_predicted_speed": 100 * ask["ttft"] / got["ttft"],
        "tpot_percent_of_predicted_speed": 100 * ask["tpot"] / got["tpot"],
    }
    print()
    results.update(memory.report(), seconds=time.perf_counter() - started)
    print(f"wrote {pd.write_results('request', results)} ({results['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
