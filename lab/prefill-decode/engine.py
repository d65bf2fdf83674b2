"""The lab's small engine: Qwen3 weights, lesson 2.4's compact decoder, and a prefill pass.

The weights are held once, in the layout of lesson 2.4's decoder (decoder.py, from the lab of
"The KV cache"): per layer q, k and v as one matrix, gate and up as another. The prefill pass
here runs a whole prompt through those same weights and writes its keys and values into the
decoder's cache, so decoding carries on where the prompt ends.

Prefill works on chunks of tokens: each layer's matrix products, norms and rotary embedding
run on `chunk` tokens at a time, while attention sees the whole prompt at once (flash attention,
which never holds the n x n scores). The working memory then grows with the chunk, not with the
prompt: serving engines call this chunked prefill.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace as Namespace
from typing import Any

import pdlab as pd
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    from decoder import Decoder, rms_norm, rotate
except ModuleNotFoundError as missing:
    if missing.name != "decoder":
        raise
    pd.check(
        False,
        "decoder.py is missing: it is lesson 2.4's compact decoder"
        " (lab/kv-cache/decoder.py in the course); put a copy beside this file",
    )


def random_source(cfg: dict[str, Any], device: torch.device, seed: int = 0) -> Namespace:
    """A Qwen3 with random bf16 weights of the config's shapes, named as transformers names them.

    Each layer is made only when the decoder asks for it; the decoder fuses its matrices into new
    tensors and the unfused ones are gone before the next layer is made, so the weights are never
    held twice (on a 24 GB card they could not be).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    std = cfg.get("initializer_range", 0.02)

    def normal(shape: tuple[int, int]) -> Namespace:
        w = torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0, std, generator=gen)
        return Namespace(weight=w)

    def ones(n: int) -> Namespace:
        return Namespace(weight=torch.ones(n, dtype=torch.bfloat16, device=device))

    h, d, m = cfg["hidden_size"], pd.head_size(cfg), pd.layer_matrices(cfg)

    def layers() -> Iterator[Namespace]:
        for _ in range(cfg["num_hidden_layers"]):
            yield Namespace(
                input_layernorm=ones(h),
                self_attn=Namespace(
                    q_proj=normal(m["q"]),
                    k_proj=normal(m["k"]),
                    v_proj=normal(m["v"]),
                    o_proj=normal(m["o"]),
                    q_norm=ones(d),
                    k_norm=ones(d),
                ),
                post_attention_layernorm=ones(h),
                mlp=Namespace(
                    gate_proj=normal(m["gate"]),
                    up_proj=normal(m["up"]),
                    down_proj=normal(m["down"]),
                ),
            )

    embed = normal((cfg["vocab_size"], h))
    head = embed if cfg.get("tie_word_embeddings") else normal((cfg["vocab_size"], h))
    model = Namespace(embed_tokens=embed, norm=ones(h), layers=layers())
    return Namespace(config=Namespace(**cfg), model=model, lm_head=head)


