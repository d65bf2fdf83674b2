"""Step 2: the two limits of this GPU, measured: memory bandwidth and matrix-product arithmetic.

First a large device-to-device copy gives the bandwidth (bytes read + bytes written per second).
Then the four matrix products of one Qwen3-8B layer (q, k and v fused; the output; gate and up
fused; down), in bf16 with the real weight shapes, multiply T = 1, 2, 4, ... 8,192 tokens at once.
A product of T tokens does 2 T FLOPs per weight and reads each 2-byte weight once, so its FLOPs
per byte grow with T: few tokens wait for memory, many wait for arithmetic. The achieved TFLOP/s
climb with T and flatten at the GPU's peak; the ridge point, peak / bandwidth, says where.

Timing: CUDA events; each pass recorded as a CUDA graph (no launch gaps, so the host's speed
does not show); a warm-up, then 20 samples, kept with their spread (median, quartiles, extremes);
the pass rotates over several copies of the layer's weights, more
bytes than the GPU's L2 cache holds, so that small T are read from memory, not from the cache.

    python3 limits.py
    python3 limits.py --device cpu --tiny
"""

from __future__ import annotations

from typing import Any

import pdlab as pd
import torch
import torch.nn.functional as F
from labkit import device, memory, timing
from labkit.checks import check, finite
from labkit.timing import Spread, derive, ratio
from labkit.units import BF16_BYTES as BF16
from labkit.units import byte_rate, duration, flop_rate, human

TOKENS = [2**i for i in range(14)]  # 1 ... 8,192
TINY_TOKENS = [2**i for i in range(9)]  # 1 ... 256
KNEE = 0.8  # the knee: the fewest tokens reaching this fraction of the plateau
REPEATS = 20


def tokens_at(ridge: Spread, shapes: list[tuple[int, int]]) -> Spread | None:
    """The tokens at which one layer's products reach `ridge` FLOP per byte, every statistic;
    None where some never do (a small layer on a CPU)."""
    got: Spread = derive(ridge, lambda r: pd.tokens_for_intensity(r, shapes))
    return got if all(finite(getattr(got, s)) is not None for s in timing.STATS) else None


def sweep(
    shapes: dict[str, tuple[int, int]], tokens: list[int], sets: int, dev: torch.device
) -> dict[str, dict[str, Any]]:
    """Time one layer's products for each number of tokens; FLOP/s and bytes per FLOP of each."""
    # `sets` copies of the layer's weights, random so that no timing runs on zeros
    weights = [
        [torch.randn(n, k, dtype=torch.bfloat16, device=dev) for n, k in shapes.values()]
        for _ in range(sets)
    ]
    inputs = {
        k: torch.randn(tokens[-1], k, dtype=torch.bfloat16, device=dev)
        for k in {k for _, k in shapes.values()}
    }
    flops_per_token = sum(2 * n * k for n, k in shapes.values())
    rows = {}
    for t in tokens:
        xs = [inputs[k][:t] for _, k in shapes.values()]

        def one_pass(xs: list[torch.Tensor] = xs) -> None:
            for layer in weights:
                for x, w in zip(xs, layer, strict=True):
                    F.linear(x, w)

        run = timing.graphed(one_pass, dev)
        repeats = REPEATS if dev.type == "cuda" else 3
        per_pass = timing.time_gpu(run, dev, repeats=repeats)
        del run
        seconds: Spread = derive(per_pass, lambda s: s / sets)
        flops = flops_per_token * t
        moved = sum(BF16 * (n * k + t * k + t * n) for n, k in shapes.values())
        rows[str(t)] = {
            "tokens": t,
            "seconds": seconds,
            "flops": flops,
            "bytes": moved,
            "flop_s": derive(seconds, lambda s, f=flops: f / s),
            "tflop_s": derive(seconds, lambda s, f=flops: f / s / 1e12),
            "bytes_per_flop": moved / flops,
            "flop_per_byte": moved and flops / moved,
            "bandwidth": derive(seconds, lambda s, m=moved: m / s),
            "bandwidth_gb_s": derive(seconds, lambda s, m=moved: m / s / 1e9),
        }
    return rows


