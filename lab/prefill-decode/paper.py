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
from pdlab import duration, human


def print_parameters(cfg: dict[str, Any], p: dict[str, int]) -> None:
    """The parameter count, matrix by matrix."""
    layers = cfg["num_hidden_layers"]
    print("Parameters, every matrix as outputs x inputs:")
    for name, (n, k) in pd.layer_matrices(cfg).items():
        print(f"  one layer, {name:<5} {n:>7,} x {k:>7,} = {n * k:>15,}")
    print(
        f"  one layer's matrices {p['per_layer_matrices']:>29,}, its norms {p['per_layer_norms']:,}"
    )
    print(f"  {layers} layers {p['in_layers']:>41,}")
    v, h = cfg["vocab_size"], cfg["hidden_size"]
    tied = " (the same table: tied)" if cfg.get("tie_word_embeddings") else ""
    print(f"  embedding (a lookup)   {v:>7,} x {k_of(h)} = {p['embedding']:>15,}")
    print(f"  LM head{tied:<15} {v:>7,} x {k_of(h)} = {p['lm_head']:>15,}")
    print(f"  final norm {p['final_norm']:>43,}")
    total = p["total"]
    print(f"  total {total:>48,} = {pd.BF16 * total:,} B ({human(pd.BF16 * total)}) in bf16")


def k_of(h: int) -> str:
    """The hidden size, right-aligned like the other inputs."""
    return f"{h:>7,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", help="a config.json (default: models/Qwen3-8B)")
    parser.add_argument("--peak", type=float, default=pd.ASSUMED_PEAK, help="bf16 FLOP/s")
    parser.add_argument("--bandwidth", type=float, default=pd.ASSUMED_BANDWIDTH, help="bytes/s")
    args = parser.parse_args()
    started = time.perf_counter()
    cfg = pd.load_config(args.config)
    name = Path(args.config).parent.name if args.config else pd.MODEL
    peak, bw = args.peak, args.bandwidth
    pd.check(1e9 < peak < 1e17 and 1e8 < bw < 1e14, "give --peak in FLOP/s and --bandwidth in B/s")
    d, layers = pd.head_size(cfg), cfg["num_hidden_layers"]
    print(
        f"{name}: {layers} layers, hidden size {cfg['hidden_size']:,},"
        f" {cfg['num_attention_heads']} query heads and {cfg['num_key_value_heads']} key-value"
        f" heads of {d} numbers, MLP {cfg['intermediate_size']:,} wide,"
        f" vocabulary {cfg['vocab_size']:,}\n"
    )
    p = pd.parameters(cfg)
    print_parameters(cfg, p)

    per_token, pair = pd.flops_per_token(cfg), pd.attention_flops_per_pair(cfg)
    print(
        f"\nFLOPs per token = 2 (a multiply and an add) x {p['multiplied']:,} weights that multiply"
        f" = {per_token:,} FLOP ({per_token / 1e9:.2f} GFLOP)"
    )
    print(
        "  (the embedding is a lookup: no FLOPs; norms, rotary embedding and the activation"
        " cost a few FLOPs per number, left out)"
    )
    print(
        f"  attention adds 4 x {layers} layers x {cfg['num_attention_heads']} query heads x {d}"
        f" = {pair:,} FLOP for each earlier token a token meets;"
    )
    print(
        "  a prompt of n tokens holds n (n + 1) / 2 such pairs (each token meets itself and those before)"
    )

    source = (
        "measured earlier on an H200 of the kind this lab was recorded on (the course's notes),"
        " not on this machine"
    )
    default = peak == pd.ASSUMED_PEAK and bw == pd.ASSUMED_BANDWIDTH
    print(
        f"\nAssumed GPU: {peak / 1e12:,.0f} TFLOP/s (bf16 matrix products) and {bw / 1e12:.2f} TB/s"
        f" (memory), {source if default else 'as given'}."
    )
    print(
        "Step 2 (limits.py) measures both on your GPU; step 5 predicts again from the measured ones."
    )

    wb, kv = pd.decode_weight_bytes(cfg), pd.kv_bytes_per_token(cfg)
    print(
        f"\nPrefill: every token through every matrix, the LM head once (only the last position's"
        f" logits give the first token); time = the larger of FLOPs / {peak / 1e12:,.0f} TFLOP/s"
        f" and the bytes (weights {human(wb)}, plus {kv:,} B of keys and values per token)"
        f" / {bw / 1e12:.2f} TB/s"
    )
    print(
        f"  {'tokens':>8} {'FLOPs':>10} {'attention':>9} {'FLOP/B':>8} {'bound':>10}"
        f" {'TTFT':>10} {'tok/s':>9}"
    )
    lengths = sorted(set(pd.PREFILL_LENGTHS + [4_096]))
    prefill = {}
    for n in lengths:
        row = pd.prefill_prediction(cfg, n, peak, bw)
        prefill[str(n)] = row
        print(
            f"  {n:>8,} {row['flops'] / 1e12:>7.1f} TF {row['attention_flops'] / row['flops']:>9.1%}"
            f" {row['flop_per_byte']:>8,.0f} {row['bound']:>10} {duration(row['seconds']):>10}"
            f" {row['tok_s']:>9,.0f}"
        )

    print(
        f"\nDecode: one token reads {wb:,} B of weights ({human(wb)}; the embedding table but"
        f" one row left out) plus {kv:,} B per cached token; time = bytes / {bw / 1e12:.2f} TB/s"
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
    shapes = list(pd.fused_products(cfg).values())
    ridge_tokens = pd.tokens_for_intensity(ridge, shapes)
    print(
        f"\nRidge point: {peak / 1e12:,.0f} TFLOP/s / {bw / 1e12:.2f} TB/s = {ridge:.1f} FLOP per byte."
    )
    print("  T tokens through a bf16 weight: 2 T FLOPs for 2 bytes read, about T FLOP per byte;")
    print(
        "  exactly, with the inputs read and outputs written too, one layer's four products"
        f" ({', '.join(f'{k} {n:,}x{kk:,}' for k, (n, kk) in pd.fused_products(cfg).items())})"
    )
    print(
        f"  reach {ridge:.1f} FLOP per byte at T = {ridge_tokens:.1f} tokens: fewer tokens at once"
        " wait for memory, more wait for arithmetic."
    )
    ask = pd.request_prediction(cfg, pd.REQUEST["prompt"], pd.REQUEST["output"], peak, bw)
    print(
        f"\nOne request, a {pd.REQUEST['prompt']:,}-token prompt and {pd.REQUEST['output']} tokens"
        f" out: first token after {duration(ask['ttft'])}, then {duration(ask['tpot'])} per token;"
        f" {duration(ask['total'])} in all, {ask['prefill_share']:.1%} of it prefill."
    )

    results = {
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
    print(f"\nwrote {pd.write_results('paper', results)} ({time.perf_counter() - started:.2f} s)")


if __name__ == "__main__":
    main()
