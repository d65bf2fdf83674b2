"""The lesson's arithmetic on paper, from config.json alone: FLOPs, bytes, the roofline.

Only the standard library (and the lab kit's standard-library modules) is imported, so paper.py
runs anywhere. Every count follows the shapes of a Qwen3 model: per layer the query, key, value
and output matrices of attention and the gate, up and down matrices of the MLP; then the LM
head. A weight is 2 bytes (bf16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit import configs, facts, results
from labkit.checks import check
from labkit.units import BF16_BYTES as BF16

LAB = Path(__file__).resolve().parent
MODEL = "Qwen3-8B"
# The GPU step 1 assumes until step 2 has measured the one at hand: an H200, whose peak and
# bandwidth this lab's step 2 measured (labkit/facts.toml, cards.h200).
ASSUMED_CARD = "h200"
PREFILL_LENGTHS = [128, 512, 2_048, 8_192, 32_768]
TINY_PREFILL_LENGTHS = [16, 32, 64, 128, 256]
DECODE_DEPTHS = [0, 4_096, 32_768]
TINY_DECODE_DEPTHS = [0, 64, 256]
REQUEST = {"prompt": 4_096, "output": 256}
TINY_REQUEST = {"prompt": 192, "output": 24}
# --tiny: the same family of shapes, shrunk so that the GPU scripts run in seconds on a CPU
TINY_SIZES = {"hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 32}  # fmt: skip


def finish(name: str, data: dict[str, Any], peak_memory: Any, clock: Any) -> None:
    """A GPU step's last lines: its peak GPU memory (a labkit.memory.PeakMemory's report), its
    seconds (a labkit.timing.Stopwatch's), and results/<name>.json written."""
    data["peak_gpu_memory"] = peak_memory.report()
    data["seconds"] = clock.seconds()
    print(f"wrote {results.write_results(name, data)} ({data['seconds']:.1f} s)")


def load_config(path: str | Path | None = None, tiny: bool = False) -> dict[str, Any]:
    """A model's config.json: the given file, or models/Qwen3-8B/config.json (as published);
    shrunk with `tiny`."""
    cfg = configs.load_config(path or LAB / "models" / MODEL / "config.json")
    return configs.tiny_config(cfg, vocab=2_048, **TINY_SIZES) if tiny else cfg


def assumed() -> tuple[float, float, str]:
    """The peak (FLOP/s) and bandwidth (B/s) step 1 assumes, and where they come from."""
    peak = facts.fact(f"cards.{ASSUMED_CARD}.measured_bf16_flops")
    bandwidth = facts.fact(f"cards.{ASSUMED_CARD}.measured_bandwidth")
    source = f"an H200's, as step 2 of this lab measured them on {peak.date}"
    return peak.base, bandwidth.base, source


def layer_matrices(cfg: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """One layer's weight matrices as (outputs, inputs), in the order a token meets them."""
    h, d, i = cfg["hidden_size"], configs.head_size(cfg), cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * d, configs.kv_heads(cfg) * d
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
    h, d, layers = cfg["hidden_size"], configs.head_size(cfg), cfg["num_hidden_layers"]
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
    return 4 * cfg["num_hidden_layers"] * cfg["num_attention_heads"] * configs.head_size(cfg)


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
    return configs.kv_bytes_per_token(cfg, BF16)


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


def median(value: Any) -> float:
    """A timed value's median: a results file holds {"median", "min", ...}; a plain number as is."""
    return float(value["median"] if isinstance(value, dict) else value)


def limits(
    device: str, tiny: bool, peak: float | None, bandwidth: float | None
) -> tuple[float, float, str]:
    """The matrix-product peak (FLOP/s) and copy bandwidth (B/s) step 2 measured on this GPU (their
    medians), unless given; and a phrase saying where they came from."""
    if peak and bandwidth:
        return peak, bandwidth, "given on the command line"
    found = results.need_results("limits", "limits.py")
    check(
        found["device"] == device and found["tiny"] == tiny,
        f"results/limits.json was measured on {found['device']}"
        f"{' with --tiny' if found['tiny'] else ''}: run limits.py again with these options",
    )
    return (
        peak or median(found["peak_flop_s"]),
        bandwidth or median(found["bandwidth"]),
        f"measured by step 2 on {found['gpu']}",
    )