def pretrained_source(name: str, device: torch.device) -> tuple[Namespace, dict[str, Any]]:
    """Real weights through transformers (a Hub name or a local folder), handed to the decoder
    layer by layer: each layer's unfused q, k, v, gate and up are freed once it has fused them."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16).to(device).eval()

    def layers() -> Iterator[Any]:
        for layer in model.model.layers:
            yield layer
            a, f = layer.self_attn, layer.mlp
            for linear in (a.q_proj, a.k_proj, a.v_proj, f.gate_proj, f.up_proj):
                del linear.weight

    source = Namespace(
        config=model.config,
        lm_head=model.lm_head,
        model=Namespace(
            embed_tokens=model.model.embed_tokens, norm=model.model.norm, layers=layers()
        ),
    )
    return source, model.config.to_dict()


def build(
    device: torch.device, tiny: bool, max_tokens: int, compile_ops: bool, weights: str | None = None
) -> tuple[Decoder, dict[str, Any], str]:
    """Lesson 2.4's decoder over Qwen3-8B weights and a cache of `max_tokens` tokens; the config
    as a dict; and a phrase saying which weights these are."""
    if weights:
        source, cfg = pretrained_source(weights, device)
        how = f"real weights from {weights}"
    else:
        cfg = pd.tiny_config(pd.load_config()) if tiny else pd.load_config()
        source = random_source(cfg, device)
        how = f"random bf16 weights of the shapes in models/{pd.MODEL}/config.json"
        how += ", shrunk (--tiny)" if tiny else ""
    return Decoder(source, max_tokens, compile_ops), cfg, how


class Prefill:
    """A prompt's pass through the decoder's weights, chunk by chunk; see the module docstring."""

    def __init__(self, dec: Decoder, chunk: int, compile_ops: bool) -> None:
        self.dec, self.chunk = dec, chunk
        self.cuda = dec.cache.device.type == "cuda"
        # One compiled graph for any number of tokens (dynamic shapes): the norms, the rotary
        # embedding and the activation fuse into a few kernels around each matrix product.
        fuse: Callable[[Any], Any] = (
            (lambda f: torch.compile(f, dynamic=True, fullgraph=True))
            if compile_ops
            else (lambda f: f)
        )
        self.qkv, self.mlp = fuse(self._qkv), fuse(self._mlp)

    def _qkv(self, x, ln, w, qn, kn, cos, sin):  # type: ignore[no-untyped-def]
        """Queries, keys and values of `x` [c, hidden]: normed, multiplied, normed per head, rotated."""
        d = self.dec
        qkv = (rms_norm(x, ln, d.eps) @ w.t()).view(x.shape[0], -1, d.head_dim)
        q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads], dim=1)
        cos, sin = cos[:, None], sin[:, None]
        return rotate(rms_norm(q, qn, d.eps), cos, sin), rotate(rms_norm(k, kn, d.eps), cos, sin), v

    def _mlp(self, x, attn, wo, ln, wgu, wdown):  # type: ignore[no-untyped-def]
        """The rest of a layer for `x` [c, hidden]: attention's output product, then the MLP."""
        x = x + attn.reshape(x.shape[0], -1) @ wo.t()
        gate, up = (rms_norm(x, ln, self.dec.eps) @ wgu.t()).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ wdown.t()

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of every query [n, heads, d] over keys and values [kv heads, n, d]."""
        # On the GPU, flash attention only: it takes grouped kv heads as they are and never holds
        # the n x n scores (the math fallback would need 128 GiB of them at 32,768 tokens).
        only_flash = (
            sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if self.cuda else contextlib.nullcontext()
        )
        with only_flash:
            out = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], k[None], v[None], is_causal=True, enable_gqa=True
            )
        return out[0]

    def spans(self, n: int) -> list[tuple[int, int]]:
        """The chunks of a prompt of n tokens: [start, end) pairs."""
        return [(s, min(n, s + self.chunk)) for s in range(0, n, self.chunk)]

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """The prompt `ids` [n] through every layer, its keys and values written into the decoder's
        cache at positions 0..n-1; returns the logits of the last position [vocab]."""
        d, n = self.dec, ids.numel()
        pd.check(n <= d.cache.shape[3], f"a prompt of {n:,} tokens is longer than the cache")
        spans = self.spans(n)
        xs = [d.embed[ids[s:e]] for s, e in spans]  # the residual stream, chunk by chunk
        for i, w in enumerate(d.layers):
            keys, values = d.cache[i, 0], d.cache[i, 1]  # [kv heads, positions, d]
            queries = torch.empty(
                n, d.heads, d.head_dim, dtype=d.embed.dtype, device=d.embed.device
            )
            for (s, e), x in zip(spans, xs):
                q, k, v = self.qkv(x, w["ln1"], w["qkv"], w["qn"], w["kn"], d.cos[s:e], d.sin[s:e])
                queries[s:e] = q
                keys[:, s:e] = k.transpose(0, 1)
                values[:, s:e] = v.transpose(0, 1)
            attn = self.attention(queries, keys[:, :n], values[:, :n])  # [heads, n, d]
            del queries  # not needed by the rest of the layer: its memory serves the MLP's chunks
            for j, (s, e) in enumerate(spans):
                xs[j] = self.mlp(
                    xs[j], attn[:, s:e].transpose(0, 1), w["o"], w["ln2"], w["gu"], w["down"]
                )
            del attn
        last = rms_norm(xs[-1][-1:], d.norm, d.eps)
        return (last @ d.lm_head.t())[0]
