"""The memory planner of transformers' continuous batching, worked out on paper.

Standard library only. This is our own transcription of the sums in transformers 5.17.0,
`generation/continuous_batching/cache.py` (class `PagedAttentionMemoryHandler`), so that a
budget can be worked out before any GPU is rented, and checked against the engine after.

The planner is handed `available` bytes (a fraction F of the memory still free once the
weights are loaded) and chooses two numbers:

    M  the largest batch, in tokens, one forward pass may hold (8,192 unless memory is short)
    N  the cache's size in tokens, a whole number of blocks of `block_size` tokens

so that, for each activation peak the model goes through,

    memory(M, N) = cm * M + cn * N + cmn * M * N + cmm * M * M  <=  available

cn holds the KV cache itself (bytes per token); cm the working space of one batch token
(its hidden state and its logits in fp32, plus the batch's index tensors); cmn and cmm the
attention mask that SDPA attention needs, M rows by (N + M) columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, floor, sqrt
from typing import Any

DEFAULT_MAX_BATCH_TOKENS = 8_192  # the engine's default M
MIN_MAX_BATCH_TOKENS = 256
CACHE_FILL_PER_BATCH = 0.1  # when M must shrink: one batch may fill at most 10 % of the cache
INT32, INT64, FP32 = 4, 8, 4
PADDING_BLOCKS = 2  # the engine allocates two blocks more than it plans (padding reads/writes)
# The parts of a GPU's memory a budget names, bottom to top (a stacked chart draws them so).
SEGMENTS = (
    "context",
    "weights",
    "cache",
    "batch_tensors",
    "activations",
    "allocator",
    "libraries",
    "free",
)


class PlanError(ValueError):
    """The budget leaves no room for a cache (too little memory for the settings)."""


@dataclass(frozen=True)
class Engine:
    """The engine settings the planner's sums depend on.

    The defaults are what transformers resolves for SDPA attention on one GPU: an attention
    mask is needed, no asynchronous double-buffering, no block table (flash-attention only).
    """

    block_size: int = 256
    cache_bytes: int = 2  # bytes per cached number: 2 for bf16, 1 for an 8-bit float
    activation_bytes: int = 2  # bf16 activations
    attention_masks: int = 1  # 1 with SDPA or eager attention, 0 with flash attention
    io_copies: int = 1  # 2 with asynchronous batching (two sets of batch tensors)
    max_blocks_per_request: int = 0  # the flash decode path's block table; 0 with SDPA
    output_rows: int = 1  # 2 when log-probabilities are returned


def head_dim(cfg: dict[str, Any]) -> int:
    """Numbers per attention head: `head_dim` when the config names it, else hidden / heads."""
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def cache_bytes_per_token(cfg: dict[str, Any], eng: Engine = Engine()) -> int:
    """Keys and values of one token in every layer: 2 x layers x kv heads x head size x bytes."""
    return (
        2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim(cfg) * eng.cache_bytes
    )


def peaks(cfg: dict[str, Any], eng: Engine) -> dict[str, tuple[int, int]]:
    """The planner's two activation peaks: (bytes per batch token, bytes per cache token)."""
    if cfg.get("use_sliding_window") or any(
        t != "full_attention" for t in cfg.get("layer_types") or []
    ):
        raise PlanError("this transcription covers models whose layers all use full attention")
    a = eng.activation_bytes
    page = cfg["num_key_value_heads"] * head_dim(cfg)  # one token's keys (or values) in one layer
    return {
        # turning hidden states into logits: the hidden state and a row of fp32 logits per token
        "lm_head": (cfg["hidden_size"] * a + cfg["vocab_size"] * FP32, 0),
        # attention: hidden state, queries, new keys and values per token; the whole cache read
        "attention": (
            a * (cfg["hidden_size"] + cfg["num_attention_heads"] * head_dim(cfg) + 2 * page),
            2 * page * a,
        ),
    }


