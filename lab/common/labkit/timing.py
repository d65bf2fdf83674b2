"""Timing with warm-up and repeats, kept with its spread.

A timed value is written to a results file as a `Spread`: {"median", "min", "q1", "q3", "max",
"n"}, n the repeats kept after warm-up. A value derived from timings (tokens per second, a share
of a bound) is a Spread too, each statistic mapped through the derivation by `derive()`, which
swaps min and max (and the quartiles) when the derivation decreases, as 1 / seconds does. A ratio
of two timings (`ratio()`) pairs their extremes, so its spread covers both. The course records
the median as the value and the rest as its spread.

GPU work is timed on the GPU's own clock (CUDA events), each sample long enough that the start
and the end of a short call do not dominate; `graphed()` records a call once as a CUDA graph.
Every warm-up and every recording of a process happens on ONE side stream per GPU: cuBLAS keeps a
workspace (32 MiB on an H100 or H200) for each stream it has run on, taken from PyTorch's
allocator and kept, so a stream per graph would leave one more workspace in every later peak.

A decode step that reads its bytes once is held to its bytes bound, bandwidth / bytes read:
`bytes_bound()` gives the speed, the bound and the fraction, and stops a GPU's step that beats it.

`Spread`, `derive`, `ratio`, `bytes_bound` and `Stopwatch` need only the standard library; the
timing functions (`bandwidth` too) import PyTorch when called.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .checks import check

STATS = ("median", "min", "q1", "q3", "max")
BEYOND_BANDWIDTH = 6e12
"""A copy bandwidth (B/s) above any GPU memory of today: a given or measured one beyond it is a
mistake."""
BOUND_SLACK = 1.05
"""How far a GPU's measured speed may pass its bytes bound (the bandwidth's own spread) before
the script stops: more means the bytes were miscounted or the timing is wrong."""


@dataclass(frozen=True)
class Spread:
    """A timed value: the median of n repeats, their extremes and quartiles."""

    median: float
    min: float
    q1: float
    q3: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        """The spread of some samples (at least one); quartiles interpolated between them."""
        if not samples:
            raise ValueError("a spread needs at least one sample")
        values = sorted(float(s) for s in samples)
        if len(values) == 1:
            q1 = q3 = values[0]
        else:
            q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(statistics.median(values), values[0], q1, q3, values[-1], len(values))

    def as_dict(self) -> dict[str, float | int]:
        """The object a results file holds."""
        return {"median": self.median, "min": self.min, "q1": self.q1, "q3": self.q3,
                "max": self.max, "n": self.n}  # fmt: skip

    @property
    def relative(self) -> float:
        """(max - min) / median: how far apart the repeats were, as a fraction of the value."""
        return (self.max - self.min) / abs(self.median) if self.median else float("inf")

    def __float__(self) -> float:
        return self.median


def derive(value: Spread | float, fn: Callable[[float], float]) -> Any:
    """`fn` applied to every statistic (a plain number: to it). A decreasing `fn` swaps min and
    max, q1 and q3; a function that is not monotonic over the spread raises ValueError."""
    if not isinstance(value, Spread):
        return fn(value)
    got = {name: fn(getattr(value, name)) for name in STATS}
    if got["min"] > got["max"]:
        got["min"], got["max"], got["q1"], got["q3"] = got["max"], got["min"], got["q3"], got["q1"]
    if not got["min"] <= got["q1"] <= got["median"] <= got["q3"] <= got["max"]:
        raise ValueError(f"derive() needs a monotonic function; it gave {got}")
    return Spread(n=value.n, **got)


def ratio(a: Spread | float, b: Spread | float) -> Any:
    """a / b: the medians' ratio, with the extremes paired so the spread covers both (min =
    a.min / b.max, q1 = a.q1 / b.q3, ...). Positive values only."""
    if not isinstance(a, Spread) and not isinstance(b, Spread):
        return a / b
    sa = a if isinstance(a, Spread) else Spread(a, a, a, a, a, 1)
    sb = b if isinstance(b, Spread) else Spread(b, b, b, b, b, 1)
    if min(sa.min, sb.min) <= 0:
        raise ValueError("ratio() pairs extremes: both spreads must be positive")
    n = min(x.n for x in (a, b) if isinstance(x, Spread))
    return Spread(sa.median / sb.median, sa.min / sb.max, sa.q1 / sb.q3, sa.q3 / sb.q1,
                  sa.max / sb.min, n)  # fmt: skip


def bytes_bound(
    seconds: Spread, bandwidth: Spread | float, nbytes: float, held: bool, what: str = ""
) -> tuple[Spread, Any, Spread]:
    """A decode speed against the speed its bytes allow: from the seconds a token takes and the
    `nbytes` its step reads, the tokens per second, the bound (bandwidth / nbytes) and the first
    as a fraction of the second. With `held` (on a GPU) a speed above the bound (BOUND_SLACK)
    stops the script, named by `what`; on a CPU a tiny model sits in the processor's caches and
    Python sets the pace, so no bytes bound holds there."""
    tok_s: Spread = derive(seconds, lambda s: 1 / s)
    bound = derive(bandwidth, lambda b: b / nbytes)
    fraction: Spread = ratio(tok_s, bound)
    check(
        0 < tok_s.min and (not held or tok_s.median < BOUND_SLACK * float(bound)),
        f"{what}{': ' if what else ''}{tok_s.median:.1f} tok/s is faster than the bytes allow"
        f" ({float(bound):.1f})",
    )
    return tok_s, bound, fraction


class Stopwatch:
    """Wall time since the step started, for its last line."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        """Seconds since the step started."""
        return time.perf_counter() - self.start


# --- the helpers below need PyTorch ------------------------------------------------------------


def sync(device: Any) -> None:
    """Wait until the GPU has done all queued work, so that a host clock measures it."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(
    fn: Callable[[], Any], device: Any, calls: int = 1, seconds: float = 0.0, limit: int = 1000
) -> int:
    """Call fn at least `calls` times and until `seconds` have passed (at most `limit` calls);
    the calls made. A time as well as a count: a fast call is repeated until the GPU has been
    busy a while, as it is before any slow call is timed."""
    sync(device)
    start, done = time.perf_counter(), 0
    while done < calls or (time.perf_counter() - start < seconds and done < limit):
        fn()
        sync(device)
        done += 1
    return done


