"""The compact decoder: decode steps of one sequence, arranged for speed, in any attention design.

It computes what transformers' Qwen3 computes for one new token (a check in the tests), for the
designs of shapes.Shape: multi-head, grouped-query and multi-query attention, a sliding window on
alternate layers (a ring of `window` slots), and latent attention (MLA: the key up-projection is
multiplied into the query and the value up-projection applied after attention, so attention runs
over the latents themselves). The cache can be kept in bf16 or in fp8 with a float32 scale per
vector (designs without latents or windows).

Arranged for speed: q, k and v are one matrix and gate and up another (fewer, larger products);
each matrix-vector product is split along K into the fewest slices that run within 5 % of
the fastest count on this GPU (kernels.fastest_splits, timed as CUDA graphs);
torch.compile fuses the small element-wise steps (norms, rotary embedding, residual adds) and,
with `autotune`, times its own kernels against cuBLAS; `graph(pos)` records a whole step as a
CUDA graph, replayed with no Python and no launch one by one (on the side stream of timing.py).
Attention reads only the filled part of the cache, never the whole buffer.

    dec = Decoder.from_transformers(model, slots=32_769)     # a transformers Qwen3, held once
    dec = Decoder.random(shape, device, slots=32_768)        # random bf16 weights of a Shape
    dec.fill_random(); run = dec.graph(depth); run()         # one decode step at `depth`
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from . import timing
from .kernels import (
    ATTENTION,
    FP8,
    dequantise,
    fastest_splits,
    matvec,
    quantise,
    rms_norm,
    rope_tables,
    rotate,
)
from .shapes import Shape

Weights = dict[str, Any]
"""{"layers": [per layer: ln1, qkv (or MLA: q, kv_a, kv_norm, kv_b), qn, kn (Qwen3), o, ln2,
gate_up, down], "embed", "norm", "head"}: every tensor in bf16 on the decoder's device."""


def random_weights(shape: Shape, device: Any, seed: int = 0) -> Weights:
    """Random bf16 weights of the shape's sizes, scaled so activations stay near 1."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def rand(*dims: int, std: float) -> torch.Tensor:
        w = torch.randn(*dims, generator=gen, device=device, dtype=torch.bfloat16)
        return w.mul_(std)

    def ones(n: int) -> torch.Tensor:
        return 1 + rand(n, std=0.05)

    h, q, d, inter = shape.hidden, shape.heads, shape.head_dim, shape.intermediate
    layers = []
    for _ in range(shape.layers):
        w: dict[str, torch.Tensor] = {
            "ln1": ones(h),
            "ln2": ones(h),
            "gate_up": rand(2 * inter, h, std=h**-0.5),
            "down": rand(h, inter, std=inter**-0.5),
        }
        if shape.kv_lora_rank:
            r, rope = shape.kv_lora_rank, shape.rope_dim
            w["q"] = rand(q * (d + rope), h, std=h**-0.5)
            w["kv_a"] = rand(r + rope, h, std=h**-0.5)
            w["kv_norm"] = ones(r)
            # the latent's up-projection: per head, d rows for the key and d for the value
            w["kv_b"] = rand(q, 2 * d, r, std=r**-0.5)
        else:
            w["qkv"] = rand((q + 2 * shape.kv_heads) * d, h, std=h**-0.5)
            if shape.qk_norm:
                w["qn"], w["kn"] = ones(d), ones(d)
        w["o"] = rand(h, q * d, std=(q * d) ** -0.5)
        layers.append(w)
    embed = rand(shape.vocab, h, std=1.0)
    head = embed if shape.tied else rand(shape.vocab, h, std=h**-0.5)
    return {"layers": layers, "embed": embed, "norm": ones(h), "head": head}


@torch.no_grad()
def _joined(linears: list[Any]) -> torch.Tensor:
    """Several linear layers' weights stacked into one matrix; the layers' own weights become
    views of it, so the model keeps working and the weights are held once, not twice."""
    whole = torch.cat([lin.weight for lin in linears])
    for lin, part in zip(
        linears, whole.split([lin.weight.shape[0] for lin in linears]), strict=True
    ):
        lin.weight.data = part
    return whole


def transformers_weights(model: Any) -> tuple[Shape, Weights]:
    """The shape and weights of a transformers Qwen3 (or Llama) model, q, k, v and gate, up
    joined in place (see _joined): the model itself keeps working on the same memory."""
    cfg = model.config.to_dict()
    cfg.setdefault("model_type", model.config.model_type)
    name = getattr(model.config, "name_or_path", "") or cfg["model_type"]
    shape = Shape.of_config(cfg, name=str(name))
    inner, layers = model.model, []
    for layer in inner.layers:
        a, f = layer.self_attn, layer.mlp
        w = {
            "ln1": layer.input_layernorm.weight.detach(),
            "qkv": _joined([a.q_proj, a.k_proj, a.v_proj]),
            "o": a.o_proj.weight.detach(),
            "ln2": layer.post_attention_layernorm.weight.detach(),
            "gate_up": _joined([f.gate_proj, f.up_proj]),
            "down": f.down_proj.weight.detach(),
        }
        if shape.qk_norm:
            w["qn"], w["kn"] = a.q_norm.weight.detach(), a.k_norm.weight.detach()
        layers.append(w)
        if w["qkv"].device.type == "cuda":
            # hand the layer's old matrices back: the joined ones are larger and cannot reuse their
            # blocks, which PyTorch would otherwise keep reserved (6.8 GiB over Qwen3-8B's layers)
            torch.cuda.empty_cache()
    embed = inner.embed_tokens.weight.detach()
    head = model.lm_head.weight.detach()
    return shape, {
        "layers": layers,
        "embed": embed,
        "norm": inner.norm.weight.detach(),
        "head": head,
    }


def weight_nbytes(weights: Weights, read: bool = False) -> int:
    """Bytes of every weight tensor (a tied table once); with `read`, only what a decode step
    reads: all but the embedding table (of which one row), unless it is also the LM head."""
    tensors = [t for layer in weights["layers"] for t in layer.values()]
    tensors += [weights["norm"], weights["head"]]
    if not read:
        tensors.append(weights["embed"])
    seen = {t.data_ptr(): t.nbytes for t in tensors}
    return sum(seen.values())


def allocated(device: Any) -> int:
    """Bytes in tensors on the GPU now (0 on the CPU)."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    return int(torch.cuda.memory_allocated(device))


