"""Which way of writing a bf16 matrix-vector product reads memory fastest on this GPU.

For each weight shape of Qwen3-8B's decode step ([outputs, inputs]), eight different weight
copies are rotated (so the L2 cache holds none of them) inside one CUDA graph, and the time
per product is turned into bytes per second (weight bytes / time). Variants: x @ w.T with w
[out, in] (what decoder.py does), x @ wt with wt [in, out] stored transposed, split-K bmm,
and torch.compile's max-autotune on each layout.

    python3 bench/gemv_layouts.py
"""

from __future__ import annotations

import statistics

import torch

SHAPES = {"o": (4096, 4096), "down": (4096, 12288), "qkv": (6144, 4096), "gu": (24576, 4096)}
COPIES = 8


def timed(fn, copies, x, repeat=20) -> float:
    """Median seconds of one product, from a CUDA graph replaying all copies once."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            for w in copies:
                fn(x, w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for w in copies:
            fn(x, w)
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / len(copies))
    return statistics.median(times)


def split(s):
    def f(x, w):
        n, k = w.shape
        return torch.bmm(x.reshape(s, 1, k // s), w.view(n, s, k // s).permute(1, 2, 0)).sum(0)

    return f


def main() -> None:
    dev = torch.device("cuda")
    print(torch.cuda.get_device_name(dev), torch.__version__)
    compiled_t = torch.compile(
        lambda x, w: x @ w.t(), mode="max-autotune-no-cudagraphs", dynamic=False
    )
    compiled_n = torch.compile(
        lambda x, wt: x @ wt, mode="max-autotune-no-cudagraphs", dynamic=False
    )
    for name, (n, k) in SHAPES.items():
        w = [torch.randn(n, k, dtype=torch.bfloat16, device=dev) for _ in range(COPIES)]
        wt = [t.t().contiguous() for t in w]
        x = torch.randn(1, k, dtype=torch.bfloat16, device=dev)
        ref = x.float() @ w[0].float().t()
        row = {}
        variants = {
            "x@w.T": (lambda x, w: x @ w.t(), w),
            "x@wt": (lambda x, wt: x @ wt, wt),
            "split2": (split(2), w),
            "split4": (split(4), w),
            "split8": (split(8), w),
            "compiled x@w.T": (compiled_t, w),
            "compiled x@wt": (compiled_n, wt),
        }
        for label, (fn, mats) in variants.items():
            try:
                out = fn(x, mats[0]).float()
                err = ((out - ref).norm() / ref.norm()).item()
                seconds = timed(fn, mats, x)
                row[label] = f"{n * k * 2 / seconds / 1e12:5.2f} TB/s (err {err:.1e})"
            except Exception as exc:  # noqa: BLE001 - report and go on
                row[label] = f"failed: {type(exc).__name__}"
        print(f"{name} {n}x{k}:")
        for label, shown in row.items():
            print(f"  {label:<16} {shown}")


if __name__ == "__main__":
    main()
