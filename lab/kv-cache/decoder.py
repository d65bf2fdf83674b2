"""A compact Qwen3 decoder for one sequence, built on the weights of a transformers model.

It computes what transformers' Qwen3 computes for one new token, arranged for speed:
q, k and v are one matrix and gate and up another (fewer, larger matrix-vector products),
each product split into as many slices as runs fastest on this GPU;
torch.compile fuses the small element-wise steps (norms, rotary embedding, residual adds) and
picks, by timing, the fastest kernel for each matrix-vector product; and a whole decode step is recorded once as a CUDA graph and replayed, so
no Python runs and no kernel is launched one by one. Attention reads only the filled part
of the cache: positions 0..pos, never the whole buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# Flash attention first: for a few queries against many keys it splits the keys across the
# GPU's processors (split-KV); the other kernels give each head to a single processor.
ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3's RMSNorm: normalise in float32, round back, then scale."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, in the half-split layout transformers uses."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@torch.library.custom_op("kvlab::split_matvec", mutates_args=())
def split_matvec(x: torch.Tensor, w: torch.Tensor, splits: int) -> torch.Tensor:
    """Partial products of x [1, K] and w [N, K] over `splits` slices of K: [splits, N].

    cuBLAS runs a matrix-vector product with few outputs (N = 4,096) on too few processors;
    cutting K into slices gives it `splits` times more independent work. An opaque op, so
    the compiler neither rewrites it nor copies the weight.
    """
    n, k = w.shape
    parts = torch.bmm(
        x.reshape(splits, 1, k // splits), w.view(n, splits, k // splits).permute(1, 2, 0)
    )
    return parts.view(splits, n)


@split_matvec.register_fake
def _(x: torch.Tensor, w: torch.Tensor, splits: int) -> torch.Tensor:
    return x.new_empty(splits, w.shape[0])


def matvec(x: torch.Tensor, w: torch.Tensor, splits: int) -> torch.Tensor:
    """x [1, K] times w [N, K] transposed; with splits > 1 the slices are summed in float32."""
    if splits == 1:
        return x @ w.t()
    return split_matvec(x, w, splits).float().sum(0, keepdim=True).to(x.dtype)


def fastest_splits(weights: list[torch.Tensor]) -> int:
    """Time one matrix-vector product for 1, 2, 4, 8 and 16 slices; return the fastest.

    The product rotates over several layers' matrices, so the L2 cache does not flatter it.
    """
    if weights[0].device.type != "cuda":
        return 1
    x = torch.randn(1, weights[0].shape[1], dtype=weights[0].dtype, device=weights[0].device)
    times = {}
    for splits in (1, 2, 4, 8, 16):
        run = [
            lambda w=w, s=splits: (x @ w.t()) if s == 1 else split_matvec(x, w, s)
            for w in weights[:4]
        ]
        for f in run * 2:
            f()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for f in run * 20:
            f()
        end.record()
        end.synchronize()
        times[splits] = start.elapsed_time(end)
    return min(times, key=lambda k: times[k])


@torch.no_grad()
def joined(linears: list[Any]) -> torch.Tensor:
    """The weights of several linear layers stacked into one matrix, for one larger product.

    The layers' own weights then become views of that matrix, so the model keeps working (its
    eager speed is measured too) and the weights are held once, not twice: Qwen3-8B's q, k, v,
    gate and up matrices alone take 8.4 GiB.
    """
    whole = torch.cat([lin.weight for lin in linears])
    for lin, part in zip(linears, whole.split([lin.weight.shape[0] for lin in linears])):
        lin.weight.data = part
    return whole


class Decoder:
    """One-sequence decode steps over a cache of `max_tokens` positions; see the module docstring."""

    def __init__(self, model: Any, max_tokens: int, compile_ops: bool) -> None:
        c, m = model.config, model.model
        self.heads, self.kv_heads, self.eps = (
            c.num_attention_heads,
            c.num_key_value_heads,
            c.rms_norm_eps,
        )
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        theta = getattr(c, "rope_theta", None) or c.rope_parameters["rope_theta"]
        self.embed, self.norm = m.embed_tokens.weight.detach(), m.norm.weight.detach()
        self.lm_head = model.lm_head.weight.detach()
        self.layers = []
        for layer in m.layers:
            a, f = layer.self_attn, layer.mlp
            self.layers.append(
                {
                    "ln1": layer.input_layernorm.weight.detach(),
                    "qkv": joined([a.q_proj, a.k_proj, a.v_proj]),
                    "qn": a.q_norm.weight.detach(),
                    "kn": a.k_norm.weight.detach(),
                    "o": a.o_proj.weight.detach(),
                    "ln2": layer.post_attention_layernorm.weight.detach(),
                    "gu": joined([f.gate_proj, f.up_proj]),
                    "down": f.down_proj.weight.detach(),
                }
            )
            if self.embed.device.type == "cuda":
                # Hand the layer's old matrices back to the GPU: the joined ones are larger and
                # cannot reuse their blocks, which PyTorch would otherwise keep reserved (6.8 GiB
                # over Qwen3-8B's 36 layers).
                torch.cuda.empty_cache()
        dev, dtype = self.embed.device, self.embed.dtype
        self.stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None  # for warm-ups
        # For each kind of matrix, the number of K slices that runs fastest on this GPU.
        self.splits = {
            role: fastest_splits([w[role] for w in self.layers])
            for role in ("qkv", "o", "gu", "down")
        }
        self.splits["head"] = fastest_splits([self.lm_head])
        # max-autotune lets the compiler time its own matrix-vector kernels against cuBLAS and keep
        # the faster one for each weight shape (on an H200: about 10 % more bytes per second)
        fuse: Callable[[Any], Any] = (
            (
                lambda f: torch.compile(
                    f, fullgraph=True, dynamic=False, mode="max-autotune-no-cudagraphs"
                )
            )
            if compile_ops
            else (lambda f: f)
        )
        self.attn_in, self.attn_out_mlp = fuse(self._attn_in), fuse(self._attn_out_mlp)
        self.final = fuse(
            lambda x, w_norm, w_head: matvec(
                rms_norm(x, w_norm, self.eps), w_head, self.splits["head"]
            )
        )
        if compile_ops:
            # Compile the LM head's product now, before the cache takes its memory: to pick a
            # kernel the compiler times each candidate on its own copy of the weight (1.16 GiB
            # for Qwen3-8B). Later calls have the same shapes and reuse the compiled code.
            self.final(
                torch.zeros(1, self.norm.shape[0], dtype=dtype, device=dev), self.norm, self.lm_head
            )
            torch.cuda.empty_cache()  # and that copy's memory goes back to the GPU

        # layer, key/value, kv head, position, number: random, so no timing runs on zeros
        self.cache = torch.randn(
            len(self.layers), 2, self.kv_heads, max_tokens, self.head_dim, dtype=dtype, device=dev
        )
        inv = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, device=dev).float() / self.head_dim)
        angles = torch.outer(torch.arange(max_tokens, device=dev).float(), inv).repeat(1, 2)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self.token = torch.zeros(1, dtype=torch.long, device=dev)

    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads (of the embedding table, one row: left out)."""
        tensors = [t for layer in self.layers for t in layer.values()] + [self.norm, self.lm_head]
        return sum(t.nbytes for t in tensors)

    def _attn_in(self, x, ln, w, qn, kn, cos, sin, slot):  # type: ignore[no-untyped-def]
        qkv = matvec(rms_norm(x, ln, self.eps), w, self.splits["qkv"]).view(-1, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads])
        q, k = (
            rotate(rms_norm(q, qn, self.eps), cos, sin),
            rotate(rms_norm(k, kn, self.eps), cos, sin),
        )
        slot.copy_(torch.stack((k, v)))  # this token's key and value, written into the cache
        return q.view(1, self.kv_heads, -1, self.head_dim)

    def _attn_out_mlp(self, x, attn, wo, ln, wgu, wdown):  # type: ignore[no-untyped-def]
        x = x + matvec(attn.reshape(1, -1), wo, self.splits["o"])
        gate, up = matvec(rms_norm(x, ln, self.eps), wgu, self.splits["gu"]).chunk(2, dim=-1)
        return x + matvec(F.silu(gate) * up, wdown, self.splits["down"])

    def step(self, pos: int) -> torch.Tensor:
        """Decode the token in self.token at position `pos`; write the next (greedy) token back."""
        x = self.embed[self.token]
        cos, sin = self.cos[pos], self.sin[pos]
        for i, w in enumerate(self.layers):
            q = self.attn_in(
                x, w["ln1"], w["qkv"], w["qn"], w["kn"], cos, sin, self.cache[i, :, :, pos]
            )
            # The query heads that share a kv head sit in the query-length slot: one plain
            # attention per kv head over positions 0..pos, with no mask and no copy of k or v.
            keys, values = self.cache[i, 0, :, : pos + 1], self.cache[i, 1, :, : pos + 1]
            with sdpa_kernel(ATTENTION):
                attn = F.scaled_dot_product_attention(q, keys[None], values[None])
            x = self.attn_out_mlp(x, attn, w["o"], w["ln2"], w["gu"], w["down"])
        logits = self.final(x, self.norm, self.lm_head)
        self.token.copy_(logits.argmax(-1))
        return logits

    def graph(self, pos: int) -> Callable[[], Any]:
        """A function that runs one decode step at `pos`: a CUDA graph replay, or eager on the CPU."""
        if self.cache.device.type != "cuda":
            return lambda: self.step(pos)
        assert self.stream is not None
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(2):  # warm up (the first call compiles) before recording
                self.step(pos)
        torch.cuda.current_stream().wait_stream(self.stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.step(pos)
        return graph.replay
