"""The compact decoder's small pieces: RMSNorm, rotary embedding, matrix-vector products split
along K, and 8-bit vectors with a scale each. Needs PyTorch."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention import SDPBackend

from . import timing
from .timing import Spread

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


SPLIT_MARGIN = 0.05
"""How much faster than fewer slices a count must run to be kept: the fewest slices whose median is
within this fraction (or within the two counts' quartiles, if wider) of the fastest is chosen."""
ROTATION = 20
"""Products per timed graph replay, rotating over up to four matrices (several layers'), so the L2
cache does not flatter a matrix that would fit in it."""


def time_splits(weights: list[torch.Tensor], repeats: int = 7) -> dict[int, Spread]:
    """Seconds per matrix-vector product for each count of K slices (1, 2, 4, 8, 16; those K divides
    into), the reduction included: ROTATION products recorded as one CUDA graph per count, so the
    host's launches are not what is timed, then `repeats` rounds that time every count once each
    (paired: a clock that moves during the rounds moves all counts alike). GPU only."""
    w0 = weights[0]
    x = torch.randn(1, w0.shape[1], dtype=w0.dtype, device=w0.device)
    order = [weights[i % min(4, len(weights))] for i in range(ROTATION)]
    counts = [s for s in SPLITS if w0.shape[1] % s == 0]
    replays = {
        s: timing.graphed(lambda s=s: [matvec(x, w, s) for w in order], w0.device) for s in counts
    }
    samples: dict[int, list[float]] = {s: [] for s in counts}
    for _ in range(repeats):
        for s in counts:
            spread = timing.time_gpu(replays[s], w0.device, repeats=1, warmup=1, calls=2)
            samples[s].append(spread.median / ROTATION)
    del replays  # the graphs' memory goes back to the allocator
    torch.cuda.empty_cache()
    return {s: Spread.of(v) for s, v in samples.items()}


def choose_splits(times: dict[int, Spread], margin: float = SPLIT_MARGIN) -> int:
    """The fewest slices that ran as fast as the fastest count, give or take `margin` or the two
    counts' quartiles (whichever is wider): a count that wins by less than the noise is not
    taken, so the choice is the same on every GPU of a kind, whatever host drives it."""
    best = min(times, key=lambda s: times[s].median)
    fastest = times[best]
    for s in sorted(times):
        t = times[s]
        noise = max(margin, (t.q3 - t.q1) / t.median + (fastest.q3 - fastest.q1) / fastest.median)
        if t.median <= fastest.median * (1 + noise):
            return s
    return best


def fastest_splits(weights: list[torch.Tensor]) -> int:
    """The number of K slices to split these matrices' products into: 1 on the CPU, else
    choose_splits(time_splits(weights))."""
    if weights[0].device.type != "cuda":
        return 1
    return choose_splits(time_splits(weights))
