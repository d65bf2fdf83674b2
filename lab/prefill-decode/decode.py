"""Step 4: time per output token, with a short and a long conversation behind it.

After the first token, each new token is one decode step: a single token through every layer.
It does 2 FLOPs per weight but has to read every weight, and the keys and values of every
earlier token, from memory; so bytes, not arithmetic, set its pace:

    time per output token >= (weight bytes + depth x KV bytes per token) / bandwidth

We time decode steps at a few depths (tokens already cached) with lesson 2.4's compact decoder
(decoder.py: one CUDA graph per step, flash attention, small operations fused), and compare
each with that bound, using the bandwidth step 2 measured.

    python3 decode.py
    python3 decode.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import measure
import pdlab as pd
import torch
from engine import Prefill, build


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """|a - b| / |b| over a whole vector of logits."""
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    measure.add_device_args(parser)
    parser.add_argument(
        "--weights", help="real weights: a Hugging Face name or folder (needs network)"
    )
    parser.add_argument(
        "--depths", type=int, nargs="*", help="tokens already cached (short to long)"
    )
    parser.add_argument(
        "--peak", type=float, help="matrix-product peak, FLOP/s (default: step 2's)"
    )
    parser.add_argument("--bandwidth", type=float, help="memory bandwidth, B/s (default: step 2's)")
    parser.add_argument("--no-compile", action="store_true", help="graphs of unfused operations")
    args = parser.parse_args()
    started = time.perf_counter()
    device = measure.pick_device(args.device)
    memory, cuda = measure.PeakMemory(device), device.type == "cuda"
    print(measure.describe(device))
    peak, bw, source = measure.limits(device, args.tiny, args.peak, args.bandwidth)
    print(f"bandwidth {pd.byte_rate(bw)} and peak {pd.flop_rate(peak)}, {source}")
    depths = sorted(args.depths or (pd.TINY_DECODE_DEPTHS if args.tiny else pd.DECODE_DEPTHS))
    compiled = cuda and not args.no_compile

    check_tokens = 17 if args.tiny else 33
    dec, cfg, how = build(
        device, args.tiny, max(depths[-1] + 1, check_tokens), compiled, args.weights
    )
    weights, per_token = dec.weight_bytes(), pd.kv_bytes_per_token(cfg)
    print(f"\n{pd.MODEL}: {how}")
    print(
        f"  read per token: weights {weights:,} B ({pd.human(weights)}: all but the embedding table,"
    )
    print(f"  of which one row), plus {per_token:,} B of keys and values per cached token")
    if not args.weights:
        pd.check(
            weights == pd.decode_weight_bytes(cfg),
            f"the decoder holds {weights:,} B of weights, the config says {pd.decode_weight_bytes(cfg):,}",
        )
    how_run = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how_run += ", small operations fused by torch.compile" if compiled else ""
    print(f"  lesson 2.4's decoder: {how_run}")
    print(f"  K slices per matrix-vector product (the fastest measured): {dec.splits}")
    diff = continues_prefill(dec, cfg["vocab_size"], check_tokens)
    print(
        "  check: the decoder's logits after a prefill of n - 1 tokens, against a prefill of all n:"
    )
    print(f"  off by {diff:.4f} (a cache read wrongly would be off by about 1)")
    pd.check(
        diff < 0.25, f"decoding after a prefill is off by {diff:.4f}: the cache is not read right"
    )

    print(
        f"\n  {'depth':>7} {'TPOT':>10} {'tok/s':>8} {'bytes read':>16} {'bound':>10}"
        f" {'of bound':>8} {'arithmetic':>10}"
    )
    rows: dict[str, Any] = {}
    for depth in depths:
        run = dec.graph(depth)
        steps, repeats = (50, 5) if cuda else (3, 2)

        def steps_in_a_row(run: Any = run, steps: int = steps) -> None:
            for _ in range(steps):
                run()

        seconds = measure.gpu_seconds(steps_in_a_row, device, repeats) / steps
        moved = weights + depth * per_token
        bound = moved / bw
        flops = pd.flops_per_token(cfg) + pd.attention_flops(cfg, 1, start=depth)
        rows[str(depth)] = {
            "depth": depth,
            "tpot": seconds,
            "tok_s": 1 / seconds,
            "bytes": moved,
            "bound_tpot": bound,
            "bound_tok_s": 1 / bound,
            "fraction_of_bound": bound / seconds,
            "percent_of_bound": 100 * bound / seconds,
            "flops": flops,
            "flop_s": flops / seconds,
            "fraction_of_peak": flops / seconds / peak,
            "percent_of_peak": 100 * flops / seconds / peak,
        }
        print(
            f"  {depth:>7,} {pd.duration(seconds):>10} {1 / seconds:>8,.1f} {moved:>16,}"
            f" {pd.duration(bound):>10} {bound / seconds:>8.1%} {flops / seconds / peak:>10.2%}"
        )
        pd.check(
            bound / seconds < (1.1 if cuda else 1000),
            f"at depth {depth:,} a step took {pd.duration(seconds)}, less than reading its bytes"
            f" allows ({pd.duration(bound)})",
        )
    print(
        f"  (TPOT: time per output token, median of runs of {steps} steps; bound: bytes read / bandwidth;"
    )
    print("  arithmetic: FLOPs done per second / the matrix-product peak)")
    short, long = rows[str(depths[0])], rows[str(depths[-1])]
    slowdown, predicted = long["tpot"] / short["tpot"], long["bound_tpot"] / short["bound_tpot"]
    print(
        f"\nfrom depth {depths[0]:,} to {depths[-1]:,}: {slowdown:.3f}x the time per token measured,"
        f" {predicted:.3f}x predicted by the bytes read"
    )
    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,
        "model": how,
        "config": cfg,
        "bandwidth": bw,
        "peak_flop_s": peak,
        "limits_source": source,
        "decoder": how_run,
        "splits": dec.splits,
        "weight_bytes": weights,
        "kv_bytes_per_token": per_token,
        "check_logits_rel_diff": diff,
        "depths": rows,
        "short": short,
        "long": long,
        "slowdown": slowdown,
        "slowdown_predicted": predicted,
    }
    print()
    results.update(memory.report(), seconds=time.perf_counter() - started)
    print(f"wrote {pd.write_results('decode', results)} ({results['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
