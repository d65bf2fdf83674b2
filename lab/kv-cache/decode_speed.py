"""Step 4: how fast one conversation decodes as the KV cache behind it grows.

For each new token the GPU reads every weight once, plus the keys and values of every
earlier token. Reading bytes is the bottleneck, so the bytes-bound speed is

    tokens per second = copy bandwidth / (weight bytes + tokens cached x KV bytes per token)

We measure the copy bandwidth, then the decode speed at several depths, for both models.
Plain eager decoding is limited by Python and kernel launches, not by bytes, so the numbers
come from the compact decoder in decoder.py (same weights, CUDA graphs); transformers'
eager speed is printed once per model for comparison.

    python3 decode_speed.py
    python3 decode_speed.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import copy
import gc
import time
from typing import Any

import torch
from transformers import DynamicCache

from decoder import Decoder
from kvlab import MODELS, add_device_args, build_model, check, describe, human, kv_bytes_per_token
from kvlab import median_seconds, pick_device, write_results

DEPTHS, TINY_DEPTHS = [0, 2_048, 8_192, 16_384, 32_768], [0, 64, 256, 512, 1_024]
TARGET = 0.75  # Qwen3-8B at depth 0: at least this fraction of the bytes-bound speed


def copy_bandwidth(device: torch.device, nbytes: int) -> float:
    """Bytes read plus bytes written per second by a large device-to-device copy."""
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    seconds = median_seconds(lambda _: [dst.copy_(src) for _ in range(10)], device, 10, warmup=2) / 10
    return 2 * nbytes / seconds


def engine_eager(model: Any, device: torch.device, steps: int) -> float:
    """transformers as it comes: one forward call per token, no graph. Tokens per second."""
    cache = DynamicCache()
    ids = torch.tensor([[1]], device=device)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, use_cache=True)
        return 1 / median_seconds(lambda _: model(input_ids=ids, past_key_values=cache, use_cache=True), device, steps)


def logits_errors(model: Any, dec: Decoder, device: torch.device) -> tuple[float, float]:
    """One decode step after 16 tokens: the relative error of our decoder's logits and of
    transformers' own bf16 logits, both against transformers in float32."""
    ids = torch.randint(0, model.config.vocab_size, (1, 17), device=device)

    def engine(m: Any) -> tuple[torch.Tensor, DynamicCache]:
        cache = DynamicCache()
        m(input_ids=ids[:, :16], past_key_values=cache, use_cache=True)
        return m(input_ids=ids[:, 16:], past_key_values=cache, use_cache=True).logits[0, -1].float(), cache

    with torch.no_grad():
        exact, _ = engine(copy.deepcopy(model).float())
        bf16, cache = engine(model)
        for i, layer in enumerate(cache.layers):  # start our decoder from the engine's cache
            dec.cache[i, 0, :, :16], dec.cache[i, 1, :, :16] = layer.keys[0, :, :16], layer.values[0, :, :16]
        dec.token.fill_(int(ids[0, 16]))
        ours = dec.step(16)[0].float()
    return ((ours - exact).norm() / exact.norm()).item(), ((bf16 - exact).norm() / exact.norm()).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--bandwidth", type=float, help="use this copy bandwidth (B/s) instead of measuring")
    parser.add_argument("--no-compile", action="store_true", help="graphs of unfused operations")
    args = parser.parse_args()
    device = pick_device(args.device)
    print(describe(device))
    depths, cuda = (TINY_DEPTHS if args.tiny else DEPTHS), device.type == "cuda"
    bw = args.bandwidth or copy_bandwidth(device, 2**26 if args.tiny else 2**32)
    print(f"copy bandwidth: {bw / 1e12:.2f} TB/s (device-to-device copy, bytes read + written)")
    check(0 < bw < 6e12, f"a copy bandwidth of {bw / 1e12:.2f} TB/s is beyond any memory of today")
    compiled = cuda and not args.no_compile
    how = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how += (", small operations fused and products autotuned by torch.compile" if compiled else "")
    results: dict[str, Any] = {"device": device.type, "copy_bandwidth": bw, "decoder": how,
                               "copy_bandwidth_gb_s": bw / 1e9}

    for key in args.models:
        model, cfg, weights = build_model(MODELS[key], device, args.tiny)
        per_token = kv_bytes_per_token(cfg)
        dec = Decoder(model, depths[-1] + 1, compiled)
        start = time.perf_counter()
        diff, engine_diff = logits_errors(model, dec, device)
        eager = engine_eager(model, device, 5)
        print(f"\n{MODELS[key]}: {weights}")
        print(f"  weights read per token {dec.weight_bytes():,} B ({human(dec.weight_bytes())}),"
              f" KV per token {per_token:,} B")
        print(f"  transformers, eager, one call per token, depth 0: {eager:8.1f} tok/s")
        print(f"  our decoder ({how};")
        print(f"  K slices per matrix-vector product, fastest measured: {dec.splits}):")
        print(f"  check: logits against transformers in float32: ours off by {diff:.4f},"
              f" transformers' own bf16 by {engine_diff:.4f}")
        check(diff < 2 * engine_diff + 0.01, f"the compact decoder is off by {diff:.4f}")
        print(f"  {'depth':>8}  {'measured':>12}  {'bytes-bound':>12}  {'fraction':>8}  {'ms/token':>8}")
        row: dict[str, Any] = {"weight_bytes": dec.weight_bytes(), "kv_bytes_per_token": per_token,
                               "eager_tok_s": eager, "logits_rel_diff": diff,
                               "engine_logits_rel_diff": engine_diff, "depths": {},
                               "splits": dec.splits}
        for depth in depths:
            run = dec.graph(depth)
            steps, repeats = (50, 5) if cuda else (3, 2)
            seconds = median_seconds(lambda _: [run() for _ in range(steps)], device, repeats) / steps
            bound = bw / (dec.weight_bytes() + depth * per_token)
            tok_s = 1 / seconds
            print(f"  {depth:>8,}  {tok_s:>8.1f} tok/s  {bound:>6.1f} tok/s  {tok_s / bound:>7.1%}"
                  f"  {seconds * 1e3:>8.3f}")
            check(0 < tok_s < 1.05 * bound, f"{tok_s:.1f} tok/s is faster than the bytes allow ({bound:.1f})")
            row["depths"][str(depth)] = {"tok_s": tok_s, "bound_tok_s": bound, "fraction": tok_s / bound,
                                          "percent": 100 * tok_s / bound, "seconds_per_token": seconds}
        d0, dn = row["depths"][str(depths[0])], row["depths"][str(depths[3])]
        row["slowdown"] = d0["tok_s"] / dn["tok_s"]
        row["slowdown_predicted"] = d0["bound_tok_s"] / dn["bound_tok_s"]
        print(f"  from depth 0 to {depths[3]:,}: {row['slowdown']:.3f}x slower measured,"
              f" {row['slowdown_predicted']:.3f}x predicted by the bytes"
              f" ({row['slowdown'] / row['slowdown_predicted']:.1%} of it)")
        print(f"  ({time.perf_counter() - start:.0f} s for this model, compiling and recording included)")
        results[key] = row
        del model, dec
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()

    if "qwen3-8b" in results:
        got = results["qwen3-8b"]["depths"]["0"]["fraction"]
        verdict = "reached" if got >= TARGET else "NOT reached"
        print(f"\ntarget: Qwen3-8B at depth 0 at {TARGET:.0%} of the bytes bound or more: {got:.1%}, {verdict}")
    print(f"wrote {write_results('decode', results)}")


if __name__ == "__main__":
    main()
