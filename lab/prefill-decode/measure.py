"""Helpers of the GPU steps: the device, clocks that wait for the GPU, CUDA graphs, peak memory."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import pdlab as pd
import torch


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """The options every GPU step shares."""
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a shrunken model and shorter sweeps, to run in seconds on a CPU",
    )


def pick_device(name: str) -> torch.device:
    """The torch device; stop with a hint when CUDA was asked for and there is none."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        pd.check(
            False, "no CUDA GPU is visible; for a quick run on the CPU use --device cpu --tiny"
        )
    return torch.device(name)


def describe(device: torch.device) -> str:
    """One line naming the device and torch's version; every GPU step prints it first."""
    what = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return f"device: {device.type} ({what}); torch {torch.__version__}"


def sync(device: torch.device) -> None:
    """Wait until the GPU has done all queued work, so that a host clock measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gpu_seconds(
    fn: Callable[[], Any],
    device: torch.device,
    repeats: int,
    warmup: int = 1,
    min_seconds: float = 2e-3,
) -> float:
    """Median time of one call of fn, timed on the GPU's own clock (CUDA events) where there is one.

    Each sample runs fn enough times back to back to last `min_seconds`, so that the start and
    end of a very short call do not dominate.
    """
    for _ in range(warmup):
        fn()
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    calls = max(1, min(1000, int(min_seconds / max(time.perf_counter() - start, 1e-7))))
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            samples.append(begin.elapsed_time(end) / 1e3 / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def warm_up(fn: Callable[[], Any], device: torch.device, calls: int, seconds: float) -> int:
    """Call fn at least `calls` times and until at least `seconds` have passed; the calls made.

    A time as well as a count: a fast call is repeated until the GPU has been busy for a while,
    as it is anyway before a slow call is timed.
    """
    sync(device)
    start, done = time.perf_counter(), 0
    while done < calls or (time.perf_counter() - start < seconds and done < 1000):
        fn()
        sync(device)
        done += 1
    return done


def wall_seconds(
    fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int = 1
) -> float:
    """Median wall time of fn as a user would wait for it: from the call to its result on the host."""
    samples = []
    for i in range(warmup + repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if i >= warmup:
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


_WARMUP_STREAMS: dict[torch.device, torch.cuda.Stream] = {}


def warmup_stream(device: torch.device) -> torch.cuda.Stream:
    """The one side stream, per GPU, on which every graph of a step warms up.

    cuBLAS gives each stream it runs on a workspace of its own (32 MiB on an H100 or H200), taken
    from PyTorch's allocator and kept for the rest of the process: a new stream per graph would
    leave one more allocated per graph, in every later peak.
    """
    if device not in _WARMUP_STREAMS:
        _WARMUP_STREAMS[device] = torch.cuda.Stream(device)
    return _WARMUP_STREAMS[device]


def graphed(
    fn: Callable[[], Any], device: torch.device, pool: Any = None, warmup: int = 2
) -> Callable[[], Any]:
    """fn recorded once as a CUDA graph and replayed (no Python, no launches one by one);
    on the CPU, fn itself. Graphs that share `pool` must be replayed in the order recorded."""
    if device.type != "cuda":
        return fn
    if warmup:
        # warm up off the default stream: the first calls compile and set up library handles
        stream = warmup_stream(device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        fn()
    return graph.replay


class PeakMemory:
    """The peak GPU memory of a step, across parts that each read and reset PyTorch's peak counters."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"
        self.allocated = self.reserved = 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)

    def part(self) -> int:
        """The most bytes held by tensors since the last call (0 on the CPU); then start afresh."""
        if not self.cuda:
            return 0
        allocated = torch.cuda.max_memory_allocated(self.device)
        self.allocated = max(self.allocated, allocated)
        self.reserved = max(self.reserved, torch.cuda.max_memory_reserved(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return allocated

    def report(self) -> dict[str, Any]:
        """Print the step's peak and return it for the results: bytes in tensors (the figure a
        page quotes), bytes PyTorch took from the GPU, and whether a 24 GB card would do."""
        self.part()
        fits = self.reserved < pd.CARD_LIMIT
        if not self.cuda:
            print("peak GPU memory: none (ran on the CPU)")
        else:
            print(
                f"peak GPU memory: {pd.human(self.allocated)} in tensors, {pd.human(self.reserved)}"
                f" taken by PyTorch from the GPU; {'fits' if fits else 'does NOT fit'} a 24 GB"
                f" card (about {pd.human(pd.CARD_LIMIT)} usable)"
            )
        return {
            "peak_gpu_memory": self.allocated,
            "peak_gpu_memory_reserved": self.reserved,
            "fits_24gb_card": fits,
        }


def limits(
    device: torch.device, tiny: bool, peak: float | None, bandwidth: float | None
) -> tuple[float, float, str]:
    """The matrix-product peak (FLOP/s) and copy bandwidth (B/s) step 2 measured on this GPU,
    unless given; and a phrase saying where they came from."""
    if peak and bandwidth:
        return peak, bandwidth, "given on the command line"
    found = pd.read_results("limits")
    pd.check(
        found is not None,
        "results/limits.json is missing: run limits.py first (or give --peak and --bandwidth)",
    )
    assert found is not None
    pd.check(
        found["device"] == device.type and found["tiny"] == tiny,
        f"results/limits.json was measured on {found['device']}"
        f"{' with --tiny' if found['tiny'] else ''}: run limits.py again with these options",
    )
    return (
        peak or found["peak_flop_s"],
        bandwidth or found["bandwidth"],
        f"measured by step 2 on {found['gpu']}",
    )
