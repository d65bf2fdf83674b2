"""The memory planner of transformers' continuous batching, worked out on paper.

Standard library only. This is our own transcription of the sums in transformers'
`generation/continuous_batching/cache.py` (class `PagedAttentionMemoryHandler`), so that a
budget can be worked out before any GPU is rented, and checked against the engine after.
Two releases plan differently, and `Engine.release` picks the transcription:

5.17 (below) solves for the largest batch M and the blocks N together. 5.24 keeps M at its
setting (8,192 unless told), charges the LM head once per request when the model slices its
hidden states (`logits_to_keep`), counts the keys and values SDPA reads back from the cache
(repeated to every query head), keeps the cache in one flat tensor of "sectors" (here one
sector is one block) with two padding sectors inside the budget, and removes sectors to pay
for the attention mask: `plan_sectors()`.

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

import re
import textwrap
from dataclasses import dataclass
from math import ceil, floor, lcm, sqrt
from typing import Any

# Key used in results/*.json -> folder under models/ (no dots in keys: a capture splits on them).
MODELS = {"qwen3-8b": "Qwen3-8B", "qwen3-0_6b": "Qwen3-0.6B"}
# Conversation lengths the lab counts, by label: 8K, 32K and the config's max_position_embeddings.
CONTEXTS = {"8k": 8_192, "32k": 32_768, "full": 40_960}
RELEASES = ("5.17", "5.24")  # the transformers releases whose planner is transcribed here

DEFAULT_MAX_BATCH_TOKENS = 8_192  # the engine's default M
MIN_MAX_BATCH_TOKENS = 256
CACHE_FILL_PER_BATCH = 0.1  # when M must shrink: one batch may fill at most 10 % of the cache
INT32, INT64, FP32 = 4, 8, 4
PADDING_BLOCKS = 2  # the engine allocates two blocks more than it plans (padding reads/writes)
SECTOR_ALIGN = 128  # 5.24: a sector's bytes are a multiple of 128
MAX_REQUESTS_PER_BATCH = 1024  # 5.24: the default number of requests in one batch
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
    release: str = "5.17"  # whose planner: "5.17" (blocks) or "5.24" (sectors)
    # 5.24 only: the model computes logits for one token per request (Qwen3 does), so the LM
    # head is charged once per request of a batch, not per batch token
    logits_to_keep: bool = True
    max_requests_per_batch: int = MAX_REQUESTS_PER_BATCH  # 5.24: generate_batch sets it to N
    max_batch_tokens: int | None = None  # the setting: None lets the planner choose (5.24: 8,192)


def say(text: str, width: int = 98) -> None:
    """Print a sentence wrapped to `width` columns, its lines after the first indented by two
    spaces more than the first (the lab's output fits a 100-column terminal)."""
    body = text.lstrip("\n")
    first = body[: len(body) - len(body.lstrip())]
    glued = re.sub(r"(\d) (B|KiB|MiB|GiB|tokens|x)\b", "\\1\xa0\\2", body.strip())  # 6.6 MiB
    lines = textwrap.fill(glued, width, initial_indent=first, subsequent_indent=first + "  ")
    print(text[: len(text) - len(body)] + lines.replace("\xa0", " "))


def fraction_key(fraction: float) -> str:
    """A memory fraction as a key without a dot: 0.9 -> 'f90'."""
    return f"f{round(fraction * 100):02d}"


def release_of(version: str) -> str:
    """The planner a transformers version uses: '5.17' before 5.24, '5.24' from it on."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return "5.24" if (major, minor) >= (5, 24) else "5.17"


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
    m, blocks = max_batch_tokens or eng.max_batch_tokens, num_blocks
    if eng.release == "5.24":
        return plan_sectors(cfg, available, eng, m, num_blocks)
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
    lines["padding"] = 0  # 5.17 allocates its two padding blocks outside the share
    # the engine's tensors hold two blocks more than the plan (padding that is never allocated)
    allocated = (blocks + PADDING_BLOCKS) * eng.block_size * co["cache_n"]
    return result(cfg, eng, available, (m, blocks), allocated, (used, peak_name), lines)


def result(
    cfg: dict[str, Any],
    eng: Engine,
    available: int,
    plan_: tuple[int, int],
    allocated: int,
    footprint_: tuple[int, str],
    lines: dict[str, int],
    **extra: int,
) -> dict[str, Any]:
    """A plan as both releases give it: (M, blocks), the cache's bytes, the budget's lines."""
    m, blocks = plan_
    lines["rounding"] = available - sum(lines.values())
    return {
        "release": eng.release,
        "available": available,
        "max_batch_tokens": m,
        "num_blocks": blocks,
        **extra,
        "block_size": eng.block_size,
        "cache_tokens": blocks * eng.block_size,
        "cache_bytes_per_token": cache_bytes_per_token(cfg, eng),
        "cache_bytes_allocated": allocated,
        "footprint": footprint_[0],
        "binding_peak": footprint_[1],
        "lines": lines,
    }


def sector_costs(cfg: dict[str, Any], eng: Engine) -> dict[str, int]:
    """5.24's per-unit costs: of one batch token, one cache token beside the cache, one sector."""
    peaks(cfg, eng)  # full attention only, as for 5.17
    a, hd = eng.activation_bytes, head_dim(cfg)
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    # SDPA repeats the keys and values read back from the cache to every query head
    at_peak = 2 * kv if eng.attention_masks == 0 else 2 * heads + kv
    lm_head = cfg["hidden_size"] * a + cfg["vocab_size"] * FP32  # a hidden state and its logits
    attention = a * (cfg["hidden_size"] + heads * hd + 2 * kv * hd + at_peak * hd)
    per_m = max(0 if eng.logits_to_keep else lm_head, attention)
    k, groups = eng.io_copies, 1
    batch_m = k * (
        7 * INT32 + eng.output_rows * INT32 + groups * eng.max_blocks_per_request * INT32
    ) + k * groups * (INT64 + INT64)  # write index and the batch part of the read index
    block_bytes = cache_bytes_per_token(cfg, eng) * eng.block_size
    sector = lcm(block_bytes, SECTOR_ALIGN)
    sector_tokens = sector // block_bytes * eng.block_size
    read_n = at_peak * hd * a  # the old keys and values read back, per cache token
    index_n = k * groups * INT64
    logit_rows = eng.max_requests_per_batch * lm_head if eng.logits_to_keep else 0
    return {
        "activation_m": per_m,
        "batch_m": batch_m,
        "per_m": per_m + batch_m,
        "read_n": read_n,
        "index_n": index_n,
        "sector": sector,
        "sector_tokens": sector_tokens,
        "block_bytes": block_bytes,
        "per_sector": sector + sector_tokens * (read_n + index_n),
        "fixed": 2 * sector + logit_rows,
        "logit_rows": logit_rows,
        "mask": k * eng.attention_masks * a,  # per mask number, M x (N + M) of them
    }


def plan_sectors(
    cfg: dict[str, Any],
    available: int,
    eng: Engine,
    max_batch_tokens: int | None = None,
    num_blocks: int | None = None,
) -> dict[str, Any]:
    """transformers 5.24's planner (`infer_max_batch_tokens_and_num_sectors`), line by line."""
    co = sector_costs(cfg, eng)
    m = max_batch_tokens or DEFAULT_MAX_BATCH_TOKENS

    def mask(sectors: int) -> int:
        return co["mask"] * m * (sectors * co["sector_tokens"] + m)

    if num_blocks is not None:
        sectors = max(1, ceil(num_blocks * co["block_bytes"] / co["sector"]))
    else:
        sectors = (available - co["fixed"] - m * co["per_m"]) // co["per_sector"]
        per_sector_mask = mask(sectors + 1) - mask(sectors)
        sectors -= ceil(mask(sectors) / (co["per_sector"] + per_sector_mask))
    used = co["fixed"] + m * co["per_m"] + sectors * co["per_sector"] + mask(sectors)
    if m <= 0 or sectors <= 0:
        raise PlanError(f"no room for a cache: max_batch_tokens {m:,}, sectors {sectors:,}")
    if used > available:
        raise PlanError(f"the footprint {used:,} B is more than the {available:,} B available")
    n = sectors * co["sector_tokens"]
    blocks = n // eng.block_size
    lines = {
        "activations": co["activation_m"] * m + co["logit_rows"] + co["read_n"] * n,
        "batch_tensors": co["batch_m"] * m + co["index_n"] * n,
        "attention_mask": mask(sectors),
        "cache": cache_bytes_per_token(cfg, eng) * n,
        "padding": 2 * co["sector"],  # the two padding sectors, inside the share in 5.24
    }
    allocated = (sectors + 2) * co["sector"]
    return result(
        cfg, eng, available, (m, blocks), allocated, (used, "attention"), lines, num_sectors=sectors
    )


def block_cost(cfg: dict[str, Any], eng: Engine, paper: dict[str, Any]) -> float:
    """Bytes of the share one more cache block takes, at the plan's largest batch."""
    m = paper["max_batch_tokens"]
    if eng.release == "5.24":
        co = sector_costs(cfg, eng)
        per_token = co["per_sector"] / co["sector_tokens"] + co["mask"] * m
        return float(eng.block_size * per_token)
    co = coefficients(cfg, eng, peaks(cfg, eng)[paper["binding_peak"]])
    return float(eng.block_size * (co["cn"] + co["cmn"] * m))


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
    contexts = contexts or CONTEXTS
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
