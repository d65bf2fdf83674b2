"""llama.cpp step 4: decode speed against the number of tokens already cached, with llama-bench.

For each GGUF file, llama-bench fills the cache to a depth (not timed) and then times 64 new
tokens, one at a time: `llama-bench -m FILE -ngl 99 -fa 1 -p 0 -n 64 -d 0,2048,8192,16384 -o json`.
Each result is set against its bytes bound, as in step 4 (decode_speed.py): every new token reads
the weights once (of the embedding table, one row) and every cached key and value once, so
tokens per second <= copy bandwidth / (weight bytes + cached tokens x KV bytes per token). The
weight bytes are read from the GGUF file itself (its tensors' sizes), so a quantised file's
smaller weights show up in its bound.

    python3 llama_bench.py --llama DIR --gguf gguf                  # after llama_gguf.py
    python3 llama_bench.py --bandwidth 4250                         # GB/s, else results/decode.json
    python3 llama_bench.py --device cpu --tiny --llama DIR --gguf gguf

Peak GPU memory is nvidia-smi's memory.used for the whole device, polled every 100 ms while
each llama-bench runs (llama-bench reports no memory figure); on a machine without nvidia-smi
it is left out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from labkit import device as devices
from labkit import timing
from labkit.checks import check
from labkit.results import write_results
from labkit.timing import Spread
from labkit.units import human

from llamakit import bench as bench_json
from llamakit import gguf, tools
from llamakit.gpu import GpuMemory

BENCH = "qwen3-0_6b:q8_0,qwen3-8b:q4_k_m,qwen3-8b:bf16"
DEPTHS, CPU_DEPTHS = "0,2048,8192,16384", "0,128,512"


def bandwidth(given: float | None, decode_json: Path) -> tuple[Spread | float | None, str]:
    """Copy bandwidth in bytes per second: --bandwidth (GB/s), else step 4's measurement (with
    its spread; an older results file holds a plain number)."""
    if given:
        return given * 1e9, "--bandwidth"
    if decode_json.exists():
        got = json.loads(decode_json.read_text()).get("copy_bandwidth_gb_s")
        if isinstance(got, dict):
            spread = Spread(**{k: got[k] for k in ("median", "min", "q1", "q3", "max", "n")})
            return timing.derive(spread, lambda g: g * 1e9), str(decode_json)
        if got:
            return float(got) * 1e9, str(decode_json)
    return None, "none (pass --bandwidth GB/s or run decode_speed.py first)"


def score(
    rows: list[dict[str, Any]], summary: dict[str, Any], bw: Spread | float | None, gpu: bool
) -> dict[str, Any]:
    """Tokens per second per depth against the bytes bound; checked where the bound is physical."""
    per_token = gguf.kv_bytes_per_token(summary, "f16")
    weights = summary["read_bytes_per_token"]
    depths: dict[str, Any] = {}
    for depth, row in bench_json.decode_rows(rows).items():  # decode-only tests (-p 0 -n N)
        n_gen = int(row["n_gen"])
        tok_s = bench_json.speed(row)  # over llama-bench's repetitions (samples_ts, one per -r)
        check(tok_s.min > 0, f"llama-bench gave {tok_s.min} tok/s at depth {depth}")
        # the timed tokens sit at depths depth .. depth + n_gen - 1: bound at their mean
        read = weights + (depth + (n_gen - 1) / 2) * per_token
        entry: dict[str, Any] = {
            "tok_s": tok_s,
            "avg_tok_s": float(row["avg_ts"]),  # llama-bench's own mean and standard deviation
            "stddev_tok_s": float(row.get("stddev_ts", 0.0)),
            "repetitions": tok_s.n,
            "n_gen": n_gen,
            "bytes_per_token": read,
            "seconds_per_token": timing.derive(tok_s, lambda t: 1 / t),
        }
        if bw:
            bound = timing.derive(bw, lambda b, n=read: b / n)
            fraction = timing.ratio(tok_s, bound)
            percent = timing.derive(fraction, lambda f: 100 * f)
            entry.update(bound_tok_s=bound, fraction=fraction, percent=percent)
            if gpu:  # a small model on a CPU can sit in its caches and beat the memory bound
                check(
                    tok_s.median < 1.05 * float(bound),
                    f"{tok_s.median:.1f} tok/s at depth {depth} beats the bytes bound"
                    f" {float(bound):.1f}",
                )
        depths[str(depth)] = entry
    keys = sorted(depths, key=int)
    first, last = depths[keys[0]], depths[keys[-1]]
    out = {"depths": depths, "slowdown": timing.ratio(first["tok_s"], last["tok_s"])}
    if bw:  # the bandwidth cancels: the ratio of the bytes read per token
        out["slowdown_predicted"] = last["bytes_per_token"] / first["bytes_per_token"]
    model_bytes = int(rows[0].get("model_size", 0))
    if model_bytes:  # llama-bench's own model_size is the tensors' bytes
        check(
            abs(model_bytes - summary["tensor_bytes"]) <= 0.01 * summary["tensor_bytes"],
            f"llama-bench says {model_bytes:,} B of tensors, the file {summary['tensor_bytes']:,}",
        )
    return out


def main() -> None:
    parser = devices.arguments(__doc__)  # --device: cuda (all layers on the GPU) or cpu
    parser.add_argument(
        "--llama", help="llama.cpp folder made by llamakit/llama_build.sh (else $LLAMA_CPP_DIR)"
    )
    parser.add_argument("--gguf", default="gguf", help="folder of llama_gguf.py's files")
    parser.add_argument("--bench", default=BENCH, help="model:format pairs, comma-separated")
    parser.add_argument(
        "--depths", help=f"cached tokens before the timed ones (default {DEPTHS}; cpu {CPU_DEPTHS})"
    )
    parser.add_argument("--tokens", type=int, help="timed tokens per test (default 64; cpu 16)")
    parser.add_argument(
        "--repetitions", type=int, default=5, help="llama-bench's -r: timed runs of each test"
    )
    parser.add_argument(
        "--bandwidth", type=float, help="copy bandwidth in GB/s (else results/decode.json)"
    )
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    depths = args.depths or (DEPTHS if gpu else CPU_DEPTHS)
    n_gen = args.tokens or (64 if gpu else 16)
    folder = tools.llama_dir(args.llama)
    bench = tools.tool("llama-bench", folder)
    # the llama.cpp build (its number and commit), as llama-server (else llama-bench) prints it
    built = tools.describe_build(folder, "llama-server", "llama-bench")
    print(f"llama-bench: {tools.shown(bench)}\n{built['from']} --version: {built['version']}")
    bw, source = bandwidth(args.bandwidth, Path("results") / "decode.json")
    print(
        f"copy bandwidth: {float(bw) / 1e9:,.0f} GB/s ({source})"
        if bw
        else f"copy bandwidth: {source}"
    )
    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "device": args.device,
        "tiny": args.tiny,
        "copy_bandwidth": bw,
        "bandwidth_source": source,
        "llama_cpp": built,
        "n_gen": n_gen,
        "models": {},
    }
    peaks: list[int] = []
    for pair in args.bench.split(","):
        key, fmt = pair.strip().split(":")
        path = Path(args.gguf) / f"{key}{'-tiny' if args.tiny else ''}-{fmt}.gguf"
        check(
            path.exists(),
            f"{path} not found: make it with llama_gguf.py (--quants for other formats)",
        )
        summary = gguf.summary(path)
        cmd = [
            bench,
            "-m",
            str(path),
            "-ngl",
            "99" if gpu else "0",
            "-fa",
            "1",
            "-p",
            "0",
            "-n",
            str(n_gen),
            "-d",
            depths,
            "-r",
            str(args.repetitions),
            "-o",
            "json",
        ]
        t0 = time.perf_counter()
        with GpuMemory() as mem:
            out = subprocess.run(cmd, check=False, capture_output=True, text=True)
        secs = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            check(False, f"llama-bench failed (status {out.returncode}): {' '.join(cmd)}")
        rows = bench_json.parse(out.stdout)
        got = score(rows, summary, bw, gpu)
        name = f"{key}-{fmt}"
        per_token = gguf.kv_bytes_per_token(summary, "f16")
        row = {
            "file": str(path),
            "file_bytes": summary["file_bytes"],
            "tensor_bytes": summary["tensor_bytes"],
            "weight_bytes": summary["read_bytes_per_token"],
            "bytes_per_weight": summary["bytes_per_weight"],
            "kv_bytes_per_token": per_token,
            "seconds": secs,
            "gpu_memory": mem.result(),
            "build_commit": rows[0].get("build_commit"),
            "build_number": rows[0].get("build_number"),
            "backends": rows[0].get("backends"),
            "gpu_info": rows[0].get("gpu_info"),
            **got,
        }
        results["models"][name] = row
        for field in ("build_number", "build_commit"):  # llama-bench's JSON names them too
            if built[field] is None:
                built[field] = rows[0].get(field)
        if mem.peak is not None:
            peaks.append(mem.peak)
        print(
            f"\n{name}: {path.name} ({secs:.1f} s)\n"
            f"  weights read per token {human(row['weight_bytes'])}"
            f" ({summary['bits_per_weight']:.2f} bits per weight), KV {per_token:,.0f} B per token"
        )
        print(
            f"  {'depth':>8}  {'median':>12}  {'mean +- std (llama-bench), n':>30}"
            f"  {'bytes-bound':>14}  {'fraction':>8}"
        )
        for depth, e in got["depths"].items():
            bound = f"{float(e['bound_tok_s']):>8.1f} tok/s" if "bound_tok_s" in e else f"{'-':>14}"
            frac = f"{e['fraction'].median:>8.1%}" if "fraction" in e else f"{'-':>8}"
            mean = f"{e['avg_tok_s']:.1f} +- {e['stddev_tok_s']:.1f}, {e['repetitions']}"
            print(
                f"  {int(depth):>8,}  {e['tok_s'].median:>6.1f} tok/s  {mean:>30}"
                f"  {bound:>14}  {frac}"
            )
        if mem.peak is not None:
            print(f"  peak GPU memory in use (nvidia-smi, whole device): {human(mem.peak)}")
    results["peak_gpu_memory"] = max(peaks) if peaks else None
    results["seconds"] = time.perf_counter() - t_start
    path = write_results("llama_bench", results)
    print(f"\nwrote {path}; llama_bench.py wall time {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
