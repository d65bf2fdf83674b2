"""The sizes of one decoder and the way it keeps its keys and values, with their bytes on paper.

A `Shape` is what the compact decoder (decoder.py) is built from, and what a paper step counts
bytes with. One shape family covers the designs the course compares:

    MHA, GQA, MQA  a key and a value per key-value head: as many as the query heads, fewer, one
    sliding        GQA whose even layers keep only the last `window` tokens (a ring), as Gemma 2
    MLA            one latent per token and layer (kv_lora_rank numbers plus rope_dim numbers of
                   the key that carry the position), shared by every head (DeepSeek's design)

`Shape.of_config(cfg)` reads a published Qwen3 (or Llama) config.json. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .configs import QK_NORM_TYPES, head_size, kv_heads
from .units import BF16_BYTES

FP8_SCALE_BYTES = 4
"""An fp8 cache keeps one float32 scale per stored vector (one head, one token)."""
FORMATS = ("bf16", "fp8")


@dataclass(frozen=True)
class Shape:
    """One decoder's sizes and its attention design; see the module docstring."""

    name: str
    """What it is: a model's name, or the design (mha, gqa, mqa, mla, sliding)."""
    layers: int
    hidden: int
    heads: int
    """Query heads."""
    head_dim: int
    """Numbers per query, key and value head (MLA: per head, without the rotary part)."""
    intermediate: int
    vocab: int
    rope_theta: float
    eps: float
    kv_heads: int = 0
    """Key-value heads (0 for MLA)."""
    kv_lora_rank: int = 0
    """MLA: the width of the compressed latent."""
    rope_dim: int = 0
    """MLA: the numbers of each key that carry the position (rotated, shared by every head)."""
    window: int | None = None
    """Sliding window: the tokens a window layer keeps (the even layers)."""
    qk_norm: bool = False
    """Each query and key head is normalised before the rotation (Qwen3)."""
    tied: bool = False
    """The LM head is the embedding table."""

    @classmethod
    def of_config(cls, cfg: dict[str, Any], name: str | None = None) -> Shape:
        """The shape a published config.json describes (dense, full attention)."""
        return cls(
            name=name or str(cfg.get("model_type") or "model"),
            layers=cfg["num_hidden_layers"],
            hidden=cfg["hidden_size"],
            heads=cfg["num_attention_heads"],
            head_dim=head_size(cfg),
            intermediate=cfg["intermediate_size"],
            vocab=cfg["vocab_size"],
            rope_theta=float(
                cfg.get("rope_theta") or (cfg.get("rope_parameters") or {})["rope_theta"]
            ),
            eps=float(cfg["rms_norm_eps"]),
            kv_heads=kv_heads(cfg),
            qk_norm=cfg.get("model_type") in QK_NORM_TYPES,
            tied=bool(cfg.get("tie_word_embeddings")),
        )

    @property
    def kind(self) -> str:
        """MHA, GQA, MQA or MLA."""
        if self.kv_lora_rank:
            return "MLA"
        return "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def group(self) -> int:
        """Query heads per key-value head."""
        return self.heads // max(self.kv_heads, 1)

    def is_window_layer(self, layer: int) -> bool:
        """Sliding design: the even layers keep only the window, the odd ones every token."""
        return self.window is not None and layer % 2 == 0

    @property
    def window_layers(self) -> int:
        """Layers that keep only the window."""
        return sum(self.is_window_layer(i) for i in range(self.layers))

    def attention_params(self) -> int:
        """Numbers in one layer's attention weights (projections, and Qwen3's head norms)."""
        h, q, d = self.hidden, self.heads, self.head_dim
        if self.kv_lora_rank:
            r, rope = self.kv_lora_rank, self.rope_dim
            return q * (d + rope) * h + (r + rope) * h + r + q * (d + d) * r + h * q * d
        norms = 2 * d if self.qk_norm else 0
        return (q + 2 * self.kv_heads) * d * h + h * q * d + norms

    def weight_bytes(self) -> int:
        """Bytes of every weight in bf16, the embedding table (and an untied LM head) included."""
        per_layer = self.attention_params() + 3 * self.hidden * self.intermediate + 2 * self.hidden
        tables = (1 if self.tied else 2) * self.vocab * self.hidden
        return (self.layers * per_layer + tables + self.hidden) * BF16_BYTES

    def weight_bytes_read(self) -> int:
        """Bytes of weights one decode step reads: all but the embedding table, of which it reads
        one row (left out); a tied table is read whole, as the LM head."""
        return self.weight_bytes() - (0 if self.tied else self.vocab * self.hidden * BF16_BYTES)

    def layer_bytes(self, fmt: str = "bf16") -> int:
        """Bytes one layer keeps for one token: bf16, or fp8 numbers with a float32 scale per
        vector."""
        if fmt not in FORMATS:
            raise ValueError(f"cache format {fmt!r}: expected one of {', '.join(FORMATS)}")
        if self.kv_lora_rank:
            if fmt != "bf16":
                raise ValueError("the fp8 cache is written for designs without latents")
            return (self.kv_lora_rank + self.rope_dim) * BF16_BYTES
        per_vector = self.head_dim * (1 if fmt == "fp8" else BF16_BYTES)
        return 2 * self.kv_heads * (per_vector + (FP8_SCALE_BYTES if fmt == "fp8" else 0))

    def bytes_per_token(self, fmt: str = "bf16") -> int:
        """Bytes per token while the conversation is shorter than any window: every layer."""
        return self.layers * self.layer_bytes(fmt)

    def cache_bytes(self, tokens: int, fmt: str = "bf16") -> int:
        """The cache of one conversation of `tokens` tokens; window layers hold at most the
        window."""
        kept = min(tokens, self.window) if self.window else tokens
        full = self.layers - self.window_layers
        return (full * tokens + self.window_layers * kept) * self.layer_bytes(fmt)