def coefficients(cfg: dict[str, Any], eng: Engine, peak: tuple[int, int]) -> dict[str, int]:
    """cm, cn, cmn, cmm of one peak, split into the parts a budget names."""
    delta_m, delta_n = peak
    k, groups = eng.io_copies, 1  # one group of layers: every layer uses full attention
    index_n = k * groups * INT64  # the cache's read index, one int64 per cache token
    batch_m = (
        k * 7 * INT32  # token ids, positions and other small inputs, packed as 7 rows
        + k * eng.output_rows * INT32  # output token ids
        + k * groups * eng.max_blocks_per_request * INT32  # block table (flash decode path only)
        + k * groups * INT64  # write index
        + k * groups * INT64  # read index, its batch-token part
    )
    mask = k * eng.attention_masks * eng.activation_bytes  # mask of M x (N + M) numbers
    return {
        "activation_m": delta_m,
        "activation_n": delta_n,
        "cache_n": cache_bytes_per_token(cfg, eng),
        "index_n": index_n,
        "batch_m": batch_m,
        "cm": delta_m + batch_m,
        "cn": delta_n + cache_bytes_per_token(cfg, eng) + index_n,
        "cmn": mask,
        "cmm": mask,
    }


def _largest_root(a: float, b: float, c: float) -> int:
    """Largest positive root of a x^2 + b x + c = 0, rounded down (linear when a == 0)."""
    if a == 0:
        return int(-c / b)
    discriminant = b**2 - 4 * a * c
    if discriminant < 0:
        raise PlanError(f"no real solution (discriminant {discriminant})")
    root = (-b + sqrt(discriminant)) / (2 * a)
    if root < 0:
        raise PlanError(f"no positive solution (root {root})")
    return floor(root)


