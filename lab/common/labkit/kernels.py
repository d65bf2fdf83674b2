"""The compact decoder's small pieces: RMSNorm, rotary embedding, matrix-vector products split
along K, and 8-bit vectors with a scale each. Needs PyTorch."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention import SDPBackend

# Flash attention first: for a few queries against many keys it splits the keys across the GPU's
# processors (split-KV); the others are fallbacks (the CPU, unusual shapes).
ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest float8 e4m3 number
SPLITS = (1, 2, 4, 8, 16)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Qwen3 computes it: normalise in float32, round back, then scale."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, in the half-split layout transformers uses."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def rope_tables(
    dim: int, positions: int, theta: float, device: Any, dtype: torch.dtype = torch.bfloat16
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's angles, [positions, dim], computed in float32."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, device=device).float() / dim)
    angles = torch.outer(torch.arange(positions, device=device).float(), inv).repeat(1, 2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def quantise(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float8 e4m3 numbers and one float32 scale per vector (the last dimension): its largest
    magnitude / 448."""
    scale = kv.float().abs().amax(-1).clamp(min=1e-12) / FP8_MAX
    return (kv.float() / scale[..., None]).to(FP8), scale


def dequantise(kv8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """bf16 numbers back from float8 numbers and their scales."""
    return (kv8.float() * scale[..., None]).to(torch.bfloat16)


def _define_split_matvec() -> Any:
    @torch.library.custom_op("labkit::split_matvec", mutates_args=())
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

    return split_matvec


# An op is registered once per process: a second copy of the kit imported in the same process
# (a test, a notebook) takes the one already there.
split_matvec = (
    torch.ops.labkit.split_matvec
    if hasattr(torch.ops.labkit, "split_matvec")
    else _define_split_matvec()
)


def matvec(x: torch.Tensor, w: torch.Tensor, splits: int = 1) -> torch.Tensor:
    """x [1, K] times w [N, K] transposed; with splits > 1 the slices are summed in float32."""
    if splits == 1:
        return x @ w.t()
    return split_matvec(x, w, splits).float().sum(0, keepdim=True).to(x.dtype)


def fastest_splits(weights: list[torch.Tensor]) -> int:
    """Time one matrix-vector product for 1, 2, 4, 8 and 16 slices of K; the fastest (1 on the
    CPU, and for slices K does not divide into). The product rotates over up to four matrices
    (several layers'), so the L2 cache does not flatter it."""
    w0 = weights[0]
    if w0.device.type != "cuda":
        return 1
    x = torch.randn(1, w0.shape[1], dtype=w0.dtype, device=w0.device)
    times = {}
    for splits in (s for s in SPLITS if w0.shape[1] % s == 0):
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
