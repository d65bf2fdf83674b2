"""Step 4: decode speed with f16, q8_0 and q4_0 keys and values, at depths of 0 to 32,768 tokens.

For each cache format, llama-bench fills the cache to each depth (once, not timed) and times 64
new tokens, one at a time, five times:

    llama-bench -m gguf/qwen3-8b-q8_0.gguf -ngl 99 -fa 1 -ctk q4_0 -ctv q4_0 -p 0 -n 64 \
        -d 0,8192,16384,32768 -r 5 -o json

Flash attention is on (-fa 1): llama.cpp needs it for a quantized value cache. Each speed is
set beside the prediction on paper: a new token reads the weights and every cached key and
value, so against f16 at the same depth a smaller cache should be faster by the ratio of the
bytes read (the bandwidth cancels). Reading fewer bytes is not free: each block of 32 numbers is
turned back into 16-bit numbers before it is used.

    python3 decode.py --gguf gguf/qwen3-8b-q8_0.gguf
    python3 decode.py --gguf gguf/qwen3-8b-tiny-q8_0.gguf --device cpu --tiny
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cache_sizes import arguments, gpu_args
from labkit import timing
from labkit.checks import check
from labkit.results import write_results
from labkit.units import human
from llamakit import bench, gguf, gpu, tools

DEPTHS, CPU_DEPTHS = "0,8192,16384,32768", "0,256,1024"
TIMED = 64


def run_bench(binary: str, path: str, t: str, args: Any, depths: str, n_gen: int) -> list[Any]:
    """One llama-bench run for one cache format; its tests."""
    cmd = [binary, "-m", path, *gpu_args(args.device, bench=True), "-fa", "1", "-ctk", t, "-ctv", t,
           "-p", "0", "-n", str(n_gen), "-d", depths, "-r", str(args.repetitions), "-o", "json"]  # fmt: skip
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr[-3000:], file=sys.stderr)
        check(False, f"llama-bench failed (status {out.returncode}): {' '.join(cmd)}")
    return bench.parse(out.stdout)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument(
        "--depths", help=f"cached tokens before the timed ones ({DEPTHS}; cpu {CPU_DEPTHS})"
    )
    parser.add_argument("--repetitions", type=int, default=5, help="llama-bench's -r")
    args = parser.parse_args()
    t_start = time.perf_counter()
    cuda = args.device.startswith("cuda")
    depths = args.depths or (DEPTHS if cuda else CPU_DEPTHS)
    n_gen = TIMED if cuda else 16
    binary = tools.tool("llama-bench", tools.llama_dir(args.llama))
    shapes = gguf.summary(args.gguf)
    weights = shapes["read_bytes_per_token"]
    print(f"llama-bench: {tools.shown(binary)}")
    print(f"{Path(args.gguf).name}: a decode step reads {human(weights)} of weights")
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "n_gen": n_gen,
                               "weight_bytes": weights, "types": {}}  # fmt: skip
    peaks: list[dict[str, Any]] = []
    for t in args.types.split(","):
        with gpu.GpuMemory() as mem:
            rows = bench.decode_rows(run_bench(binary, args.gguf, t, args, depths, n_gen))
        per = gguf.kv_bytes_per_token(shapes, t)
        entry: dict[str, Any] = {"bytes_per_token": per, "depths": {}, "gpu_memory": mem.result()}
        for d, row in sorted(rows.items()):
            check((row.get("type_k"), row.get("type_v")) in ((t, t), (None, None)),
                  f"llama-bench ran {row.get('type_k')}/{row.get('type_v')}, not {t}")  # fmt: skip
            tok_s = bench.speed(row)
            check(tok_s.min > 0, f"llama-bench gave {tok_s.min} tok/s at depth {d}")
            entry["depths"][str(d)] = {
                "tok_s": tok_s,
                "repetitions": tok_s.n,
                "bytes_read": weights + (d + (n_gen - 1) / 2) * per,
                "avg_tok_s": float(row["avg_ts"]),
                "stddev_tok_s": float(row.get("stddev_ts", 0.0)),
            }
        first, last = (entry["depths"][k] for k in (min(entry["depths"], key=int),
                                                    max(entry["depths"], key=int)))  # fmt: skip
        entry["slowdown"] = timing.ratio(first["tok_s"], last["tok_s"])
        entry["slowdown_paper"] = last["bytes_read"] / first["bytes_read"]
        entry["build_commit"], entry["build_number"] = (
            rows[0].get("build_commit"),
            rows[0].get("build_number"),
        )
        results["types"][t] = entry
        peaks.append(entry["gpu_memory"])
    f16 = results["types"].get("f16")
    print(f"\ntokens per second, median of {args.repetitions} runs of {n_gen} tokens [min to max]:")
    print(f"  {'depth':>8} " + "".join(f"{t:>24}" for t in results["types"]))
    for d in sorted({int(k) for e in results["types"].values() for k in e["depths"]}):
        cells = []
        for t, e in results["types"].items():
            got = e["depths"][str(d)]
            if f16:  # against f16 at the same depth: measured and on paper
                base = f16["depths"][str(d)]
                got["vs_f16"] = timing.ratio(got["tok_s"], base["tok_s"])
                got["vs_f16_paper"] = base["bytes_read"] / got["bytes_read"]
            s = got["tok_s"]
            cells.append(f"{s.median:>9.1f} [{s.min:.0f}-{s.max:.0f}]")
        print(f"  {d:>8,} " + "".join(f"{c:>24}" for c in cells))
    if f16:
        print("\nagainst f16 at the same depth, measured (on paper):")
        for t, e in results["types"].items():
            line = ", ".join(f"{int(d):,}: {g['vs_f16'].median:.2f}x ({g['vs_f16_paper']:.2f}x)"
                             for d, g in e["depths"].items())  # fmt: skip
            print(f"  {t:<5} {line}")
    results["seconds"] = time.perf_counter() - t_start
    print(gpu.record(results, gpu.worst(peaks), "llama-bench, the deepest cache"))
    print(f"wrote {write_results('decode', results)}; decode.py took {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
