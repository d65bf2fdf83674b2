"""Step 1: prefill and decode on paper, from Qwen3-8B's config.json alone.

Each token passes through every weight matrix once: a multiply and an add per weight, so

    FLOPs per token = 2 x the weights that multiply (all matrices and the LM head; the embedding
                      is a lookup)

plus attention, which grows with the tokens before it. A prompt's tokens go through together,
so the weights are read once for all of them: arithmetic decides the time. A decode step has
one token: it reads every weight (and the cache) for 2 FLOPs per 2-byte weight, so memory
bandwidth decides it. The GPU's ridge point, peak FLOP/s / bandwidth, says how many FLOPs per
byte a piece of work needs before arithmetic, not bandwidth, is its limit.

Standard library only:  python3 paper.py [--peak FLOP/s] [--bandwidth B/s] [path/to/config.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pdlab as pd
from labkit import configs, results
from labkit.checks import check
from labkit.units import BF16_BYTES as BF16
from labkit.units import duration, human


def print_parameters(cfg: dict[str, Any], p: dict[str, int]) -> None:
    """The parameter count, matrix by matrix."""

    def line(label: str, shape: str, count: int) -> None:
        print(f"  {label:<24} {shape:>17} {count:>15,}")

    print("Parameters, every matrix as outputs x inputs:")
    for name, (n, k) in pd.layer_matrices(cfg).items():
        line(f"one layer: {name}", f"{n:,} x {k:,}", n * k)
    line("one layer: matrices", "", p["per_layer_matrices"])
    line("one layer: 4 norms", "", p["per_layer_norms"])
    line(f"{cfg['num_hidden_layers']} layers", "", p["in_layers"])
    shape = f"{cfg['vocab_size']:,} x {cfg['hidden_size']:,}"
    line("embedding (a lookup)", shape, p["embedding"])
    tied = cfg.get("tie_word_embeddings")
    line("LM head" + (" (tied: the same)" if tied else ""), shape, p["lm_head"])
    line("final norm", "", p["final_norm"])
    total = p["total"]
    line("total", "", total)
    print(f"  = {BF16 * total:,} B ({human(BF16 * total)}) in bf16, 2 bytes per parameter")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", help="a config.json (default: models/Qwen3-8B)")
    parser.add_argument("--peak", type=float, help="bf16 FLOP/s (default: an H200's)")
    parser.add_argument("--bandwidth", type=float, help="bytes/s (default: an H200's)")
    args = parser.parse_args()
    started = time.perf_counter()
    cfg = pd.load_config(args.config)
    name = Path(args.config).parent.name if args.config else pd.MODEL
    assumed_peak, assumed_bw, source = pd.assumed()
    peak, bw = args.peak or assumed_peak, args.bandwidth or assumed_bw
    default = peak == assumed_peak and bw == assumed_bw
    check(1e9 < peak < 1e17 and 1e8 < bw < 1e14, "give --peak in FLOP/s and --bandwidth in B/s")
    d, layers = configs.head_size(cfg), cfg["num_hidden_layers"]
    print(
        f"{name}: {layers} layers, hidden size {cfg['hidden_size']:,}, MLP {cfg['intermediate_size']:,}"
    )
    print(
        f"  {cfg['num_attention_heads']} query heads and {cfg['num_key_value_heads']} key-value heads"
        f" of {d} numbers, vocabulary {cfg['vocab_size']:,}\n"
    )
    p = pd.parameters(cfg)
    print_parameters(cfg, p)

    per_token, pair = pd.flops_per_token(cfg), pd.attention_flops_per_pair(cfg)
    print(
        f"\nFLOPs per token = 2 (a multiply and an add) x {p['multiplied']:,} weights that multiply"
    )
    print(
        f"  = {per_token:,} FLOP ({per_token / 1e9:.2f} GFLOP). The embedding is a lookup: no FLOPs;"
    )
    print("  norms, rotary embedding and the activation cost a few FLOPs per number, left out.")
    print(
        f"Attention adds 4 x {layers} layers x {cfg['num_attention_heads']} query heads x {d}"
        f" = {pair:,} FLOP per earlier token a token meets;"
    )
    print(
        "  a prompt of n tokens holds n (n + 1) / 2 such pairs (each token meets itself and those"
        " before)."
    )

    print(
        f"\nAssumed GPU: {peak / 1e12:,.0f} TFLOP/s (bf16 matrix products), {bw / 1e12:.2f} TB/s"
        " (memory),"
    )
    print(f"  {source if default else 'as given'}.")
    print("  Step 2 (limits.py) measures both on your GPU; step 5 predicts again from those.")

    wb, kv = pd.decode_weight_bytes(cfg), pd.kv_bytes_per_token(cfg)
    print("\nPrefill: every prompt token through every matrix, the LM head once (the first token")
    print("  needs only the last position's logits). Time: its FLOPs at the peak, unless reading")
    print(
        f"  the weights ({human(wb)}) and writing {kv:,} B of keys and values per token takes longer."
    )
    print(
        f"  {'tokens':>8} {'TFLOP':>8} {'attention':>9} {'FLOP/B':>8} {'bound':>10}"
        f" {'TTFT':>10} {'tok/s':>9}"
    )
    lengths = sorted(set(pd.PREFILL_LENGTHS + [4_096]))
    prefill = {}
    for n in lengths:
        row = pd.prefill_prediction(cfg, n, peak, bw)
        prefill[str(n)] = row
        print(
            f"  {n:>8,} {row['flops'] / 1e12:>8.1f} {row['attention_flops'] / row['flops']:>9.1%}"
            f" {row['flop_per_byte']:>8,.0f} {row['bound']:>10} {duration(row['seconds']):>10}"
            f" {row['tok_s']:>9,.0f}"
        )
    print("  (attention: its share of the FLOPs; FLOP/B: FLOPs per byte read or written)")

    print(f"\nDecode: one token reads {wb:,} B of weights ({human(wb)}: all but the embedding")
    print(
        f"  table, of which one row) plus {kv:,} B per cached token. Time: bytes / {bw / 1e12:.2f}"
        " TB/s."
    )
    print(
        f"  {'depth':>8} {'bytes read':>16} {'FLOP/B':>8} {'bound':>10} {'TPOT':>10} {'tok/s':>9}"
    )
    decode = {}
    for depth in pd.DECODE_DEPTHS:
        row = pd.decode_prediction(cfg, depth, peak, bw)
        decode[str(depth)] = row
        print(
            f"  {depth:>8,} {row['bytes']:>16,} {row['flop_per_byte']:>8.2f} {row['bound']:>10}"
            f" {duration(row['seconds']):>10} {row['tok_s']:>9,.1f}"
        )

    ridge = peak / bw
    products = pd.fused_products(cfg)
    ridge_tokens = pd.tokens_for_intensity(ridge, list(products.values()))
    print(
        f"\nRidge point: {peak / 1e12:,.0f} TFLOP/s / {bw / 1e12:.2f} TB/s = {ridge:.1f} FLOP per byte."
    )
    print("  T tokens through a bf16 weight: 2 T FLOPs per 2 bytes read, about T FLOP per byte.")
    print("  Exactly, counting the inputs read and the outputs written, one layer's four products")
    print("  (" + ", ".join(f"{k} {n:,} x {kk:,}" for k, (n, kk) in products.items()) + ")")
    print(
        f"  reach {ridge:.1f} FLOP per byte at T = {ridge_tokens:.1f} tokens: fewer tokens at once"
        " wait for memory,"
    )
    print("  more wait for arithmetic.")
    ask = pd.request_prediction(cfg, pd.REQUEST["prompt"], pd.REQUEST["output"], peak, bw)
    print(
        f"\nOne request, a {pd.REQUEST['prompt']:,}-token prompt and {pd.REQUEST['output']} tokens"
        f" out: the first token after {duration(ask['ttft'])},"
    )
    print(
        f"  then {duration(ask['tpot'])} per token; {duration(ask['total'])} in all, of which"
        f" prefill {ask['prefill_share']:.1%}."
    )

    data = {
        "model": name,
        "config": cfg,
        "parameters": p,
        "weight_bytes": pd.weight_bytes(cfg),
        "decode_weight_bytes": wb,
        "kv_bytes_per_token": kv,
        "flops_per_token": per_token,
        "attention_flops_per_pair": pair,
        "assumed": {
            "peak_flop_s": peak,
            "bandwidth": bw,
            "peak_tflop_s": peak / 1e12,
            "bandwidth_gb_s": bw / 1e9,
            "source": source if default else "given",
        },
        "ridge_flop_per_byte": ridge,
        "ridge_tokens": ridge_tokens,
        "prefill": prefill,
        "decode": decode,
        "request": {**ask, **pd.REQUEST},
    }
    print(f"\nwrote {results.write_results('paper', data)} ({time.perf_counter() - started:.2f} s)")


if __name__ == "__main__":
    main()
