"""One decoder with Qwen3-8B's sizes and random bf16 weights, in five attention designs.

Every design shares the rest of the model (RMSNorm, a SwiGLU MLP, the embedding and the
output head); only what a layer keeps per token differs:

    mha, gqa, mqa  keys and values for 32, 8 or 1 key-value heads
    sliding        gqa, but the even layers keep only the last `window` tokens (a ring)
    mla            one latent per token: a 512-number compressed key-value plus the 64-number
                   rotary part of the key, shared by all heads. At decode the per-head key
                   up-projection is multiplied into the query and the value up-projection is
                   applied after attention, so attention runs over the latents directly.

`Decoder.step(pos)` decodes one token of one sequence. On a GPU the small element-wise
operations around each matrix product are fused by torch.compile, and `Decoder.graph(pos)`
records a whole step as a CUDA graph, replayed without Python. Attention reads only the
filled part of the cache. `reference_logits` computes the same model the plain way (every
key and value expanded, a causal mask), as a check on all of this.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from cachelab import Design, allocated
from torch.nn.attention import SDPBackend, sdpa_kernel

# Flash attention first: for a few queries against many keys it splits the keys across the
# GPU's processors; the others are fallbacks (the CPU, unusual shapes).
ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest float8 e4m3 number


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Qwen3 computes it: normalise in float32, round back, then scale."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, half-split layout."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def rope_tables(
    dim: int, positions: int, theta: float, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's angles, [positions, dim], in bf16."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, device=device).float() / dim)
    angles = torch.outer(torch.arange(positions, device=device).float(), inv).repeat(1, 2)
    return angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)


def quantise(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float8 e4m3 numbers and one float32 scale per vector (last dimension)."""
    scale = kv.float().abs().amax(-1).clamp(min=1e-12) / FP8_MAX
    return (kv.float() / scale[..., None]).to(FP8), scale


