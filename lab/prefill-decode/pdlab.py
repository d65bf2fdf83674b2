"""The lab's arithmetic on paper, from config.json alone, and its shared plumbing (results, checks).

Only the standard library is imported, so paper.py runs anywhere. Every count follows the
shapes of a Qwen3 model: per layer the query, key, value and output matrices of attention
and the gate, up and down matrices of the MLP; then the LM head. A weight is 2 bytes (bf16).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

LAB = Path(__file__).resolve().parent
MODEL = "Qwen3-8B"
BF16 = 2
GIB = 2**30
# Figures measured earlier on an H200 of the kind this lab was recorded on (the course's notes),
# used before step 2 has measured the GPU at hand.
ASSUMED_PEAK = 790e12  # bf16 dense matrix products, FLOP/s
ASSUMED_BANDWIDTH = 4.25e12  # device-to-device copy, bytes read + written per second
CARD_LIMIT = 22 * GIB  # what a step may take to fit a rented 24 GB card (its context aside)
PREFILL_LENGTHS = [128, 512, 2_048, 8_192, 32_768]
TINY_PREFILL_LENGTHS = [16, 32, 64, 128, 256]
DECODE_DEPTHS = [0, 4_096, 32_768]
TINY_DECODE_DEPTHS = [0, 64, 256]
REQUEST = {"prompt": 4_096, "output": 256}
TINY_REQUEST = {"prompt": 192, "output": 24}


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """A model's config.json: the given file, or models/Qwen3-8B/config.json (as published)."""
    return json.loads(Path(path or LAB / "models" / MODEL / "config.json").read_text())


def tiny_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The same family of shapes, shrunk so that the GPU scripts run in seconds on a CPU."""
    small = dict(cfg)
    small.update(
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=768,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=2_048,
    )
    return small


def head_size(cfg: dict[str, Any]) -> int:
    """Numbers per head: `head_dim` where the config names it, else hidden size / query heads."""
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def layer_matrices(cfg: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """One layer's weight matrices as (outputs, inputs), in the order a token meets them."""
    h, d, i = cfg["hidden_size"], head_size(cfg), cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    return {
        "q": (q, h),
        "k": (kv, h),
        "v": (kv, h),
        "o": (h, q),
        "gate": (i, h),
        "up": (i, h),
        "down": (h, i),
    }