def main() -> None:
    parser = device.arguments(__doc__)
    args = parser.parse_args()
    clock = timing.Stopwatch()
    dev = device.pick(args)
    peak_memory, cuda = memory.PeakMemory(dev), dev.type == "cuda"
    print(device.describe(dev, "torch"))
    cfg = pd.load_config(tiny=args.tiny)
    shapes = pd.fused_products(cfg)
    tokens = TINY_TOKENS if args.tiny else TOKENS

    nbytes = 2**30 if cuda else 2**23
    bw = timing.copy_bandwidth(dev, nbytes, repeats=REPEATS if cuda else 5)
    print(
        f"\ncopy bandwidth: {byte_rate(bw.median)}, bytes read + bytes written per second"
        f" by a copy of {human(nbytes)}"
    )
    print(f"  (median of {bw.n} copies; {byte_rate(bw.min)} to {byte_rate(bw.max)})")
    check(
        0 < bw.max < 1e13, f"a bandwidth of {bw.max / 1e12:.2f} TB/s is beyond any memory of today"
    )

    set_bytes = sum(BF16 * n * k for n, k in shapes.values())
    sets = 4 if cuda else 2
    beyond = ", more than any L2 cache" if cuda else ""
    print(f"\nOne layer's four products, bf16, rotating over {sets} copies of its weights")
    print(f"  ({human(sets * set_bytes)}{beyond}):")
    print("  " + ", ".join(f"{name} {n:,} x {k:,}" for name, (n, k) in shapes.items()))
    rows = sweep(shapes, tokens, sets, dev)
    peak_row = max(rows.values(), key=lambda r: r["flop_s"].median)
    peak: Spread = peak_row["flop_s"]
    print(
        f"\n  {'tokens':>7} {'time':>10} {'spread':>7} {'TFLOP/s':>9} {'of peak':>8}"
        f" {'bytes/FLOP':>10} {'FLOP/B':>8} {'GB/s':>8}"
    )
    for r in rows.values():
        s = r["seconds"]
        print(
            f"  {r['tokens']:>7,} {duration(s.median):>10} {s.relative:>7.1%}"
            f" {r['tflop_s'].median:>9.2f} {r['flop_s'].median / peak.median:>8.1%}"
            f" {r['bytes_per_flop']:>10.4f} {r['flop_per_byte']:>8.1f}"
            f" {r['bandwidth'].median / 1e9:>8,.0f}"
        )
    print(f"  (time: median of {peak.n} samples; spread: (max - min) / median)")
    ceiling = 2.5e15 if cuda else 1e13
    check(
        peak.median < ceiling,
        f"{peak.median / 1e12:,.0f} TFLOP/s of bf16 products is beyond this kind of device",
    )
    small: Spread = rows[str(tokens[0])]["bandwidth"]
    if cuda:
        check(
            small.median < 1.5 * bw.median,
            f"{tokens[0]} token read its weights at {small.median / 1e9:,.0f} GB/s,"
            f" far above the copy's {bw.median / 1e9:,.0f} GB/s: served from a cache, not from memory",
        )

    knee = next(r["tokens"] for r in rows.values() if r["flop_s"].median >= KNEE * peak.median)
    ridge: Spread = ratio(peak, bw)
    shape_list = list(shapes.values())
    ridge_tokens = tokens_at(ridge, shape_list)
    crossing = tokens_at(ratio(peak, small), shape_list)
    assumed_peak, assumed_bw, _ = pd.assumed()
    assumed_ridge = assumed_peak / assumed_bw
    assumed_tokens = pd.tokens_for_intensity(assumed_ridge, shape_list)
    print(f"\npeak: {flop_rate(peak.median)}, at {peak_row['tokens']:,} tokens (the plateau)")
    print(f"knee: from {knee:,} tokens at once the products reach {KNEE:.0%} of the peak")
    print(
        f"ridge point, measured: {flop_rate(peak.median)} / {byte_rate(bw.median)}"
        f" = {ridge.median:.1f} FLOP per byte;"
    )
    if ridge_tokens is not None:
        print(f"  one layer's products reach it at T = {ridge_tokens.median:,.1f} tokens")
    else:
        print("  one layer's products of this size never reach it")
    print(
        f"  (on paper, from the assumed {flop_rate(assumed_peak)} and {byte_rate(assumed_bw)}:"
        f" {assumed_ridge:.1f} FLOP per byte,"
    )
    print(f"  T = {assumed_tokens:,.1f} tokens)")
    if crossing is not None:
        print(
            f"the two asymptotes cross at T = {crossing.median:,.1f} tokens: the peak, and memory"
            f" (the {tokens[0]}-token rate,"
        )
        print(f"  {byte_rate(small.median)}, times FLOP per byte)")
    if cuda:
        print(
            "below the ridge a product waits for its weights to arrive; above it, for arithmetic:"
        )
        print("  decoding one token sits at the far left, a prompt of thousands at the far right")

    data: dict[str, Any] = {
        "device": dev.type,
        "tiny": args.tiny,
        "gpu": torch.cuda.get_device_name(dev) if cuda else "CPU",
        "config": cfg,
        "shapes": {name: list(s) for name, s in shapes.items()},
        "sets": sets,
        "weight_bytes_per_set": set_bytes,
        "copy_bytes": nbytes,
        "bandwidth": bw,
        "bandwidth_gb_s": derive(bw, lambda b: b / 1e9),
        "tokens": tokens,
        "sweep": rows,
        "peak_flop_s": peak,
        "peak_tflop_s": derive(peak, lambda f: f / 1e12),
        "peak_tokens": peak_row["tokens"],
        "knee_fraction": KNEE,
        "knee_tokens": knee,
        "small_bandwidth": small,
        "small_bandwidth_gb_s": derive(small, lambda b: b / 1e9),
        "crossing_tokens": crossing,
        "ridge_flop_per_byte": ridge,
        "ridge_tokens": ridge_tokens,
        "ridge_predicted_flop_per_byte": assumed_ridge,
        "ridge_predicted_tokens": finite(assumed_tokens),
    }
    pd.finish("limits", data, peak_memory, clock)


if __name__ == "__main__":
    main()
