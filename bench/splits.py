"""How firm the lab kit's choice of K slices is: `fastest_splits` call after call, beside the eager
draw it made before.

The compact decoder (labkit/decoder.py) splits each kind of matrix-vector product into a number of
slices of K chosen at start-up. It used to take the count that ran fastest in one eager timing of
20 rotations over up to four weights: on three H200s lesson 2.3 got 4, 2 and 4 slices for the LM
head and 1, 1 and 16 for `down`, and its request step's peak memory moved by 1 MiB. The kit now
times each count as a CUDA graph (`time_splits`: no host between the kernels, rounds that pair
the counts) and keeps the fewest slices within 5 % or the quartiles of the fastest
(`choose_splits`). This bench shows, for Qwen3-8B's shapes (random bf16 weights), per kind:

    eager draw      what the old eager timing picked in each of --calls calls
    kit's choice    what `fastest_splits` picks in each of --calls calls
    graph timing    each count's time per product (median of the rounds, the last call's)
    lead            how much slower 1 slice, and the runner-up, ran than the fastest count

    python3 bench/splits.py [--calls 10] [--out results.json]

Needs a CUDA GPU (about 6 GiB for the weights).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "common"))

import torch  # noqa: E402
from labkit.kernels import SPLITS, choose_splits, split_matvec, time_splits  # noqa: E402

SHAPES = {  # Qwen3-8B's matrices, [out, in], as the decoder holds them (q, k, v joined; gate, up)
    "qkv": (6144, 4096),
    "o": (4096, 4096),
    "gate_up": (24576, 4096),
    "down": (4096, 12288),
    "head": (151936, 4096),
}


def eager_draw(weights: list[torch.Tensor]) -> int:
    """The kit's choice before: each count timed once, eagerly (20 rotations, host launches
    between the kernels), the fastest kept."""
    x = torch.randn(1, weights[0].shape[1], dtype=weights[0].dtype, device=weights[0].device)
    times = {}
    for splits in (s for s in SPLITS if weights[0].shape[1] % s == 0):
        run = [lambda w=w, s=splits: (x @ w.t()) if s == 1 else split_matvec(x, w, s)
               for w in weights[:4]]  # fmt: skip
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


def bench_role(role: str, calls: int) -> dict[str, Any]:
    """One kind of matrix: the eager draws, the kit's choices and the last call's timings."""
    n, k = SHAPES[role]
    count = 1 if role == "head" else 4  # the head is one matrix; the others, one per layer
    weights = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02 for _ in range(count)]
    eager = Counter(eager_draw(weights) for _ in range(calls))
    chosen: Counter[int] = Counter()
    for _ in range(calls):
        timed = time_splits(weights)
        chosen[choose_splits(timed)] += 1
    ranked = sorted(timed, key=lambda s: timed[s].median)
    best, runner = ranked[0], ranked[1]
    del weights
    torch.cuda.empty_cache()
    return {
        "role": role,
        "shape": [n, k],
        "eager_draws": dict(sorted(eager.items())),
        "kit_choices": dict(sorted(chosen.items())),
        "graph_seconds": {str(s): t.as_dict() for s, t in timed.items()},
        "fastest": best,
        "runner_up": runner,
        "lead_over_runner_up": timed[runner].median / timed[best].median - 1,
        "lead_over_whole": timed[1].median / timed[best].median - 1,
        "fastest_spread": (timed[best].q3 - timed[best].q1) / timed[best].median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls per kind of matrix")
    parser.add_argument("--out", type=Path, help="write every figure here (JSON)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/splits.py needs a CUDA GPU: none is visible")
    torch.manual_seed(0)
    rows = [bench_role(role, args.calls) for role in SHAPES]
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"{'kind':>8}  {'eager draws':<18} {'kit chose':<12} {'fastest':>7} {'µs':>8} "
          f"{'1 slice':>8} {'runner-up':>14} {'quartiles':>9}")  # fmt: skip
    for r in rows:
        eager = ", ".join(f"{s}×{c}" for s, c in r["eager_draws"].items())
        kit = ", ".join(f"{s}×{c}" for s, c in r["kit_choices"].items())
        us = r["graph_seconds"][str(r["fastest"])]["median"] * 1e6
        print(
            f"{r['role']:>8}  {eager:<18} {kit:<12} {r['fastest']:>7} {us:>8.2f} "
            f"{r['lead_over_whole'] * 100:>+7.1f}% "
            f"{r['lead_over_runner_up'] * 100:>+7.1f}% ({r['runner_up']:>2}) "
            f"{r['fastest_spread'] * 100:>8.1f}%"
        )
    print("(draws and choices: count × calls; µs: the fastest count's time per product, graphed;")
    print(" 1 slice, runner-up: how much slower they ran; quartiles: the fastest's, of its median)")
    if args.out:
        args.out.write_text(
            json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
