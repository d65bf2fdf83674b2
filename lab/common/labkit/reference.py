"""The textbook model the compact decoder is checked against, and the check's arithmetic.

`reference_logits` computes a whole prompt the plain way, in any dtype: a causal mask (and the
window's, on window layers), every key and value expanded to every query head, MLA's latent
up-projected rather than absorbed. `decode_tokens` feeds the same tokens through the decoder one
step at a time. Compare them with `relative_error`; run in float32, the reference is the truth,
and a decoder in bf16 should be off by about what the reference run in bf16 is. Needs PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .decoder import Decoder, Weights
from .kernels import rope_tables, rotate
from .shapes import Shape


def reference_logits(
    shape: Shape, weights: Weights, tokens: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Logits of the last of `tokens` [n], computed in `dtype` the textbook way (float32 out)."""
    d, t, dev = shape, tokens.shape[0], tokens.device
    rope_dim = d.rope_dim if d.kv_lora_rank else d.head_dim
    cos, sin = (c[:, None] for c in rope_tables(rope_dim, t, d.rope_theta, dev, dtype))

    def norm(x: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return wt.to(dtype) * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + d.eps)).to(dtype)

    def mm(x: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        return x @ wt.to(dtype).t()

    pos = torch.arange(t, device=dev)
    x = weights["embed"][tokens].to(dtype)
    for i, w in enumerate(weights["layers"]):
        h = norm(x, w["ln1"])
        if d.kv_lora_rank:
            q = mm(h, w["q"]).view(t, d.heads, -1)
            q = torch.cat((q[..., : d.head_dim], rotate(q[..., d.head_dim :], cos, sin)), dim=-1)
            latent, k_rope = mm(h, w["kv_a"]).split([d.kv_lora_rank, d.rope_dim], dim=-1)
            up = torch.einsum("tr,hnr->thn", norm(latent, w["kv_norm"]), w["kv_b"].to(dtype))
            k_rope = rotate(k_rope[:, None], cos, sin).expand(t, d.heads, d.rope_dim)
            k = torch.cat((up[..., : d.head_dim], k_rope), dim=-1)
            v = up[..., d.head_dim :]
            scale = (d.head_dim + d.rope_dim) ** -0.5
        else:
            q, k, v = (
                mm(h, w["qkv"])
                .view(t, -1, d.head_dim)
                .split([d.heads, d.kv_heads, d.kv_heads], dim=1)
            )
            if d.qk_norm:
                q, k = norm(q, w["qn"]), norm(k, w["kn"])
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k, v = k.repeat_interleave(d.group, dim=1), v.repeat_interleave(d.group, dim=1)
            scale = d.head_dim**-0.5
        # query i sees key j when j <= i, and, in a window layer, when i - j < window
        visible = pos[None, :] <= pos[:, None]
        if d.is_window_layer(i):
            assert d.window is not None
            visible &= pos[:, None] - pos[None, :] < d.window
        scores = torch.einsum("thd,shd->hts", q.float(), k.float()) * scale
        probs = torch.softmax(scores.masked_fill(~visible, -math.inf), dim=-1).to(dtype)
        attn = torch.einsum("hts,shd->thd", probs, v).reshape(t, -1)
        x = x + mm(attn, w["o"])
        gate, up_ = mm(norm(x, w["ln2"]), w["gate_up"]).chunk(2, dim=-1)
        x = x + mm(F.silu(gate) * up_, w["down"])
    return mm(norm(x[-1:], weights["norm"]), weights["head"])[0].float()


def decode_tokens(dec: Decoder, tokens: torch.Tensor) -> torch.Tensor:
    """Feed the tokens one decode step at a time from an empty cache; logits of the last
    (float32)."""
    logits: Any = None
    # no torch.no_grad(): a compiled decoder would compile again for its graphs, which run with
    # gradients on (no weight requires them)
    for pos in range(tokens.shape[0]):
        dec.token.copy_(tokens[pos : pos + 1])
        logits = dec.step(pos)
    return logits[0].float()


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want||, over a whole vector of logits."""
    return float((got.float() - want.float()).norm() / want.float().norm())