class Decoder:
    """Decode steps of one sequence over a cache of `slots` positions; see the module docstring.

    fuse       compile the small operations with torch.compile (GPU only)
    autotune   let the compiler time its own matrix-vector kernels against cuBLAS and keep the
               faster per weight shape (mode max-autotune-no-cudagraphs; slower to compile)
    split_k    time 1 to 16 slices of K per kind of matrix and keep the fewest within 5 % of the
               fastest (kernels.fastest_splits; GPU only)
    cache      "bf16", or "fp8": float8 e4m3 numbers with a float32 scale per head and token,
               quantised on write and dequantised on read (designs without latents or windows)
    """

    def __init__(
        self,
        shape: Shape,
        weights: Weights,
        slots: int,
        *,
        fuse: bool = True,
        autotune: bool = False,
        split_k: bool = True,
        cache: str = "bf16",
    ) -> None:
        self.shape, self.w, self.slots, self.fmt = shape, weights, slots, cache
        d, dev = shape, weights["embed"].device
        self.device = dev
        if cache not in ("bf16", "fp8"):
            raise ValueError(f"cache {cache!r}: expected 'bf16' or 'fp8'")
        if cache == "fp8" and (d.kv_lora_rank or d.window):
            raise ValueError("the fp8 cache is written for designs without latents or windows")
        cuda = dev.type == "cuda"
        # Where each layer keeps its keys and values: (tensor, index). One tensor per kind of
        # layer, so the allocator hands out exactly the bytes the formula says.
        full = [i for i in range(d.layers) if not d.is_window_layer(i)]
        local = [i for i in range(d.layers) if d.is_window_layer(i)]
        self.where = [("local", local.index(i)) if i in local else ("full", full.index(i))
                      for i in range(d.layers)]  # fmt: skip
        # For each kind of matrix, the number of K slices that runs fastest on this GPU.
        roles = ("o", "gate_up", "down") if d.kv_lora_rank else ("qkv", "o", "gate_up", "down")
        tune = split_k and cuda
        self.splits = {r: fastest_splits([w[r] for w in weights["layers"]]) if tune else 1
                       for r in roles}  # fmt: skip
        self.splits["head"] = fastest_splits([weights["head"]]) if tune else 1
        compile_ops = fuse and cuda
        if compile_ops:  # every decoder of a run compiles the same methods again for itself
            config = torch._dynamo.config
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(config, name):
                    setattr(config, name, max(getattr(config, name), 64))
        mode = "max-autotune-no-cudagraphs" if autotune else None
        static: Callable[[Any], Any] = (
            (lambda f: torch.compile(f, fullgraph=True, dynamic=False, mode=mode))
            if compile_ops
            else (lambda f: f)
        )
        self.attn_in = static(self._mla_in if d.kv_lora_rank else self._attn_in)
        self.mla_out = static(self._mla_out)
        self.out_mlp = static(self._out_mlp)
        self.final = static(self._final)
        # the filled part of an fp8 cache grows with the position: one kernel for any length
        self.dequantise = torch.compile(dequantise, dynamic=True) if compile_ops else dequantise
        if compile_ops and autotune:
            # Compile the LM head's product now, before the cache takes its memory: to pick a
            # kernel the compiler times each candidate on its own copy of the weight (1.16 GiB for
            # Qwen3-8B). Later calls have the same shapes and reuse the compiled code.
            self.final(torch.zeros(1, d.hidden, dtype=torch.bfloat16, device=dev),
                       weights["norm"], weights["head"])  # fmt: skip
            torch.cuda.empty_cache()
        rope_dim = d.rope_dim if d.kv_lora_rank else d.head_dim
        self.cos, self.sin = rope_tables(rope_dim, slots, d.rope_theta, dev)
        self.token = torch.zeros(1, dtype=torch.long, device=dev)
        before = allocated(dev)
        self.store: dict[str, torch.Tensor] = {}
        bf16 = torch.bfloat16
        if d.kv_lora_rank:
            self.store["full"] = torch.empty(d.layers, slots, d.kv_lora_rank + d.rope_dim,
                                             dtype=bf16, device=dev)  # fmt: skip
        else:
            dtype = FP8 if cache == "fp8" else bf16
            self.store["full"] = torch.empty(len(full), 2, d.kv_heads, slots, d.head_dim,
                                             dtype=dtype, device=dev)  # fmt: skip
            if cache == "fp8":
                self.store["scale"] = torch.empty(len(full), 2, d.kv_heads, slots,
                                                  dtype=torch.float32, device=dev)  # fmt: skip
            if local:
                assert d.window is not None
                self.store["local"] = torch.empty(len(local), 2, d.kv_heads, d.window, d.head_dim,
                                                  dtype=bf16, device=dev)  # fmt: skip
        # what the allocator handed out for the cache (no counter on the CPU: the tensors' sizes)
        self.cache_reserved = allocated(dev) - before if cuda else self.cache_nbytes()

    @classmethod
    def from_transformers(cls, model: Any, slots: int, **options: Any) -> Decoder:
        """A decoder on a transformers model's own weights (joined in place: held once)."""
        shape, weights = transformers_weights(model)
        return cls(shape, weights, slots, **options)

    @classmethod
    def random(
        cls, shape: Shape, device: Any, slots: int, seed: int = 0, **options: Any
    ) -> Decoder:
        """A decoder on random bf16 weights of a shape (random_weights)."""
        return cls(shape, random_weights(shape, device, seed), slots, **options)

    @property
    def cache(self) -> torch.Tensor:
        """The cache of the full-attention layers: [layers, 2 (key, value), kv heads, slots, head
        size] (MLA: [layers, slots, latent])."""
        return self.store["full"]

    def cache_nbytes(self) -> int:
        """Bytes of every cache tensor (scales included)."""
        return sum(t.nbytes for t in self.store.values())

    def weight_bytes_read(self) -> int:
        """Bytes of weights one decode step reads (of the embedding table, one row: left out)."""
        return weight_nbytes(self.w, read=True)

    def fill_random(self) -> None:
        """Fill the whole cache with random numbers, so timed steps never run on zeros; one layer
        at a time, so the temporary is small."""
        for name, t in self.store.items():
            if name == "scale":
                t.fill_(1.0)
                continue
            for part in t:
                part.copy_(torch.randn(part.shape, dtype=torch.bfloat16, device=self.device))

    # The fused pieces. Their shapes never depend on the position, so each compiles once.

    def _attn_in(self, x, ln, w, qn, kn, cos, sin):  # type: ignore[no-untyped-def]
        d = self.shape
        qkv = matvec(rms_norm(x, ln, d.eps), w, self.splits["qkv"]).view(-1, d.head_dim)
        q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads])
        if qn is not None:
            q, k = rms_norm(q, qn, d.eps), rms_norm(k, kn, d.eps)
        kv = torch.stack((rotate(k, cos, sin), v))  # this token's key and value
        q = rotate(q, cos, sin).view(1, d.kv_heads, d.group, d.head_dim)
        if self.fmt == "fp8":
            return (q, *quantise(kv))
        return q, kv

    def _mla_in(self, x, ln, wq, wkva, kv_norm, kv_b, cos, sin):  # type: ignore[no-untyped-def]
        d = self.shape
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
        d = self.shape
        out = torch.bmm(o_latent.unsqueeze(1), kv_b[:, d.head_dim :].transpose(1, 2))
        return out.reshape(1, -1)

    def _out_mlp(self, x, attn, wo, ln, wgu, wdown):  # type: ignore[no-untyped-def]
        s = self.splits
        x = x + matvec(attn, wo, s["o"])
        gate, up = matvec(rms_norm(x, ln, self.shape.eps), wgu, s["gate_up"]).chunk(2, dim=-1)
        return x + matvec(F.silu(gate) * up, wdown, s["down"])

    def _final(self, x, norm, head):  # type: ignore[no-untyped-def]
        return matvec(rms_norm(x, norm, self.shape.eps), head, self.splits["head"])

    def attend(self, i: int, w: dict[str, torch.Tensor], x: torch.Tensor, pos: int) -> torch.Tensor:
        """Write layer i's key and value (or latent) for `pos`; attend over the filled part."""
        d, (kind, j) = self.shape, self.where[i]
        cos, sin = self.cos[pos], self.sin[pos]
        if d.kv_lora_rank:
            q, row = self.attn_in(x, w["ln1"], w["q"], w["kv_a"], w["kv_norm"], w["kv_b"], cos, sin)
            cache = self.store["full"][j]
            cache[pos].copy_(row)
            filled = cache[: pos + 1]
            # one query per head, in latent space, against every token's latent
            scores = (q @ filled.t()).float() * (d.head_dim + d.rope_dim) ** -0.5
            probs = torch.softmax(scores, dim=-1).to(torch.bfloat16)
            return self.mla_out(probs @ filled[:, : d.kv_lora_rank], w["kv_b"])
        out = self.attn_in(x, w["ln1"], w["qkv"], w.get("qn"), w.get("kn"), cos, sin)
        cache = self.store[kind][j]
        if kind == "local":  # a ring of `window` slots: the oldest token is overwritten
            assert d.window is not None
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
        """A function that runs one decode step at `pos`: a CUDA graph replay (recorded on
        timing's side stream), or the eager step on the CPU."""
        return timing.graphed(lambda: self.step(pos), self.device)

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Run a whole prompt at once, writing its keys and values; logits of its last token.

        For the designs without windows or latents. Attention inside the prompt uses the fresh
        bf16 keys and values, as serving engines do; the cache keeps them in its own format.
        """
        d = self.shape
        if d.kv_lora_rank or d.window:
            raise ValueError("prefill is written for designs without latents or windows")
        t = tokens.shape[0]
        x = self.w["embed"][tokens]
        cos, sin = self.cos[:t, None], self.sin[:t, None]
        for i, w in enumerate(self.w["layers"]):
            qkv = (rms_norm(x, w["ln1"], d.eps) @ w["qkv"].t()).view(t, -1, d.head_dim)
            q, k, v = qkv.split([d.heads, d.kv_heads, d.kv_heads], dim=1)
            if d.qk_norm:
                q, k = rms_norm(q, w["qn"], d.eps), rms_norm(k, w["kn"], d.eps)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            kv = torch.stack((k, v)).transpose(1, 2)  # [2, kv heads, t, head size]
            j = self.where[i][1]
            if self.fmt == "fp8":
                kv8, scale = quantise(kv)
                self.store["full"][j][:, :, :t].copy_(kv8)
                self.store["scale"][j][:, :, :t].copy_(scale)
            else:
                self.store["full"][j][:, :, :t].copy_(kv)
            keys, values = (kv[n].repeat_interleave(d.group, dim=0)[None] for n in (0, 1))
            attn = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], keys, values, is_causal=True
            )
            x = x + attn[0].transpose(0, 1).reshape(t, -1) @ w["o"].t()
            gate, up = (rms_norm(x, w["ln2"], d.eps) @ w["gate_up"].t()).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ w["down"].t()
        logits = self._final(x[-1:], self.w["norm"], self.w["head"])
        self.token.copy_(logits.argmax(-1))
        return logits
