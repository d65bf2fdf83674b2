"""A compiled decoder's speed, compile after compile: how much of it is one draw of the compiler.

Lesson 2.4's compact decoder decoded Qwen3-0.6B at 892 and then 990 tok/s on one GPU at a steady
SM clock: one fused Triton kernel (a persistent reduction: an RMS norm and a small product) took
233 µs per step in one compile and 144 µs in the other. Under mode `max-autotune-no-cudagraphs`
the compiler times every candidate configuration of such a kernel at compile time and keeps the
fastest; when candidates are close, which one wins is a draw. This bench compiles each way in a
fresh process with a fresh compiler cache, several times, and prints the decode speed of every
compile, so the spread between compiles can be read per way:

    autotune       mode max-autotune-no-cudagraphs (what the lab did)
    deterministic  the same, with inductor's deterministic mode (no timing of choices that change
                   the numbers; reductions keep the heuristic's configuration)
    fuse           plain torch.compile: the small operations fused, products left to cuBLAS,
                   reductions in the heuristic's configuration
    fuse-gemm      plain torch.compile plus autotuning of the matrix products only

    python3 bench/autotune.py [--ways autotune,fuse] [--models 0.6b,8b] [--compiles 3]
        [--out results.json]

Needs a CUDA GPU (random weights of the models' real shapes; nothing downloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WAYS = ("autotune", "deterministic", "fuse", "fuse-gemm")
SHAPES = {  # Qwen3's published config.json files, as the lab's Shape reads them
    "0.6b": dict(layers=28, hidden=1024, heads=16, head_dim=128, intermediate=3072, tied=True),
    "8b": dict(layers=36, hidden=4096, heads=32, head_dim=128, intermediate=12288),
}


def child(way: str, model: str, depths: list[int]) -> dict[str, Any]:
    """One compile of one way, in this process: tok/s at each depth and the slowest kernels."""
    sys.path[:0] = [str(REPO / "lab" / "common"), str(REPO / "lab" / "kv-cache")]
    import torch
    from labkit import timing
    from labkit.decoder import Decoder
    from labkit.shapes import Shape

    config = torch._inductor.config
    if way == "deterministic":
        if not hasattr(config, "deterministic"):
            return {"error": f"torch {torch.__version__} has no inductor deterministic mode"}
        config.deterministic = True
    if way == "fuse-gemm":
        config.max_autotune_gemm = True
    dev = torch.device("cuda")
    shape = Shape(model, vocab=151936, rope_theta=1e6, eps=1e-6, kv_heads=8, qk_norm=True,
                  **SHAPES[model])  # fmt: skip
    dec = Decoder.random(
        shape, dev, slots=max(depths) + 1, autotune=way in ("autotune", "deterministic")
    )
    dec.fill_random()
    out: dict[str, Any] = {"splits": dec.splits, "tok_s": {}, "kernels": []}
    for depth in depths:
        run = dec.graph(depth)
        s = timing.time_gpu(run, dev, repeats=9, warmup=3)
        out["tok_s"][str(depth)] = 1 / s.median
        if depth == depths[0]:
            from decode_speed import kernel_profile

            prof = kernel_profile(run, dev)
            out["kernels"] = [(r["name"][:60], round(r["us"], 1)) for r in prof["kernels"][:4]]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--models", default="0.6b")
    parser.add_argument("--compiles", type=int, default=3)
    parser.add_argument("--depths", default="0,8192")
    parser.add_argument("--out")
    parser.add_argument("--child", nargs=2, metavar=("WAY", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    if args.child:
        print(json.dumps(child(*args.child, depths)))
        return 0
    results: dict[str, Any] = {}
    for model in args.models.split(","):
        for way in args.ways.split(","):
            rows = []
            for i in range(args.compiles):
                with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
                    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache,
                           "TRITON_CACHE_DIR": os.path.join(cache, "triton")}  # fmt: skip
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", way, model, "--depths", args.depths],
                        capture_output=True, text=True, env=env, timeout=400,
                    )  # fmt: skip
                last = (done.stdout.strip().splitlines() or ["{}"])[-1]
                try:
                    row = json.loads(last)
                except json.JSONDecodeError:
                    row = {"error": (done.stderr or done.stdout)[-600:]}
                rows.append(row)
                if "error" in row:
                    print(f"{model} {way} compile {i + 1}: {row['error']}", flush=True)
                    break
                speeds = "  ".join(f"d{d}={v:7.1f}" for d, v in row["tok_s"].items())
                print(f"{model:>5} {way:<13} compile {i + 1}: {speeds} tok/s", flush=True)
                for name, us in row["kernels"]:
                    print(f"{'':26}{us:8.1f} µs  {name}")
            good = [r for r in rows if "error" not in r]
            if len(good) > 1:
                for d in good[0]["tok_s"]:
                    v = [r["tok_s"][d] for r in good]
                    spread = (max(v) - min(v)) / statistics.median(v)
                    print(f"{model:>5} {way:<13} depth {d}: median {statistics.median(v):.1f}"
                          f" tok/s, range {min(v):.1f} to {max(v):.1f} ({spread:.1%})")  # fmt: skip
            results[f"{model}/{way}"] = rows
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
