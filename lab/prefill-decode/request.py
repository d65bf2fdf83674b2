"""Step 5: one chat request end to end, streamed, timed as its user sees it.

A prompt of 4,096 tokens goes in; an answer of 256 tokens comes out, each token handed over
(copied to the host) the moment it exists. Time to first token (TTFT) runs from sending the
prompt to the first token; time per output token (TPOT) is the mean gap between the tokens
after it. Beside each, the prediction from steps 1 and 2: the prefill's FLOPs at the measured
peak, and each decode step's bytes at the measured bandwidth. After one request to warm up,
the same request is sent several times; each figure is the median over them, with its spread.
The host takes part here, as it does in a server: it launches the prefill's kernels and
receives every token.

The engine is this lab's own: engine.py's prefill pass, then the lab kit's decoder, one CUDA
graph replayed per token. Its graphs are made for one position each, so, as a server records
its graphs when it starts rather than while a user waits, we record one per position the
answer will reach before the request comes in.

    python3 request.py
    python3 request.py --device cpu --tiny
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import engine
import pdlab as pd
import torch
from engine import Prefill, build
from labkit import timing
from labkit.checks import check
from labkit.decoder import Decoder
from labkit.timing import Spread, derive
from labkit.units import byte_rate, duration, flop_rate

REPEATS = 5  # timed requests, after one to warm up


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
    timing.sync(dec.cache.device)
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


SPREAD_KEYS = ("ttft", "tpot", "total", "prefill_seconds", "decode_seconds", "prefill_share",
               "decode_share", "prefill_percent", "decode_percent", "decode_tok_s")  # fmt: skip


def main() -> None:
    parser = engine.arguments(__doc__)
    parser.add_argument("--prompt", type=int, help="prompt tokens (default 4,096)")
    parser.add_argument("--output", type=int, help="answer tokens (default 256)")
    parser.add_argument(
        "--chunk", type=int, help="prefill activation chunk, tokens (default 4,096; --tiny 64)"
    )
    args = parser.parse_args()
    clock = timing.Stopwatch()
    dev, peak_memory, peak, bw, source = engine.begin(args, "torch")
    cuda = dev.type == "cuda"
    sizes = pd.TINY_REQUEST if args.tiny else pd.REQUEST
    n_prompt, n_output = args.prompt or sizes["prompt"], args.output or sizes["output"]
    check(n_output >= 2, "the answer needs at least 2 tokens to have a gap between tokens")
    compiled = cuda and not args.no_compile

    dec, cfg, how = build(dev, args.tiny, n_prompt + n_output, compiled, args.weights)
    prefill = Prefill(dec, args.chunk or (64 if args.tiny else 4_096), compiled)
    print(f"\n{pd.MODEL}: {how}")
    recording = timing.Stopwatch()
    pool = torch.cuda.graph_pool_handle() if cuda else None
    steps = [
        timing.graphed(lambda pos=pos: dec.step(pos), dev, pool, warmup=2 if i == 0 else 1)
        for i, pos in enumerate(range(n_prompt, n_prompt + n_output - 1))
    ]
    recorded = recording.seconds()
    how_run = (
        f"engine.py's prefill (activations in chunks of {prefill.chunk:,} tokens), then the"
        " kit's decoder" + (" replaying one CUDA graph per token" if cuda else " eager on the CPU")
    )
    print(f"engine: engine.py's prefill (activations in chunks of {prefill.chunk:,} tokens),")
    print("  then the kit's decoder" + (", one CUDA graph per token" if cuda else ", eager"))
    ready = f"{len(steps)} decode steps made ready in {recorded:.1f} s"
    print(f"  {ready}, before the request" + (" (compiling included)" if compiled else ""))
    prompt = torch.randint(0, cfg["vocab_size"], (n_prompt,))
    timed(prefill, dec, steps, prompt)  # one request to warm up, untimed
    repeats = REPEATS if cuda else 3
    runs = [timed(prefill, dec, steps, prompt) for _ in range(repeats)]
    got: dict[str, Any] = {k: Spread.of([r[k] for r in runs]) for k in SPREAD_KEYS}
    # the request drawn on the page: the one whose whole answer took the median time
    shown = sorted(runs, key=lambda r: r["total"])[len(runs) // 2]
    got["example"] = {k: v for k, v in shown.items() if k != "tokens"}
    got["arrivals"] = shown["arrivals"]
    got["gap_min"] = min(r["gap_min"] for r in runs)
    got["gap_max"] = max(r["gap_max"] for r in runs)
    got["tpot_median"] = Spread.of([r["tpot_median"] for r in runs])
    ask = pd.request_prediction(cfg, n_prompt, n_output, peak, bw)
    ask.update(prefill_percent=100 * ask["prefill_share"], decode_percent=100 * ask["decode_share"])

    first = [
        f"{tok} at {duration(t)}"
        for tok, t in zip(shown["tokens"][:3], shown["arrivals"][:3], strict=True)
    ]
    print(
        f"\nrequest: {n_prompt:,} prompt tokens, {n_output} tokens out (random token ids: with random"
    )
    print("  weights words would mean nothing, and the speed does not depend on which tokens)")
    print(f"  streamed: {', '.join(first)}, ... token {n_output} at {duration(shown['total'])}")
    print(
        f"\n  {'':<24} {'measured':>10} {'spread':>7} {'predicted':>10}"
        f" {'predicted / measured':>21}"
    )
    for label, key in (
        ("time to first token", "ttft"),
        ("time per output token", "tpot"),
        ("whole answer", "total"),
    ):
        m: Spread = got[key]
        print(
            f"  {label:<24} {duration(m.median):>10} {m.relative:>7.1%} {duration(ask[key]):>10}"
            f" {ask[key] / m.median:>21.1%}"
        )
    for label, key in (("prefill share", "prefill_share"), ("decode share", "decode_share")):
        print(f"  {label:<24} {got[key].median:>10.1%} {'':>7} {ask[key]:>10.1%}")
    print(
        f"  gaps between tokens: {duration(got['gap_min'])} to {duration(got['gap_max'])},"
        f" median {duration(got['tpot_median'].median)};"
    )
    print(f"  {got['decode_tok_s'].median:,.1f} tokens per second after the first")
    print(f"  (measured: median of {repeats} requests, spread (max - min) / median;")
    print(
        f"  predicted: prefill FLOPs / {flop_rate(peak)}; each decode step's bytes / {byte_rate(bw)})"
    )
    check(
        got["ttft"].median > 0.9 * ask["ttft"] if cuda else got["ttft"].median > 0,
        f"the first token came in {duration(got['ttft'].median)}, faster than the arithmetic"
        " allows",
    )
    check(
        got["tpot"].median > 0.9 * ask["tpot"] if cuda else got["tpot"].median > 0,
        f"tokens came every {duration(got['tpot'].median)}, faster than the bytes allow",
    )

    data: dict[str, Any] = {
        "device": dev.type,
        "tiny": args.tiny,
        "model": how,
        "config": cfg,
        "engine": how_run,
        "peak_flop_s": peak,
        "bandwidth": bw,
        "limits_source": source,
        "prompt_tokens": n_prompt,
        "output_tokens": n_output,
        "requests": repeats,
        "graphs_seconds": recorded,
        "measured": got,
        "predicted": ask,
        "ttft_ratio": derive(got["ttft"], lambda s: ask["ttft"] / s),
        "tpot_ratio": derive(got["tpot"], lambda s: ask["tpot"] / s),
        "ttft_percent_of_predicted_speed": derive(got["ttft"], lambda s: 100 * ask["ttft"] / s),
        "tpot_percent_of_predicted_speed": derive(got["tpot"], lambda s: 100 * ask["tpot"] / s),
    }
    print()
    pd.finish("request", data, peak_memory, clock)


if __name__ == "__main__":
    main()
