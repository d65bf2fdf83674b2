"""Step 2: the two limits of this GPU, measured: memory bandwidth and matrix-product arithmetic.

First a large device-to-device copy gives the bandwidth (bytes read + bytes written per second).
Then the four matrix products of one Qwen3-8B layer (q, k and v fused; the output; gate and up
fused; down), in bf16 with the real weight shapes, multiply T = 1, 2, 4, ... 8,192 tokens at once.
A product of T tokens does 2 T FLOPs per weight and reads each 2-byte weight once, so its FLOPs
per byte grow with T: few tokens wait for memory, many wait for arithmetic. The achieved TFLOP/s
climb with T and flatten at the GPU's peak; the ridge point, peak / bandwidth, says where.

Timing: CUDA events; each pass recorded as a CUDA graph (no launch gaps); a warm-up, then the
median of several samples; the pass rotates over several copies of the layer's weights, more
bytes than the GPU's L2 cache holds, so that small T are read from memory, not from the cache.

    python3 limits.py
    python3 limits.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import measure
import pdlab as pd
import torch
import torch.nn.functional as F

TOKENS = [2**i for i in range(14)]  # 1 ... 8,192
TINY_TOKENS = [2**i for i in range(9)]  # 1 ... 256
KNEE = 0.8  # the knee: the fewest tokens reaching this fraction of the plateau


def finite(x: float) -> float | None:
    """x, or None where it is infinite (JSON has no infinity)."""
    return x if math.isfinite(x) else None


def copy_bandwidth(device: torch.device, nbytes: int) -> float:
    """Bytes read plus bytes written per second by a device-to-device copy of `nbytes` bytes."""
    src = torch.randn(nbytes // pd.BF16, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    seconds = measure.gpu_seconds(lambda: dst.copy_(src), device, repeats=10, warmup=2)
    return 2 * nbytes / seconds


def sweep(
    shapes: dict[str, tuple[int, int]], tokens: list[int], sets: int, device: torch.device
) -> dict[str, dict[str, float]]:
    """Time one layer's products for each number of tokens; FLOP/s and bytes per FLOP of each."""
    # `sets` copies of the layer's weights, random so that no timing runs on zeros
    weights = [
        [torch.randn(n, k, dtype=torch.bfloat16, device=device) for n, k in shapes.values()]
        for _ in range(sets)
    ]
    inputs = {
        k: torch.randn(tokens[-1], k, dtype=torch.bfloat16, device=device)
        for k in {k for _, k in shapes.values()}
    }
    flops_per_token = sum(2 * n * k for n, k in shapes.values())
    rows = {}
    for t in tokens:
        xs = [inputs[k][:t] for _, k in shapes.values()]

        def one_pass(xs: list[torch.Tensor] = xs) -> None:
            for layer in weights:
                for x, w in zip(xs, layer):
                    F.linear(x, w)

        run = measure.graphed(one_pass, device)
        seconds = measure.gpu_seconds(run, device, repeats=7 if device.type == "cuda" else 3) / sets
        del run
        flops = flops_per_token * t
        moved = sum(pd.BF16 * (n * k + t * k + t * n) for n, k in shapes.values())
        rows[str(t)] = {
            "tokens": t,
            "seconds": seconds,
            "flops": flops,
            "bytes": moved,
            "flop_s": flops / seconds,
            "tflop_s": flops / seconds / 1e12,
            "bytes_per_flop": moved / flops,
            "flop_per_byte": moved and flops / moved,
            "bandwidth": moved / seconds,
            "bandwidth_gb_s": moved / seconds / 1e9,
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    measure.add_device_args(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    device = measure.pick_device(args.device)
    memory, cuda = measure.PeakMemory(device), device.type == "cuda"
    print(measure.describe(device))
    cfg = pd.tiny_config(pd.load_config()) if args.tiny else pd.load_config()
    shapes = pd.fused_products(cfg)
    tokens = TINY_TOKENS if args.tiny else TOKENS

    nbytes = 2**30 if cuda else 2**23
    bw = copy_bandwidth(device, nbytes)
    print(
        f"\ncopy bandwidth: {pd.byte_rate(bw)}, bytes read + bytes written per second"
        f" by a copy of {pd.human(nbytes)}"
    )
    pd.check(0 < bw < 1e13, f"a bandwidth of {bw / 1e12:.2f} TB/s is beyond any memory of today")

    set_bytes = sum(pd.BF16 * n * k for n, k in shapes.values())
    sets = 4 if cuda else 2
    beyond = ", more than any L2 cache" if cuda else ""
    print(
        f"\nOne layer's four products, bf16, rotating over {sets} copies of its weights"
        f" ({pd.human(sets * set_bytes)}{beyond}):"
    )
    print("  " + ", ".join(f"{name} {n:,} x {k:,}" for name, (n, k) in shapes.items()))
    rows = sweep(shapes, tokens, sets, device)
    peak_row = max(rows.values(), key=lambda r: r["flop_s"])
    peak = peak_row["flop_s"]
    print(
        f"\n  {'tokens':>7} {'time':>10} {'TFLOP/s':>9} {'of peak':>8} {'bytes/FLOP':>10}"
        f" {'FLOP/B':>8} {'GB/s':>8}"
    )
    for r in rows.values():
        print(
            f"  {r['tokens']:>7,} {pd.duration(r['seconds']):>10} {r['tflop_s']:>9.2f}"
            f" {r['flop_s'] / peak:>8.1%} {r['bytes_per_flop']:>10.4f} {r['flop_per_byte']:>8.1f}"
            f" {r['bandwidth'] / 1e9:>8,.0f}"
        )
    ceiling = 2.5e15 if cuda else 1e13
    pd.check(
        peak < ceiling, f"{peak / 1e12:,.0f} TFLOP/s of bf16 products is beyond this kind of device"
    )
    small = rows[str(tokens[0])]["bandwidth"]
    if cuda:
        pd.check(
            small < 1.5 * bw,
            f"{tokens[0]} token read its weights at {small / 1e9:,.0f} GB/s,"
            f" far above the copy's {bw / 1e9:,.0f} GB/s: served from a cache, not from memory",
        )

    knee = next(r["tokens"] for r in rows.values() if r["flop_s"] >= KNEE * peak)
    ridge = peak / bw
    shape_list = list(shapes.values())
    ridge_tokens = pd.tokens_for_intensity(ridge, shape_list)
    crossing = pd.tokens_for_intensity(peak / small, shape_list)
    assumed_ridge = pd.ASSUMED_PEAK / pd.ASSUMED_BANDWIDTH
    assumed_tokens = pd.tokens_for_intensity(assumed_ridge, shape_list)
    print(f"\npeak: {pd.flop_rate(peak)}, at {peak_row['tokens']:,} tokens (the plateau)")
    print(f"knee: from {knee:,} tokens at once the products reach {KNEE:.0%} of the peak")
    print(
        f"ridge point, measured: {pd.flop_rate(peak)} / {pd.byte_rate(bw)} = {ridge:.1f} FLOP per byte;"
    )
    print(f"  one layer's products reach it at T = {ridge_tokens:,.1f} tokens")
    print(
        f"  (on paper, from the assumed {pd.flop_rate(pd.ASSUMED_PEAK)} and"
        f" {pd.byte_rate(pd.ASSUMED_BANDWIDTH)}: {assumed_ridge:.1f} FLOP per byte,"
        f" T = {assumed_tokens:,.1f} tokens)"
    )
    print(
        f"the two asymptotes cross at T = {crossing:,.1f} tokens: the peak, and memory (the"
        f" {tokens[0]}-token rate,"
    )
    print(f"  {pd.byte_rate(small)}, times FLOP per byte)")
    if cuda:
        print(
            "below the ridge a product waits for its weights to arrive; above it, for arithmetic:"
        )
        print("  decoding one token sits at the far left, a prompt of thousands at the far right")

    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,
        "gpu": torch.cuda.get_device_name(device) if cuda else "CPU",
        "config": cfg,
        "shapes": {name: list(s) for name, s in shapes.items()},
        "sets": sets,
        "weight_bytes_per_set": set_bytes,
        "copy_bytes": nbytes,
        "bandwidth": bw,
        "bandwidth_gb_s": bw / 1e9,
        "tokens": tokens,
        "sweep": rows,
        "peak_flop_s": peak,
        "peak_tflop_s": peak / 1e12,
        "peak_tokens": peak_row["tokens"],
        "knee_fraction": KNEE,
        "knee_tokens": knee,
        "small_bandwidth": small,
        "small_bandwidth_gb_s": small / 1e9,
        "crossing_tokens": finite(crossing),
        "ridge_flop_per_byte": ridge,
        "ridge_tokens": finite(ridge_tokens),
        "ridge_predicted_flop_per_byte": assumed_ridge,
        "ridge_predicted_tokens": finite(assumed_tokens),
    }
    results.update(memory.report(), seconds=time.perf_counter() - started)
    print(f"wrote {pd.write_results('limits', results)} ({results['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
