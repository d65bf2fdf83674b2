"""The lab's small engine: Qwen3 weights in the lab kit's compact decoder, and a prefill pass.

The weights are held once, in the layout of the kit's decoder (labkit/decoder.py): per layer q,
k and v as one matrix, gate and up as another. The prefill pass here runs a whole prompt through
those same weights and writes its keys and values into the decoder's cache, so decoding carries
on where the prompt ends.

The pass chunks its activations: each layer's matrix products, norms and rotary embedding run
on `chunk` tokens at a time, while attention sees the whole prompt at once (flash attention,
which never holds the n x n scores). The working memory then grows with the chunk, not with the
prompt. This is activation chunking, inside one pass over the layers; it is not the chunked
prefill of serving engines, which runs each chunk of a prompt through all the layers as a step
of its own, attending to the earlier chunks' keys and values in the cache.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any

import pdlab as pd
import torch
import torch.nn.functional as F
from labkit import device, memory
from labkit.checks import check
from labkit.decoder import Decoder
from labkit.kernels import rms_norm, rotate
from labkit.shapes import Shape
from labkit.units import byte_rate, flop_rate
from torch.nn.attention import SDPBackend, sdpa_kernel


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """The options steps 3 to 5 share: the kit's --device, --tiny and --weights; the GPU's
    figures (step 2's by default); --no-compile."""
    parser = device.arguments(doc, weights=True)
    parser.add_argument(
        "--peak", type=float, help="matrix-product peak, FLOP/s (default: step 2's)"
    )
    parser.add_argument("--bandwidth", type=float, help="memory bandwidth, B/s (default: step 2's)")
    parser.add_argument(
        "--no-compile", action="store_true", help="run the small operations unfused"
    )
    return parser


def begin(
    args: argparse.Namespace, *packages: str
) -> tuple[torch.device, memory.PeakMemory, float, float, str]:
    """The device (its line printed), the step's peak-memory counter, and the peak (FLOP/s) and
    bandwidth (B/s) to predict with, with where they came from (printed)."""
    dev = device.pick(args)
    peak_memory = memory.PeakMemory(dev)
    print(device.describe(dev, *packages))
    peak, bw, source = pd.limits(dev.type, args.tiny, args.peak, args.bandwidth)
    print(f"peak {flop_rate(peak)} and bandwidth {byte_rate(bw)}, {source}")
    return dev, peak_memory, peak, bw, source


def build(
    device: torch.device, tiny: bool, slots: int, compile_ops: bool, weights: str | None = None
) -> tuple[Decoder, dict[str, Any], str]:
    """The kit's decoder over Qwen3-8B weights and a cache of `slots` tokens; the config as a
    dict; and a phrase saying which weights these are. Random weights are made in the decoder's
    layout (never held twice); real ones are joined in place."""
    # The products go to cuBLAS, which picks the same kernels on every compile; the compiler's own
    # autotuned kernels were a little faster but a different draw from one compile to the next.
    options = {"fuse": compile_ops, "autotune": False}
    if weights:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16)
        model = model.to(device).eval()
        dec = Decoder.from_transformers(model, slots, **options)
        return dec, model.config.to_dict(), f"real weights from {weights}"
    cfg = pd.load_config(tiny=tiny)
    dec = Decoder.random(Shape.of_config(cfg, name=pd.MODEL), device, slots, **options)
    how = f"random bf16 weights of the shapes in models/{pd.MODEL}/config.json"
    return dec, cfg, how + (", shrunk (--tiny)" if tiny else "")


class Prefill:
    """A prompt's pass through the decoder's weights, its activations in chunks; see the module
    docstring."""

    def __init__(self, dec: Decoder, chunk: int, compile_ops: bool) -> None:
        self.dec, self.chunk, self.shape = dec, chunk, dec.shape
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
        d = self.shape
        qkv = (rms_norm(x, ln, d.eps) @ w.t()).view(x.shape[0], -1, d.head_dim)
        q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads], dim=1)
        if qn is not None:  # Qwen3 normalises each query and key head
            q, k = rms_norm(q, qn, d.eps), rms_norm(k, kn, d.eps)
        cos, sin = cos[:, None], sin[:, None]
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def _mlp(self, x, attn, wo, ln, wgu, wdown):  # type: ignore[no-untyped-def]
        """The rest of a layer for `x` [c, hidden]: attention's output product, then the MLP."""
        x = x + attn.reshape(x.shape[0], -1) @ wo.t()
        gate, up = (rms_norm(x, ln, self.shape.eps) @ wgu.t()).chunk(2, dim=-1)
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
        dec, d, n = self.dec, self.shape, ids.numel()
        check(n <= dec.slots, f"a prompt of {n:,} tokens is longer than the cache")
        w, spans = dec.w, self.spans(n)
        # the residual stream, chunk by chunk (index_select: no wait for the host, as a graph needs)
        xs = [w["embed"].index_select(0, ids[s:e]) for s, e in spans]
        for i, layer in enumerate(w["layers"]):
            keys, values = dec.cache[i, 0], dec.cache[i, 1]  # [kv heads, positions, d]
            queries = torch.empty(n, d.heads, d.head_dim, dtype=xs[0].dtype, device=xs[0].device)
            for (s, e), x in zip(spans, xs, strict=True):
                q, k, v = self.qkv(x, layer["ln1"], layer["qkv"], layer.get("qn"),
                                   layer.get("kn"), dec.cos[s:e], dec.sin[s:e])  # fmt: skip
                queries[s:e] = q
                keys[:, s:e] = k.transpose(0, 1)
                values[:, s:e] = v.transpose(0, 1)
            attn = self.attention(queries, keys[:, :n], values[:, :n])  # [heads, n, d]
            del queries  # not needed by the rest of the layer: its memory serves the MLP's chunks
            for j, (s, e) in enumerate(spans):
                xs[j] = self.mlp(xs[j], attn[:, s:e].transpose(0, 1), layer["o"], layer["ln2"],
                                 layer["gate_up"], layer["down"])  # fmt: skip
            del attn
        last = rms_norm(xs[-1][-1:], w["norm"], d.eps)
        return (last @ w["head"].t())[0]