def dequantise(kv8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """bf16 numbers back from float8 numbers and their scales."""
    return (kv8.float() * scale[..., None]).to(torch.bfloat16)


# --- weights -------------------------------------------------------------------------------


def build_weights(d: Design, device: Any, seed: int = 0) -> dict[str, Any]:
    """Random bf16 weights of the design's shapes, scaled so activations stay near 1."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def rand(*shape: int, std: float) -> torch.Tensor:
        w = torch.randn(*shape, generator=gen, device=device, dtype=torch.bfloat16)
        return w.mul_(std)

    def ones(n: int) -> torch.Tensor:
        return 1 + rand(n, std=0.05)

    h, q, hd, inter = d.hidden, d.heads, d.head_dim, d.intermediate
    layers = []
    for _ in range(d.layers):
        w: dict[str, torch.Tensor] = {
            "ln1": ones(h),
            "ln2": ones(h),
            "gate_up": rand(2 * inter, h, std=h**-0.5),
            "down": rand(h, inter, std=inter**-0.5),
        }
        if d.name == "mla":
            r, rope = d.kv_lora_rank, d.rope_dim
            w["q"] = rand(q * (hd + rope), h, std=h**-0.5)
            w["kv_a"] = rand(r + rope, h, std=h**-0.5)
            w["kv_norm"] = ones(r)
            # the up-projection of the latent: per head, hd rows for the key and hd for the value
            w["kv_b"] = rand(q, 2 * hd, r, std=r**-0.5)
            w["o"] = rand(h, q * hd, std=(q * hd) ** -0.5)
        else:
            w["qkv"] = rand((q + 2 * d.kv_heads) * hd, h, std=h**-0.5)
            w["o"] = rand(h, q * hd, std=(q * hd) ** -0.5)
        layers.append(w)
    return {
        "layers": layers,
        "embed": rand(d.vocab, h, std=1.0),
        "norm": ones(h),
        "head": rand(d.vocab, h, std=h**-0.5),
    }


def weight_nbytes(weights: dict[str, Any]) -> int:
    """Bytes of every weight tensor, the embedding table included."""
    tensors = [t for layer in weights["layers"] for t in layer.values()]
    return sum(t.nbytes for t in tensors + [weights["embed"], weights["norm"], weights["head"]])


# --- the decoder ---------------------------------------------------------------------------

_SIDE_STREAMS: dict[Any, Any] = {}


def side_stream(device: torch.device) -> torch.cuda.Stream:
    """The one stream, per GPU, on which every decoder warms up and records its CUDA graphs.

    cuBLAS gives every stream it runs on a workspace of its own (32 MiB on an H100 or H200), taken
    from PyTorch's allocator and kept until cleared. A new stream for each graph left one more
    workspace allocated per graph, and each design's peak counted those of the designs before it.
    """
    if device not in _SIDE_STREAMS:
        _SIDE_STREAMS[device] = torch.cuda.Stream(device)
    return _SIDE_STREAMS[device]


class Decoder:
    """Decode steps of one sequence over a cache of `slots` positions; see the module docstring.

    cache: "bf16", or "fp8" (standard designs without windows): float8 e4m3 numbers with one
    float32 scale per head and token, quantised on write and dequantised on read.
    """

    def __init__(
        self, d: Design, weights: dict[str, Any], slots: int, fuse: bool, cache: str = "bf16"
    ) -> None:
        self.d, self.w, self.slots, self.fmt = d, weights, slots, cache
        self.device = weights["embed"].device
        dev, bf16 = self.device, torch.bfloat16
        self.group = d.heads // max(d.kv_heads, 1)
        if cache == "fp8" and (d.name == "mla" or d.window):
            raise ValueError("the fp8 cache is written for designs without latents or windows")
        # Where each layer keeps its keys and values: (tensor, index). One tensor per kind of
        # layer, so the allocator hands out exactly the bytes the formula says.
        self.where: list[tuple[str, int]] = []
        full = [i for i in range(d.layers) if not d.is_window_layer(i)]
        local = [i for i in range(d.layers) if d.is_window_layer(i)]
        for i in range(d.layers):
            self.where.append(("local", local.index(i)) if i in local else ("full", full.index(i)))
        rope_dim = d.rope_dim if d.name == "mla" else d.head_dim
        self.cos, self.sin = rope_tables(rope_dim, slots, d.rope_theta, dev)
        self.token = torch.zeros(1, dtype=torch.long, device=dev)
        before = allocated(dev)
        self.store: dict[str, torch.Tensor] = {}
        if d.name == "mla":
            self.store["full"] = torch.empty(
                d.layers, slots, d.kv_lora_rank + d.rope_dim, dtype=bf16, device=dev
            )
        elif cache == "fp8":
            self.store["full"] = torch.empty(
                len(full), 2, d.kv_heads, slots, d.head_dim, dtype=FP8, device=dev
            )
            self.store["scale"] = torch.empty(
                len(full), 2, d.kv_heads, slots, dtype=torch.float32, device=dev
            )
        else:
            self.store["full"] = torch.empty(
                len(full), 2, d.kv_heads, slots, d.head_dim, dtype=bf16, device=dev
            )
            if local:
                self.store["local"] = torch.empty(
                    len(local), 2, d.kv_heads, d.window, d.head_dim, dtype=bf16, device=dev
                )
        # what the allocator handed out for the cache (no counter on the CPU: the tensors' sizes)
        self.cache_reserved = allocated(dev) - before if dev.type == "cuda" else self.cache_nbytes()
        compile_ops = fuse and dev.type == "cuda"
        if compile_ops:  # every decoder of a run compiles the same methods again for itself
            config = torch._dynamo.config
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(config, name):
                    setattr(config, name, max(getattr(config, name), 64))
        static: Callable[[Any], Any] = (
            (lambda f: torch.compile(f, fullgraph=True, dynamic=False))
            if compile_ops
            else (lambda f: f)
        )
        self.attn_in = static(self._mla_in if d.name == "mla" else self._attn_in)
        self.mla_out = static(self._mla_out)
        self.out_mlp = static(self._out_mlp)
        self.final = static(self._final)
        # the filled part of an fp8 cache grows with the position: one kernel for any length
        self.dequantise = torch.compile(dequantise, dynamic=True) if compile_ops else dequantise

    def cache_nbytes(self) -> int:
        """Bytes of every cache tensor."""
        return sum(t.nbytes for t in self.store.values())

    def fill_random(self) -> None:
        """Fill the whole cache with random numbers, so timed steps never run on zeros."""
        for name, t in self.store.items():
            if name == "scale":
                t.fill_(1.0)
            else:
                for part in t:  # one layer at a time: a small bf16 temporary
                    part.copy_(torch.randn(part.shape, dtype=torch.bfloat16, device=self.device))

    # The fused pieces. Their shapes never depend on the position, so each compiles once.

    def _attn_in(self, x, ln, w, cos, sin):  # type: ignore[no-untyped-def]
        d = self.d
        qkv = (rms_norm(x, ln, d.eps) @ w.t()).view(-1, d.head_dim)
        q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads])
        kv = torch.stack((rotate(k, cos, sin), v))  # this token's key and value
        q = rotate(q, cos, sin).view(1, d.kv_heads, self.group, d.head_dim)
        if self.fmt == "fp8":
            return (q, *quantise(kv))
        return q, kv

    def _mla_in(self, x, ln, wq, wkva, kv_norm, kv_b, cos, sin):  # type: ignore[no-untyped-def]
        d = self.d
        h = rms_norm(x, ln, d.eps)
        q = (h @ wq.t()).view(d.heads, d.head_dim + d.rope_dim)
        q_nope, q_rope = q.split([d.head_dim, d.rope_dim], dim=-1)
        latent, k_rope = (h @ wkva.t()).view(-1).split([d.kv_lora_rank, d.rope_dim])
        row = torch.cat((rms_norm(latent, kv_norm, d.eps), rotate(k_rope, cos, sin)))
        # absorb the key up-projection into the query: q_nope . (W_uk c) = (q_nope W_uk) . c
        q_latent = torch.bmm(q_nope.unsqueeze(1), kv_b[:, : d.head_dim]).squeeze(1)
        return torch.cat((q_latent, rotate(q_rope, cos, sin)), dim=-1), row

    def _mla_out(self, o_latent, kv_b):  # type: ignore[no-untyped-def]
        # the value up-projection, applied once to the attention output instead of to every value
        d = self.d
        return torch.bmm(o_latent.unsqueeze(1), kv_b[:, d.head_dim :].transpose(1, 2)).reshape(
            1, -1
        )

    def _out_mlp(self, x, attn, wo, ln, wgu, wdown):  # type: ignore[no-untyped-def]
        x = x + attn @ wo.t()
        gate, up = (rms_norm(x, ln, self.d.eps) @ wgu.t()).chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ wdown.t()

    def _final(self, x, norm, head):  # type: ignore[no-untyped-def]
        return rms_norm(x, norm, self.d.eps) @ head.t()

    def attend(self, i: int, w: dict[str, torch.Tensor], x: torch.Tensor, pos: int) -> torch.Tensor:
        """Write layer i's key and value (or latent) for `pos`, attend over the filled part."""
        d, (kind, j) = self.d, self.where[i]
        cos, sin = self.cos[pos], self.sin[pos]
        if d.name == "mla":
            q, row = self.attn_in(x, w["ln1"], w["q"], w["kv_a"], w["kv_norm"], w["kv_b"], cos, sin)
            cache = self.store["full"][j]
            cache[pos].copy_(row)
            filled = cache[: pos + 1]
            # one query per head, in latent space, against every token's 576-number latent
            scores = (q @ filled.t()).float() * (d.head_dim + d.rope_dim) ** -0.5
            probs = torch.softmax(scores, dim=-1).to(torch.bfloat16)
            return self.mla_out(probs @ filled[:, : d.kv_lora_rank], w["kv_b"])
        out = self.attn_in(x, w["ln1"], w["qkv"], cos, sin)
        cache = self.store[kind][j]
        if kind == "local":  # a ring of `window` slots: the oldest token is overwritten
            slot, n = pos % d.window, min(pos + 1, d.window)
        else:
            slot, n = pos, pos + 1
        if self.fmt == "fp8":
            q, kv8, scale = out
            cache[:, :, slot].copy_(kv8)
            self.store["scale"][j][:, :, slot].copy_(scale)
            kv = self.dequantise(cache[:, :, :n], self.store["scale"][j][:, :, :n])
        else:
            q, new = out
            cache[:, :, slot].copy_(new)
            kv = cache[:, :, :n]
        # The query heads that share a key-value head sit in the query-length slot: one plain
        # attention per key-value head, no mask (every cached token is in the past), no copies.
        with sdpa_kernel(ATTENTION):
            attn = F.scaled_dot_product_attention(q, kv[0][None], kv[1][None])
        return attn.reshape(1, -1)

    def step(self, pos: int) -> torch.Tensor:
        """Decode the token in self.token at `pos`; write the greedy next token back; logits."""
        x = self.w["embed"][self.token]
        for i, w in enumerate(self.w["layers"]):
            x = self.out_mlp(
                x, self.attend(i, w, x, pos), w["o"], w["ln2"], w["gate_up"], w["down"]
            )
        logits = self.final(x, self.w["norm"], self.w["head"])
        self.token.copy_(logits.argmax(-1))
        return logits

    def graph(self, pos: int) -> Callable[[], Any]:
        """A function that runs one decode step at `pos`: a CUDA graph replay, or eager on the CPU."""
        if self.device.type != "cuda":
            return lambda: self.step(pos)
        stream = side_stream(self.device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm up (the first call compiles) before recording
                self.step(pos)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # recorded on the stream that warmed up: its cuBLAS workspace exists already, outside the
        # graph's private memory, and no third stream gets one
        with torch.cuda.graph(graph, stream=stream):
            self.step(pos)
        return graph.replay

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Run a whole prompt at once, writing its keys and values; logits of its last token.

        For the designs without windows or latents (the fp8 step needs it). Attention inside
        the prompt uses the fresh bf16 keys and values, as serving engines do; the cache keeps
        them in its own format.
        """
        d = self.d
        if d.name == "mla" or d.window:
            raise ValueError("prefill is written for designs without latents or windows")
        t = tokens.shape[0]
        x = self.w["embed"][tokens]
        cos, sin = self.cos[:t, None], self.sin[:t, None]
        for i, w in enumerate(self.w["layers"]):
            qkv = (rms_norm(x, w["ln1"], d.eps) @ w["qkv"].t()).view(t, -1, d.head_dim)
            q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads], dim=1)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            kv = torch.stack((k, v)).transpose(1, 2)  # [2, kv heads, t, head size]
            j = self.where[i][1]
            if self.fmt == "fp8":
                kv8, scale = quantise(kv)
                self.store["full"][j][:, :, :t].copy_(kv8)
                self.store["scale"][j][:, :, :t].copy_(scale)
            else:
                self.store["full"][j][:, :, :t].copy_(kv)
            keys, values = (kv[n].repeat_interleave(self.group, dim=0)[None] for n in (0, 1))
            attn = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], keys, values, is_causal=True
            )
            x = self._out_mlp(
                x, attn[0].transpose(0, 1).reshape(t, -1), w["o"], w["ln2"], w["gate_up"], w["down"]
            )
        logits = self._final(x[-1:], self.w["norm"], self.w["head"])
        self.token.copy_(logits.argmax(-1))
        return logits


# --- the plain way, as a check -------------------------------------------------------------


def reference_logits(
    d: Design, weights: dict[str, Any], tokens: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """Logits of the last token, computed in `dtype` the textbook way: causal (and window) mask,
    every head's keys and values expanded; for MLA the latent is up-projected, not absorbed."""
    t, dev = tokens.shape[0], tokens.device
    rope_dim = d.rope_dim if d.name == "mla" else d.head_dim
    cos, sin = (c[:, None].to(dtype) for c in rope_tables(rope_dim, t, d.rope_theta, dev))

    def norm(x: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return wt.to(dtype) * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + d.eps)).to(dtype)

    def mm(x: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        return x @ wt.to(dtype).t()

    pos = torch.arange(t, device=dev)
    x = weights["embed"][tokens].to(dtype)
    for i, w in enumerate(weights["layers"]):
        h = norm(x, w["ln1"])
        if d.name == "mla":
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
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            group = d.heads // d.kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            scale = d.head_dim**-0.5
        # query i sees key j when j <= i, and, in a window layer, when i - j < window
        visible = pos[None, :] <= pos[:, None]
        if d.is_window_layer(i):
            visible &= pos[:, None] - pos[None, :] < d.window
        scores = torch.einsum("thd,shd->hts", q.float(), k.float()) * scale
        probs = torch.softmax(scores.masked_fill(~visible, -math.inf), dim=-1).to(dtype)
        attn = torch.einsum("hts,shd->thd", probs, v).reshape(t, -1)
        x = x + mm(attn, w["o"])
        gate, up_ = mm(norm(x, w["ln2"]), w["gate_up"]).chunk(2, dim=-1)
        x = x + mm(F.silu(gate) * up_, w["down"])
    return mm(norm(x[-1:], weights["norm"]), weights["head"])[0].float()


def decode_tokens(dec: Decoder, tokens: torch.Tensor) -> torch.Tensor:
    """Feed the tokens one decode step at a time from an empty cache; logits of the last."""
    logits = torch.empty(0)
    for pos in range(tokens.shape[0]):
        dec.token.copy_(tokens[pos : pos + 1])
        logits = dec.step(pos)
    return logits[0].float()


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want||."""
    return float((got - want).norm() / want.norm())