def _solve(
    cfg: dict[str, Any],
    eng: Engine,
    available: int,
    m: int | None,
    blocks: int | None,
    fill: float | None,
) -> tuple[int, int]:
    """(M, blocks) that keep every peak within `available`: the smallest answer over the peaks."""
    answers = []
    for peak in peaks(cfg, eng).values():
        co = coefficients(cfg, eng, peak)
        cm, cn, cmn, cmm = co["cm"], co["cn"], co["cmn"], co["cmm"]
        if m is None and blocks is None:
            assert fill is not None
            # M = fill x N turns the footprint into a quadratic in N
            pages = _largest_root(cmn * fill + cmm * fill**2, cn + cm * fill, -available)
            answers.append((int(pages * fill), int(pages) // eng.block_size))
        elif blocks is None:
            assert m is not None
            pages = floor((available - cm * m - cmm * m**2) / (cn + cmn * m))
            answers.append((m, pages // eng.block_size))
        else:
            n = blocks * eng.block_size
            answers.append((int(_largest_root(cmm, cm + cmn * n, cn * n - available)), blocks))
    return min(a[0] for a in answers), min(a[1] for a in answers)


def footprint(cfg: dict[str, Any], eng: Engine, m: int, blocks: int) -> tuple[int, str]:
    """The planner's memory for (M, blocks): the largest over the peaks, and that peak's name."""
    n = blocks * eng.block_size
    worst, name = -1, ""
    for key, peak in peaks(cfg, eng).items():
        co = coefficients(cfg, eng, peak)
        value = co["cn"] * n + co["cm"] * m + co["cmn"] * n * m + co["cmm"] * m * m
        if value > worst:
            worst, name = value, key
    return worst, name


def plan(
    cfg: dict[str, Any],
    available: int,
    eng: Engine = Engine(),
    max_batch_tokens: int | None = None,
    num_blocks: int | None = None,
) -> dict[str, Any]:
    """What the planner chooses for `available` bytes, and its budget line by line."""
    m, blocks = max_batch_tokens, num_blocks
    if m is None and blocks is None:
        ceiling, _ = _solve(cfg, eng, available, None, None, CACHE_FILL_PER_BATCH)
        m = max(min(DEFAULT_MAX_BATCH_TOKENS, ceiling), MIN_MAX_BATCH_TOKENS)
        m, blocks = _solve(cfg, eng, available, m, None, None)
    elif m is None or blocks is None:
        m, blocks = _solve(cfg, eng, available, m, blocks, None)
    assert m is not None and blocks is not None
    if m <= 0 or blocks <= 0:
        raise PlanError(f"no room for a cache: max_batch_tokens {m:,}, blocks {blocks:,}")
    used, peak_name = footprint(cfg, eng, m, blocks)
    if used > available:
        raise PlanError(f"the footprint {used:,} B is more than the {available:,} B available")
    n = blocks * eng.block_size
    co = coefficients(cfg, eng, peaks(cfg, eng)[peak_name])
    lines = {
        "activations": co["activation_m"] * m + co["activation_n"] * n,
        "batch_tensors": co["batch_m"] * m + co["index_n"] * n,
        "attention_mask": co["cmn"] * m * n + co["cmm"] * m * m,
        "cache": co["cache_n"] * n,
    }
    lines["rounding"] = available - sum(lines.values())
    return {
        "available": available,
        "max_batch_tokens": m,
        "num_blocks": blocks,
        "block_size": eng.block_size,
        "cache_tokens": n,
        "cache_bytes_per_token": co["cache_n"],
        # the engine's tensors hold two blocks more than the plan (padding that is never allocated)
        "cache_bytes_allocated": (blocks + PADDING_BLOCKS) * eng.block_size * co["cache_n"],
        "footprint": used,
        "binding_peak": peak_name,
        "lines": lines,
    }


def conversations(blocks: int, block_size: int, context: int) -> int:
    """Conversations of `context` tokens that `blocks` blocks hold at once (whole blocks each)."""
    return blocks // ceil(context / block_size)


def budget(
    cfg: dict[str, Any],
    total: int,
    context_bytes: int,
    weights: int,
    fraction: float,
    eng: Engine = Engine(),
    contexts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A card's budget: what is free once the weights are in, the engine's share, its plan."""
    contexts = contexts or {"8k": 8_192, "32k": 32_768, "full": 40_960}
    free = total - context_bytes - weights
    available = int(free * fraction)  # the engine applies the fraction to the free memory
    out: dict[str, Any] = {
        "total": total,
        "context": context_bytes,
        "weights": weights,
        "free": free,
        "fraction": fraction,
        "available": available,
        "slack": free - available,
        # vLLM applies its gpu_memory_utilization to the whole card instead
        "available_if_whole_card": int(total * fraction) - context_bytes - weights,
    }
    try:
        out["plan"] = plan(cfg, available, eng)
    except PlanError as err:
        out["plan"] = None
        out["problem"] = str(err)
        out["conversations"] = dict.fromkeys(contexts, 0)
        out["cache_tokens"] = 0
        return out
    p = out["plan"]
    out["cache_tokens"] = p["cache_tokens"]
    out["conversations"] = {
        k: conversations(p["num_blocks"], eng.block_size, c) for k, c in contexts.items()
    }
    return out


def segments(total: int, free: int, weights: int, p: dict[str, Any] | None) -> dict[str, int]:
    """A whole GPU as the planner's formula divides it, for a stacked chart (bytes per segment)."""
    seg = dict.fromkeys(SEGMENTS, 0)
    seg["context"] = total - free - weights  # what the engine finds taken besides the weights
    seg["weights"] = weights
    if p is not None:
        seg["cache"] = p["cache_bytes_allocated"]
        seg["batch_tensors"] = p["lines"]["attention_mask"] + p["lines"]["batch_tensors"]
        seg["activations"] = p["lines"]["activations"]
    seg["free"] = total - sum(seg.values())  # the 1 - F share, less the two padding blocks
    return seg
