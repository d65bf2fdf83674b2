"""Step 3: what paging costs a decode step's attention, against a contiguous cache.

One decode step of one Qwen3-8B layer for 16 requests at the same depth: each new token's
query attends to every earlier token's keys and values. From a contiguous cache, PyTorch's SDPA
reads them where they lie. From a paged cache, the keys and values sit in blocks scattered over
a pool, found through each request's block table; the engine of step 2 (transformers with SDPA)
first gathers them into one contiguous copy, then runs the same SDPA. The copy is the price of
paging on this path: on paper about three times the bytes moved (read the blocks, write the
copy, read the copy). Kernels that read the blocks in place (PagedAttention in vLLM, flash
attention with a block table) do not pay it. Both are timed on the GPU's clock (CUDA graphs,
CUDA events), in interleaved rounds, at depths of 1,024, 4,096 and 16,384 tokens and blocks of
16, 64 and 256 tokens; the outputs must agree exactly.

    python3 speed.py
    python3 speed.py --device cpu --tiny     # shrunken shapes, in seconds, on a CPU
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from labkit import configs, device, memory, results, timing
from labkit.checks import check
from labkit.units import human
from mix import BLOCKS, TINY_DIVISOR, block_sizes

MODEL = Path(__file__).with_name("models") / "Qwen3-8B" / "config.json"
REQUESTS = 16
DEPTHS = (1024, 4096, 16384)
ROUNDS = 20


def paged_copy(k: torch.Tensor, v: torch.Tensor, block: int, seed: int) -> tuple[Any, ...]:
    """The same keys and values stored as blocks of `block` tokens in a pool, in shuffled order,
    and the token index (block table x block size + offset) that reads them back in order."""
    r, h, d, hd = k.shape
    per_request = d // block
    gen = torch.Generator().manual_seed(seed)
    where = torch.randperm(r * per_request, generator=gen).view(r, per_request).to(k.device)
    index = (where.unsqueeze(-1) * block + torch.arange(block, device=k.device)).reshape(-1)
    pools = []
    for t in (k, v):
        pool = torch.empty(r * d, h, hd, dtype=t.dtype, device=t.device)
        pool[index] = t.transpose(1, 2).reshape(r * d, h, hd)
        pools.append(pool)
    return pools[0], pools[1], index


def measure(dev: Any, gen: Any, sizes: tuple[int, int, int, int], depth: int,
            blocks: tuple[int, ...], rounds: int, layers: int) -> dict[str, Any]:  # fmt: skip
    """Time one layer's decode attention at `depth` tokens: contiguous, then paged in each block
    size; interleaved rounds of CUDA-graph replays timed by CUDA events."""
    requests, heads, kv, hd = sizes
    k = torch.randn((requests, kv, depth, hd), generator=gen, device=dev, dtype=torch.bfloat16)
    v = torch.randn((requests, kv, depth, hd), generator=gen, device=dev, dtype=torch.bfloat16)
    q = torch.randn(requests, heads, 1, hd, generator=gen, device=dev, dtype=torch.bfloat16)

    def contiguous() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    def paged_read(kp: Any, vp: Any, index: Any) -> Any:
        def paged() -> torch.Tensor:
            kg = torch.index_select(kp, 0, index).view(requests, depth, kv, hd).transpose(1, 2)
            vg = torch.index_select(vp, 0, index).view(requests, depth, kv, hd).transpose(1, 2)
            return F.scaled_dot_product_attention(q, kg, vg, enable_gqa=True)

        return paged

    calls: dict[str, Any] = {"contiguous": contiguous}
    for label, block in zip(BLOCKS, blocks, strict=True):
        paged = paged_read(*paged_copy(k, v, block, seed=block))
        # the gathered keys are laid out otherwise, so the GPU may pick another attention
        # kernel: the same numbers, summed in another order, within bf16's rounding
        got, want = paged().float(), contiguous().float()
        off = float((got - want).norm() / want.norm())
        check(off < 1e-2,
              f"depth {depth}, blocks of {block}: the paged read is off by {off:.2e}"
              " from the contiguous one (more than bf16's rounding)")  # fmt: skip
        calls[f"b{label}"] = paged  # keyed by the full-size block (b16: 4 with --tiny)
    replays = {name: timing.graphed(fn, dev) for name, fn in calls.items()}
    samples: dict[str, list[float]] = {name: [] for name in replays}
    for _ in range(rounds):  # interleaved: a slow moment of the GPU falls on every variant
        for name, fn in replays.items():
            samples[name].append(timing.time_gpu(fn, dev, repeats=1, warmup=1).median)
    spreads = {name: timing.Spread.of(s) for name, s in samples.items()}
    base, labels = spreads["contiguous"], [f"b{b}" for b in BLOCKS]
    cache_bytes = 2 * k.nbytes
    return {
        "depth": depth,
        "cache_bytes": cache_bytes,
        "contiguous": base,
        "contiguous_rate": timing.derive(base, lambda s: cache_bytes / s),
        "paged": {b: spreads[b] for b in labels},
        "slowdown": {b: timing.ratio(spreads[b], base) for b in labels},
        "extra_per_step": {b: layers * (spreads[b].median - base.median) for b in labels},
    }


def main() -> None:
    parser = device.arguments(__doc__)
    args = parser.parse_args()
    dev = device.pick(args, cpu_needs_tiny=True)
    clock, peak = timing.Stopwatch(), memory.PeakMemory(dev)
    print(device.describe(dev, "torch"))
    cfg = configs.load_config(MODEL)
    cfg = configs.tiny_config(cfg) if args.tiny else cfg
    layers, heads, kv, hd = (int(cfg[k]) for k in ("num_hidden_layers", "num_attention_heads",
                                                    "num_key_value_heads", "head_dim"))  # fmt: skip
    requests = 2 if args.tiny else REQUESTS
    depths = tuple(d // TINY_DIVISOR for d in DEPTHS) if args.tiny else DEPTHS
    rounds = 5 if args.tiny else ROUNDS
    blocks = block_sizes(args.tiny)
    labels = [f"b{b}" for b in BLOCKS]  # results keyed by the full-size block and depth
    print(f"one layer of Qwen3-8B{' (shrunk)' if args.tiny else ''}: {heads} query heads,"
          f" {kv} key-value heads of {hd};\n  {requests} requests decode one token each")  # fmt: skip
    weights = configs.weight_bytes(configs.load_config(MODEL))
    bandwidth = timing.copy_bandwidth(dev, (16 if args.tiny else 1024) * 2**20)
    step_paper = weights / bandwidth.median
    print(
        f"this device copies {bandwidth.median / 1e9:,.0f} GB/s: reading Qwen3-8B's"
        f" {human(weights)} of weights,\n  once a decode step, takes {step_paper * 1e3:.2f} ms"
    )
    gen = torch.Generator(device=dev).manual_seed(0)
    out: dict[str, Any] = {}
    print(f"\n{'depth':>7} {'cache read':>11} {'contiguous':>11}" + "".join(
        f" {'paged ' + str(b):>11} {'x':>6}" for b in blocks))  # fmt: skip
    for depth_label, depth in zip(DEPTHS, depths, strict=True):
        entry = measure(dev, gen, (requests, heads, kv, hd), depth, blocks, rounds, layers)
        out[f"d{depth_label}"] = entry
        base, cache_bytes = entry["contiguous"], entry["cache_bytes"]
        print(f"{depth:>7,} {human(cache_bytes):>11} {base.median * 1e6:>9.1f}us" + "".join(
            f" {entry['paged'][b].median * 1e6:>9.1f}us {entry['slowdown'][b].median:>5.2f}x"
            for b in labels))  # fmt: skip
        memory.release(dev)
    deepest = out[f"d{DEPTHS[-1]}"]
    worst = max(deepest["slowdown"].values(), key=lambda s: s.median)
    if dev.type == "cuda":  # on a CPU, shrunk, the timings are noise
        check(worst.median > 1, "the paged read was not slower than the contiguous one at depth")
    extra = deepest["paged"][labels[0]].median - deepest["contiguous"].median
    print(
        f"\nat {depths[-1]:,} tokens, the copy adds {extra * 1e6:.0f} us a layer:"
        f" {deepest['extra_per_step'][labels[0]] * 1e3:.2f} ms a decode step of {layers} layers,"
    )
    print(f"  against {step_paper * 1e3:.2f} ms to read the weights once")
    report = peak.report(paper=None, what="")
    results.write_results(
        "speed",
        {
            "device": dev.type,
            "tiny": args.tiny,
            "gpu": device.describe(dev, "torch"),
            "requests": requests,
            "layers": layers,
            "blocks": list(blocks),
            "weights_bytes": weights,
            "bandwidth": bandwidth,
            "weights_read_s": timing.derive(bandwidth, lambda b: weights / b),
            "depths": out,
            "peak_gpu_memory": report,
            "wall_s": clock.seconds(),
        },
    )
    print(f"wrote results/speed.json ({clock.seconds():.1f} s)")


if __name__ == "__main__":
    main()
