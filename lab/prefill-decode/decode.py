"""Step 4: time per output token, with a short and a long conversation behind it.

After the first token, each new token is one decode step: a single token through every layer.
It does 2 FLOPs per weight but has to read every weight, and the keys and values of every
earlier token, from memory; so bytes, not arithmetic, set its pace:

    time per output token >= (weight bytes + depth x KV bytes per token) / bandwidth

We time decode steps at a few depths (tokens already cached) with the lab kit's compact decoder
(labkit/decoder.py: one CUDA graph per step, flash attention, small operations fused), on the
GPU's own clock (CUDA events around 25 steps in a row, 20 times), and compare each with that
bound, using the bandwidth step 2 measured.

    python3 decode.py
    python3 decode.py --device cpu --tiny
"""

from __future__ import annotations

from typing import Any

import engine
import pdlab as pd
import torch
from engine import Prefill, build
from labkit import timing
from labkit.checks import check
from labkit.kernels import SPLIT_MARGIN
from labkit.reference import relative_error
from labkit.timing import Spread, derive, ratio
from labkit.units import duration, human


def continues_prefill(dec: Any, vocab: int, tokens: int) -> float:
    """The decoder's logits for token n after a prefill of n - 1 tokens, against a prefill of all
    n: a relative error near bf16 rounding when the decoder reads the cache the prefill wrote."""
    ids = torch.randint(0, vocab, (tokens,), device=dec.cache.device)
    prefill = Prefill(dec, 4_096, compile_ops=False)
    whole = prefill(ids)
    prefill(ids[:-1])
    dec.token.fill_(int(ids[-1]))
    # no torch.no_grad() here: the compiled decoder would be compiled again for the graphs, which
    # run with gradients on (nothing requires them)
    stepped = dec.step(tokens - 1)[0]
    return relative_error(stepped, whole)


