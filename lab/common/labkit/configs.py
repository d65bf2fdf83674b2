"""A model's published config.json, and the byte arithmetic every lesson does with it.

Standard library only, so steps done on paper run anywhere. Each lab ships the config.json files
it reads under its own models/ folder; facts.toml holds the same fields for pages (a test checks
they agree).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .units import BF16_BYTES, DTYPE_BYTES

QK_NORM_TYPES = {"qwen3", "qwen3_moe"}
"""Model types that normalise each query and key head (two vectors of head size per layer)."""


def load_config(path: str | Path, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """A config.json with the language model's fields on top (a multimodal config nests them
    under `text_config`, whose fields win), and `defaults` filled in where the file has none."""
    raw: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    text = raw.get("text_config")
    cfg = {k: v for k, v in raw.items() if k != "text_config"}
    if isinstance(text, dict):
        cfg |= text
    for key, value in (defaults or {}).items():
        cfg.setdefault(key, value)
    return cfg


def head_size(cfg: dict[str, Any]) -> int:
    """Numbers per head: `head_dim` when the config names it, else hidden size / query heads."""
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def kv_heads(cfg: dict[str, Any]) -> int:
    """Key-value heads: `num_key_value_heads`, or one per query head when the config has none
    (multi-head attention, as in Llama-2-7B)."""
    return int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])


def is_latent(cfg: dict[str, Any]) -> bool:
    """Latent attention (DeepSeek's MLA): the config names a `kv_lora_rank`."""
    return bool(cfg.get("kv_lora_rank"))


def number_bytes(cfg: dict[str, Any]) -> tuple[int, str]:
    """Bytes per number from `torch_dtype` (or `dtype`) and the name read; bf16 when absent."""
    name = str(cfg.get("torch_dtype") or cfg.get("dtype") or "").removeprefix("torch.")
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name], name
    return BF16_BYTES, ""


def kv_bytes_per_token(
    cfg: dict[str, Any], nbytes: int = BF16_BYTES, heads: int | None = None
) -> int:
    """Bytes the cache keeps per token with `nbytes` bytes per number, in every layer.

    Grouped-query or multi-head attention: 2 (key and value) x layers x key-value heads x head
    size x nbytes. Latent attention (MLA): layers x (kv_lora_rank + qk_rope_head_dim) x nbytes,
    one compressed vector per token and layer. `heads` overrides the key-value heads.
    """
    if is_latent(cfg):
        return cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * nbytes
    count = kv_heads(cfg) if heads is None else heads
    return 2 * cfg["num_hidden_layers"] * count * head_size(cfg) * nbytes


def weight_count(cfg: dict[str, Any]) -> int:
    """Numbers in a dense decoder's weights (Qwen3, Llama, Mistral shapes): per layer the query,
    key, value and output projections, the gate, up and down projections, two norms (and Qwen3's
    query and key norms); the embedding table and, unless tied, the LM head; the final norm."""
    h, d, layers = cfg["hidden_size"], head_size(cfg), cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * d, kv_heads(cfg) * d
    per_layer = 2 * h * q + 2 * h * kv + 3 * h * cfg["intermediate_size"] + 2 * h
    if cfg.get("model_type") in QK_NORM_TYPES:
        per_layer += 2 * d
    tables = (1 if cfg.get("tie_word_embeddings") else 2) * cfg["vocab_size"] * h
    return layers * per_layer + tables + h


def weight_bytes(cfg: dict[str, Any], nbytes: int = BF16_BYTES) -> int:
    """Bytes of a dense decoder's weights, counted from its config (see weight_count)."""
    return weight_count(cfg) * nbytes


def tiny_config(cfg: dict[str, Any], vocab: int | None = 4096, **sizes: Any) -> dict[str, Any]:
    """The same family of shapes, shrunk so a GPU script runs in seconds on a CPU (--tiny):
    2 layers, a sixteenth of the widths, a quarter of the heads, heads of 16, a vocabulary of
    `vocab` (None keeps it); `sizes` override any of them."""
    small = dict(cfg)
    small.update(
        num_hidden_layers=2,
        hidden_size=cfg["hidden_size"] // 16,
        intermediate_size=cfg["intermediate_size"] // 16,
        num_attention_heads=max(1, cfg["num_attention_heads"] // 4),
        num_key_value_heads=max(1, kv_heads(cfg) // 4),
        head_dim=16,
    )
    if vocab:
        small["vocab_size"] = vocab
    small.update(sizes)
    return small