def fused_products(cfg: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """The four matrix products of one layer as an engine runs them: q, k and v as one matrix,
    gate and up as one. Each is (outputs N, inputs K)."""
    m = layer_matrices(cfg)
    return {
        "qkv": (m["q"][0] + m["k"][0] + m["v"][0], m["q"][1]),
        "o": m["o"],
        "gate_up": (m["gate"][0] + m["up"][0], m["gate"][1]),
        "down": m["down"],
    }


def parameters(cfg: dict[str, Any]) -> dict[str, int]:
    """Parameter counts: per layer, all layers, embedding, LM head, norms, and the total."""
    h, d, layers = cfg["hidden_size"], head_size(cfg), cfg["num_hidden_layers"]
    per_layer_matrices = sum(n * k for n, k in layer_matrices(cfg).values())
    per_layer_norms = 2 * h + 2 * d  # before attention, before the MLP; q and k norms per head
    embedding = cfg["vocab_size"] * h
    lm_head = 0 if cfg.get("tie_word_embeddings") else embedding  # tied: the same table
    total = layers * (per_layer_matrices + per_layer_norms) + embedding + lm_head + h
    return {
        "per_layer_matrices": per_layer_matrices,
        "per_layer_norms": per_layer_norms,
        "in_layers": layers * (per_layer_matrices + per_layer_norms),
        "embedding": embedding,
        "lm_head": embedding,  # the LM head multiplies by a vocab x hidden matrix, tied or not
        "final_norm": h,
        "total": total,
        # weights that multiply: every matrix but the embedding (a lookup)
        "multiplied": layers * per_layer_matrices + embedding,
    }


def flops_per_token(cfg: dict[str, Any]) -> int:
    """2 FLOPs (a multiply and an add) per multiplied weight: every layer's matrices and the LM head."""
    return 2 * parameters(cfg)["multiplied"]


def attention_flops_per_pair(cfg: dict[str, Any]) -> int:
    """FLOPs for one query token meeting one earlier token in every layer: the score q.k and the
    weighted sum of v, each 2 x head size per query head."""
    return 4 * cfg["num_hidden_layers"] * cfg["num_attention_heads"] * head_size(cfg)


def attention_flops(cfg: dict[str, Any], tokens: int, start: int = 0) -> int:
    """Attention FLOPs for `tokens` new tokens after `start` cached ones; token i meets i + 1 tokens
    (the earlier ones and itself), so a prompt of n tokens holds n (n + 1) / 2 pairs."""
    pairs = tokens * start + tokens * (tokens + 1) // 2
    return attention_flops_per_pair(cfg) * pairs


def prefill_flops(cfg: dict[str, Any], tokens: int) -> int:
    """FLOPs to read a prompt and produce the first token: every layer's matrices for every token,
    attention over the causal pairs, and the LM head once (only the last position's logits count)."""
    p = parameters(cfg)
    layers = cfg["num_hidden_layers"] * p["per_layer_matrices"]
    return 2 * layers * tokens + 2 * p["lm_head"] + attention_flops(cfg, tokens)


def kv_bytes_per_token(cfg: dict[str, Any]) -> int:
    """2 (key and value) x layers x key-value heads x head size x 2 bytes."""
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_size(cfg) * BF16


def weight_bytes(cfg: dict[str, Any]) -> int:
    """Bytes of all the weights in bf16 (the embedding table and the LM head once each, if untied)."""
    return BF16 * parameters(cfg)["total"]


def decode_weight_bytes(cfg: dict[str, Any]) -> int:
    """Bytes of weights one decode step reads: every layer, the final norm and the LM head; of the
    embedding table only one row, left out (8 KiB for Qwen3-8B)."""
    p = parameters(cfg)
    return BF16 * (p["in_layers"] + p["final_norm"] + p["lm_head"])


def decode_bytes(cfg: dict[str, Any], depth: int) -> int:
    """Bytes one decode step reads: the weights, plus the keys and values of `depth` cached tokens."""
    return decode_weight_bytes(cfg) + depth * kv_bytes_per_token(cfg)


def intensity(tokens: float, shapes: list[tuple[int, int]]) -> float:
    """FLOP per byte of multiplying `tokens` tokens by bf16 weights of these (N, K) shapes:
    2 T N K FLOPs over 2 (N K + T K + T N) bytes (weights read, inputs read, outputs written)."""
    flops = sum(2 * tokens * n * k for n, k in shapes)
    moved = sum(BF16 * (n * k + tokens * k + tokens * n) for n, k in shapes)
    return flops / moved


def tokens_for_intensity(target: float, shapes: list[tuple[int, int]]) -> float:
    """The number of tokens T at which intensity(T) reaches `target` FLOP per byte.

    T A / (A + T B) = target, with A = sum N K and B = sum (N + K), gives T = target A / (A - target B);
    infinite when the product can never reach it.
    """
    a, b = sum(n * k for n, k in shapes), sum(n + k for n, k in shapes)
    return target * a / (a - target * b) if a > target * b else float("inf")


def roofline(flops: float, moved: float, peak: float, bandwidth: float) -> tuple[float, str]:
    """The time of work that needs `flops` FLOPs and `moved` bytes, and which of the two bounds it."""
    compute, memory = flops / peak, moved / bandwidth
    return max(compute, memory), ("arithmetic" if compute >= memory else "memory")


def prefill_prediction(
    cfg: dict[str, Any], tokens: int, peak: float, bandwidth: float
) -> dict[str, Any]:
    """Time to first token for a prompt of `tokens` tokens: the prefill's FLOPs at `peak` FLOP/s,
    unless reading the weights once (and writing the prompt's keys and values) takes longer."""
    flops = prefill_flops(cfg, tokens)
    moved = decode_weight_bytes(cfg) + tokens * kv_bytes_per_token(cfg)
    seconds, bound = roofline(flops, moved, peak, bandwidth)
    return {
        "flops": flops,
        "attention_flops": attention_flops(cfg, tokens),
        "bytes": moved,
        "seconds": seconds,
        "tok_s": tokens / seconds,
        "bound": bound,
        "flop_per_byte": flops / moved,
    }


def decode_prediction(
    cfg: dict[str, Any], depth: int, peak: float, bandwidth: float
) -> dict[str, Any]:
    """Time per output token with `depth` tokens cached: the bytes it reads at `bandwidth` B/s,
    unless its FLOPs take longer."""
    flops = flops_per_token(cfg) + attention_flops(cfg, 1, start=depth)
    moved = decode_bytes(cfg, depth)
    seconds, bound = roofline(flops, moved, peak, bandwidth)
    return {
        "flops": flops,
        "bytes": moved,
        "seconds": seconds,
        "tok_s": 1 / seconds,
        "bound": bound,
        "flop_per_byte": flops / moved,
    }


def request_prediction(
    cfg: dict[str, Any], prompt: int, output: int, peak: float, bandwidth: float
) -> dict[str, Any]:
    """One request: the prefill gives the first of `output` tokens, then each decode step one more,
    at depths prompt, prompt + 1, ... Times in seconds; shares of the total."""
    ttft = prefill_prediction(cfg, prompt, peak, bandwidth)["seconds"]
    steps = [
        decode_prediction(cfg, prompt + j, peak, bandwidth)["seconds"] for j in range(output - 1)
    ]
    total = ttft + sum(steps)
    return {
        "ttft": ttft,
        "tpot": sum(steps) / len(steps),
        "total": total,
        "prefill_share": ttft / total,
        "decode_share": 1 - ttft / total,
    }


def human(n: float) -> str:
    """Bytes in binary units: 448.0 MiB, 15.26 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}" if unit == "GiB" else f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 812 us, 3.56 ms, 1.24 s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.0f} us"
    return f"{seconds * 1e3:,.2f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def flop_rate(x: float) -> str:
    """FLOP per second with a prefix: 791.2 TFLOP/s, 95.3 GFLOP/s."""
    for unit, size in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if x >= size:
            return f"{x / size:,.1f} {unit}"
    return f"{x:,.0f} FLOP/s"


def byte_rate(x: float) -> str:
    """Bytes per second with a prefix: 4.25 TB/s, 38.2 GB/s."""
    if x >= 1e12:
        return f"{x / 1e12:.2f} TB/s"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if x >= size:
            return f"{x / size:,.1f} {unit}"
    return f"{x:,.0f} B/s"


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write results/<name>.json (sorted keys, base units) through a temporary file."""
    path = Path("results") / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read_results(name: str) -> dict[str, Any] | None:
    """results/<name>.json as written by an earlier step, or None when it is not there."""
    path = Path("results") / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def check(ok: bool, what: str) -> None:
    """Stop the script with a clear message when a number makes no physical sense."""
    if not ok:
        print(f"\nSANITY CHECK FAILED: {what}", file=sys.stderr)
        sys.exit(2)