def main() -> None:
    parser = engine.arguments(__doc__)
    parser.add_argument(
        "--depths", type=int, nargs="*", help="tokens already cached (short to long)"
    )
    args = parser.parse_args()
    clock = timing.Stopwatch()
    dev, peak_memory, peak, bw, source = engine.begin(args, "torch")
    cuda = dev.type == "cuda"
    depths = sorted(args.depths or (pd.TINY_DECODE_DEPTHS if args.tiny else pd.DECODE_DEPTHS))
    compiled = cuda and not args.no_compile

    check_tokens = 17 if args.tiny else 33
    dec, cfg, how = build(dev, args.tiny, max(depths[-1] + 1, check_tokens), compiled, args.weights)
    dec.fill_random()  # no timed step reads an unwritten cache
    weights, per_token = dec.weight_bytes_read(), pd.kv_bytes_per_token(cfg)
    print(f"\n{pd.MODEL}: {how}")
    print(
        f"  read per token: weights {weights:,} B ({human(weights)}: all but the embedding table,"
    )
    print(f"  of which one row), plus {per_token:,} B of keys and values per cached token")
    if not args.weights:
        check(
            weights == pd.decode_weight_bytes(cfg),
            f"the decoder holds {weights:,} B of weights, the config says"
            f" {pd.decode_weight_bytes(cfg):,}",
        )
    how_run = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how_run += ", small operations fused by torch.compile" if compiled else ""
    print(f"  the kit's decoder: {how_run}")
    chosen = f"timed as CUDA graphs, the fewest within {SPLIT_MARGIN:.0%} of the fastest"
    print(f"  K slices per matrix-vector product ({chosen if cuda else 'on the CPU: 1'}):")
    print("  " + ", ".join(f"{kind} {n}" for kind, n in dec.splits.items()))
    diff = continues_prefill(dec, cfg["vocab_size"], check_tokens)
    print(
        "  check: the decoder's logits after a prefill of n - 1 tokens, against a prefill of all n:"
    )
    print(f"  off by {diff:.4f} (a cache read wrongly would be off by about 1)")
    check(
        diff < 0.25, f"decoding after a prefill is off by {diff:.4f}: the cache is not read right"
    )

    print(
        f"\n  {'depth':>7} {'TPOT':>10} {'spread':>7} {'tok/s':>8} {'bytes read':>16}"
        f" {'bound':>10} {'of bound':>8} {'arithmetic':>10}"
    )
    rows: dict[str, Any] = {}
    steps, repeats = (25, 20) if cuda else (3, 2)
    for depth in depths:
        run = dec.graph(depth)

        def steps_in_a_row(run: Any = run) -> None:
            for _ in range(steps):
                run()

        per_sample = timing.time_gpu(steps_in_a_row, dev, repeats=repeats, calls=1)
        del run
        seconds: Spread = derive(per_sample, lambda s: s / steps)
        moved = weights + depth * per_token
        bound = moved / bw
        flops = pd.flops_per_token(cfg) + pd.attention_flops(cfg, 1, start=depth)
        of_bound: Spread = derive(seconds, lambda s, b=bound: b / s)
        of_peak: Spread = derive(seconds, lambda s, f=flops: f / s / peak)
        rows[str(depth)] = {
            "depth": depth,
            "tpot": seconds,
            "tok_s": derive(seconds, lambda s: 1 / s),
            "bytes": moved,
            "bound_tpot": bound,
            "bound_tok_s": 1 / bound,
            "fraction_of_bound": of_bound,
            "percent_of_bound": derive(of_bound, lambda x: 100 * x),
            "flops": flops,
            "flop_s": derive(seconds, lambda s, f=flops: f / s),
            "fraction_of_peak": of_peak,
            "percent_of_peak": derive(of_peak, lambda x: 100 * x),
        }
        print(
            f"  {depth:>7,} {duration(seconds.median):>10} {seconds.relative:>7.1%}"
            f" {1 / seconds.median:>8,.1f} {moved:>16,} {duration(bound):>10}"
            f" {of_bound.median:>8.1%} {of_peak.median:>10.2%}"
        )
        check(
            of_bound.median < (1.1 if cuda else 1000),
            f"at depth {depth:,} a step took {duration(seconds.median)}, less than reading its"
            f" bytes allows ({duration(bound)})",
        )
    clock_of = "the GPU's own clock (CUDA events)" if cuda else "the host's clock (no GPU)"
    print(f"  (TPOT: time per output token, median of {repeats} runs of {steps} steps each, on")
    print(f"  {clock_of}; spread: (max - min) / median; bound: bytes read / bandwidth;")
    print("  arithmetic: FLOPs done per second / the matrix-product peak)")
    short, long = rows[str(depths[0])], rows[str(depths[-1])]
    slowdown: Spread = ratio(long["tpot"], short["tpot"])
    predicted = long["bound_tpot"] / short["bound_tpot"]
    print(
        f"\nfrom depth {depths[0]:,} to {depths[-1]:,}: {slowdown.median:.3f}x the time per token"
        f" measured, {predicted:.3f}x predicted by the bytes read"
    )
    data: dict[str, Any] = {
        "device": dev.type,
        "tiny": args.tiny,
        "model": how,
        "config": cfg,
        "bandwidth": bw,
        "peak_flop_s": peak,
        "limits_source": source,
        "decoder": how_run,
        "splits": dec.splits,
        "split_kinds": sum(s > 1 for s in dec.splits.values()),
        "split_margin": SPLIT_MARGIN * 100,
        "weight_bytes": weights,
        "kv_bytes_per_token": per_token,
        "check_logits_rel_diff": diff,
        "steps_per_sample": steps,
        "depths": rows,
        "short": short,
        "long": long,
        "slowdown": slowdown,
        "slowdown_predicted": predicted,
    }
    print()
    pd.finish("decode", data, peak_memory, clock)


if __name__ == "__main__":
    main()
