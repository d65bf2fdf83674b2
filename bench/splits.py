"""How firm the lab kit's choice of K slices is: the draw `fastest_splits` makes, call after call,
beside the same counts timed as CUDA graphs.

The compact decoder (labkit/decoder.py) splits each kind of matrix-vector product into the number
of slices of K that ran fastest at start-up (`labkit.kernels.fastest_splits`: one eager timing of
20 rotations over up to four weights per count). On three H200s, lesson 2.3 chose 4, 2 and 4
slices for the LM head and 1, 1 and 16 for `down`, and with them its request step's peak memory
moved by 1 MiB. This bench shows, for Qwen3-8B's shapes (random bf16 weights), per kind of matrix:

    eager choices   what `fastest_splits` picked in each of --calls calls, as the lab calls it
    graph timing    each count's time per product, 20 rotations recorded as one CUDA graph and
                    replayed --replays times (the kit's graphed and time_gpu: median and
                    quartiles): no host between the kernels
    gap             the best count's lead over the runner-up, and over 1 slice

A choice is firm when the best count leads by more than the replays' spread; a kit that keeps a
split only when it leads 1 slice by a margin of that size would choose the same on every host.

    python3 bench/splits.py [--calls 10] [--replays 20] [--out results.json]

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
from labkit import timing  # noqa: E402
from labkit.kernels import SPLITS, fastest_splits, matvec  # noqa: E402
from labkit.timing import Spread  # noqa: E402

SHAPES = {  # Qwen3-8B's matrices, [out, in], as the decoder holds them (q, k, v joined; gate, up)
    "qkv": (6144, 4096),
    "o": (4096, 4096),
    "gate_up": (24576, 4096),
    "down": (4096, 12288),
    "head": (151936, 4096),
}
ROTATION = 20
"""Products per graph replay, rotating over the weights (as `fastest_splits` times them)."""


def graph_times(weights: list[torch.Tensor], splits: int, replays: int) -> Spread:
    """Seconds per product with `splits` slices: ROTATION products over the weights recorded as
    one CUDA graph (the kit's `graphed`), its replays timed by CUDA events (`time_gpu`)."""
    x = torch.randn(1, weights[0].shape[1], dtype=weights[0].dtype, device=weights[0].device)
    order = [weights[i % len(weights)] for i in range(ROTATION)]
    replay = timing.graphed(lambda: [matvec(x, w, splits) for w in order], x.device)
    return timing.derive(timing.time_gpu(replay, x.device, repeats=replays, calls=1),
                         lambda t: t / ROTATION)  # fmt: skip


def bench_role(role: str, calls: int, replays: int) -> dict[str, Any]:
    """One kind of matrix: the eager choices, and each count's graph-timed quartiles."""
    n, k = SHAPES[role]
    count = 1 if role == "head" else 4  # the head is one matrix; the others, one per layer
    weights = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02 for _ in range(count)]
    choices = Counter(fastest_splits(weights) for _ in range(calls))
    timed = {s: graph_times(weights, s, replays) for s in SPLITS if k % s == 0}
    ranked = sorted(timed, key=lambda s: timed[s].median)
    best, runner = ranked[0], ranked[1]
    spread = (timed[best].q3 - timed[best].q1) / timed[best].median
    del weights
    torch.cuda.empty_cache()
    return {
        "role": role,
        "shape": [n, k],
        "eager_choices": dict(sorted(choices.items())),
        "graph_seconds": {str(s): t.as_dict() for s, t in timed.items()},
        "best": best,
        "lead_over_runner_up": timed[runner].median / timed[best].median - 1,
        "runner_up": runner,
        "lead_over_whole": timed[1].median / timed[best].median - 1,
        "best_spread": spread,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls of fastest_splits per kind")
    parser.add_argument("--replays", type=int, default=20, help="graph replays per count")
    parser.add_argument("--out", type=Path, help="write every figure here (JSON)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/splits.py needs a CUDA GPU: none is visible")
    torch.manual_seed(0)
    rows = [bench_role(role, args.calls, args.replays) for role in SHAPES]
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"{'kind':>8}  {'eager choices':<22} {'graph best':>10} {'µs':>8} "
          f"{'lead, runner-up':>16} {'lead over 1':>12} {'spread':>7}")  # fmt: skip
    for r in rows:
        picks = ", ".join(f"{s}×{c}" for s, c in r["eager_choices"].items())
        best = r["graph_seconds"][str(r["best"])]["median"] * 1e6
        print(
            f"{r['role']:>8}  {picks:<22} {r['best']:>10} {best:>8.2f} "
            f"{r['lead_over_runner_up'] * 100:>9.1f} % ({r['runner_up']:>2}) "
            f"{r['lead_over_whole'] * 100:>10.1f} % {r['best_spread'] * 100:>6.1f} %"
        )
    print("(eager choices: count × calls; graph: 20 products per replay, median of the replays;")
    print(" lead: how much slower the runner-up, and 1 slice, ran; spread: the best's quartiles)")
    if args.out:
        args.out.write_text(
            json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