def time_gpu(
    fn: Callable[[], Any],
    device: Any,
    repeats: int = 7,
    warmup: int = 2,
    min_seconds: float = 2e-3,
    calls: int | None = None,
    max_calls: int = 1000,
) -> Spread:
    """Seconds per call of fn, over `repeats` samples after `warmup` untimed calls.

    Each sample runs fn `calls` times back to back, timed by CUDA events on a GPU (by the host's
    clock, synchronised, elsewhere); by default as many calls as last `min_seconds`, measured on
    one call after the warm-up.
    """
    import torch

    for _ in range(warmup):
        fn()
    sync(device)
    if calls is None:
        start = time.perf_counter()
        fn()
        sync(device)
        once = max(time.perf_counter() - start, 1e-7)
        calls = max(1, min(max_calls, int(min_seconds / once)))
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
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - start) / calls)
    return Spread.of(samples)


def time_wall(
    fn: Callable[..., Any],
    device: Any,
    repeats: int = 5,
    warmup: int = 1,
    setup: Callable[[], Any] | None = None,
) -> Spread:
    """Wall seconds of fn as a user waits for it, from the call to its result on the host, over
    `repeats` runs after `warmup` untimed ones; the device is synchronised before and after.
    With `setup`, fn(setup()) is timed and setup() runs outside the timed region."""
    samples = []
    for i in range(warmup + repeats):
        arg = setup() if setup is not None else None
        sync(device)
        start = time.perf_counter()
        fn(arg) if setup is not None else fn()
        sync(device)
        if i >= warmup:
            samples.append(time.perf_counter() - start)
    return Spread.of(samples)


def copy_bandwidth(device: Any, nbytes: int, repeats: int = 10, warmup: int = 2) -> Spread:
    """Bytes read plus bytes written per second by a device-to-device copy of `nbytes` bytes
    (bf16), timed by time_gpu; the two buffers are handed back before it returns."""
    import torch

    def measure() -> Spread:
        src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=device)
        dst = torch.empty_like(src)
        return time_gpu(lambda: dst.copy_(src), device, repeats=repeats, warmup=warmup)

    seconds = measure()  # its buffers are gone once it returns
    if device.type == "cuda":
        torch.cuda.empty_cache()
    result: Spread = derive(seconds, lambda s: 2 * nbytes / s)
    return result


def bandwidth(device: Any, nbytes: int, given: float | None = None) -> Spread | float:
    """The copy bandwidth a bytes bound divides by: `given` (B/s, a script's --bandwidth) or
    copy_bandwidth(device, nbytes) measured; stops the script when it is beyond any memory of
    today (BEYOND_BANDWIDTH)."""
    bw: Spread | float = given or copy_bandwidth(device, nbytes)
    check(
        0 < float(bw) < BEYOND_BANDWIDTH,
        f"a copy bandwidth of {float(bw) / 1e12:.2f} TB/s is beyond any memory of today",
    )
    return bw


_SIDE_STREAMS: dict[Any, Any] = {}


def side_stream(device: Any) -> Any:
    """The one stream, per GPU, on which every warm-up and every graph recording of the process
    happens (see the module docstring: one cuBLAS workspace, not one per graph)."""
    import torch

    if device not in _SIDE_STREAMS:
        _SIDE_STREAMS[device] = torch.cuda.Stream(device)
    return _SIDE_STREAMS[device]


def graphed(
    fn: Callable[[], Any], device: Any, pool: Any = None, warmup: int = 2
) -> Callable[[], Any]:
    """fn recorded once as a CUDA graph, returned as its replay (no Python, no launches one by
    one); on the CPU, fn itself. The first `warmup` calls run first, untimed and unrecorded
    (compiling, library handles). Graphs that share `pool` must be replayed in the order
    recorded. Everything runs on side_stream(device)."""
    import torch

    if device.type != "cuda":
        return fn
    stream = side_stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # recorded on the stream that warmed up: its cuBLAS workspace exists already, outside the
    # graph's private memory, and no third stream gets one
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        fn()
    return graph.replay
