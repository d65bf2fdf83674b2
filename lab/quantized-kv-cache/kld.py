"""Step 5: how far a quantized cache moves the model's output, as llama-perplexity measures it.

llama-perplexity reads one fixed text (text.py writes it: a made-up maintenance log) in chunks
of 2,048 tokens, and scores the second half of each chunk: for every token, the probability the
model gave it. The base run keeps its keys and values in f16 and saves every scored token's
probabilities (`--kl-divergence-base base.kld`); each later run reads the same tokens with
another cache and compares its probabilities with the saved ones token by token
(`--kl-divergence`): the Kullback-Leibler divergence (0 when the two distributions agree), the
share of tokens whose most likely next token stayed the same, and the perplexity.

    llama-perplexity -m gguf/qwen3-8b-q8_0.gguf -f results/text.txt -c 2048 --chunks 4 -ngl 99 \
        -fa on -ctk f16 -ctv f16 --kl-divergence-base base.kld
    llama-perplexity -m gguf/qwen3-8b-q8_0.gguf -c 2048 --chunks 4 -ngl 99 -fa on \
        -ctk q4_0 -ctv q4_0 --kl-divergence-base base.kld --kl-divergence

Runs: f16 again (the measurement's floor: the same cache gives zero, or as good as), q8_0, q4_0, and q4_0
with llama.cpp's rotation of keys and values turned off (LLAMA_ATTN_ROT_DISABLE=1). With random
weights the text means nothing to the model: this measures how much each cache distorts the
logits of this network, not how much worse it would answer questions.

    python3 kld.py --gguf gguf/qwen3-8b-q8_0.gguf
    python3 kld.py --gguf gguf/qwen3-8b-tiny-q8_0.gguf --device cpu --tiny
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cache_sizes import arguments, gpu_args
from labkit.checks import check
from labkit.results import write_results
from llamakit import gpu, perplexity, tools
from text import write_text

RUNS = {"f16": ("f16", False), "q8_0": ("q8_0", False), "q4_0": ("q4_0", False),
        "q4_0_norot": ("q4_0", True)}  # fmt: skip


def run(binary: str, args: list[str], env: dict[str, str] | None = None) -> str:
    """One llama-perplexity run; everything it printed."""
    out = subprocess.run([binary, *args], check=False, capture_output=True, text=True, env=env)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        print(text[-3000:], file=sys.stderr)
        check(False, f"llama-perplexity failed (status {out.returncode}): {' '.join(args)}")
    return text


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--ctx", type=int, help="tokens per chunk (default 2,048; cpu 256)")
    parser.add_argument("--chunks", type=int, default=4, help="chunks scored")
    parser.add_argument("--keep", action="store_true", help="keep base.kld (about 1 GB)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    binary = tools.tool("llama-perplexity", tools.llama_dir(args.llama))
    ctx = args.ctx or (2048 if args.device.startswith("cuda") else 256)
    text = write_text(Path("results") / "text.txt", ctx * args.chunks + 64)
    base_file = Path("base.kld")
    common = ["-m", args.gguf, "-c", str(ctx), "--chunks", str(args.chunks),
              *gpu_args(args.device), "-fa", "on"]  # fmt: skip
    mems = []
    with gpu.GpuMemory() as mem:
        base_out = run(binary, [*common, "-f", str(text), "-ctk", "f16", "-ctv", "f16",
                                "--kl-divergence-base", str(base_file)])  # fmt: skip
    mems.append(mem.result())
    base = perplexity.parse(base_out)
    check("ppl" in base, "the base run printed no 'Final estimate: PPL'")
    print(f"base: f16 cache, {base.get('chunks')} chunks of {base.get('n_ctx')} tokens;"
          f" perplexity {base['ppl']['value']:,.1f}")  # fmt: skip
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "ctx": ctx,
                               "chunks": base.get("chunks"),
                               "scored": (base.get("chunks") or 0) * (ctx - 1 - ctx // 2),
                               "base": base, "runs": {}}  # fmt: skip
    print(f"  {'cache':<12} {'mean KLD':>10} {'99% KLD':>10} {'max KLD':>10} {'same top':>9}"
          f" {'PPL ratio':>10}")  # fmt: skip
    for name, (t, norot) in RUNS.items():
        env = dict(os.environ, LLAMA_ATTN_ROT_DISABLE="1") if norot else None
        with gpu.GpuMemory() as mem:
            out = run(binary, [*common, "-ctk", t, "-ctv", t, "--kl-divergence-base",
                               str(base_file), "--kl-divergence"], env)  # fmt: skip
        mems.append(mem.result())
        got = perplexity.kld(out)
        got["rotation_off"] = norot
        results["runs"][name] = got
        label = f"{t}{' no rot.' if norot else ''}"
        print(f"  {label:<12} {got['kld_mean']['value']:>10.6f} {got['kld_p99']['value']:>10.6f}"
              f" {got['kld_max']['value']:>10.6f} {got['same_top']['value']:>8.2%}"
              f" {got['ppl_q']['value'] / got['ppl_base']['value']:>10.5f}")  # fmt: skip
    floor = results["runs"]["f16"]["kld_mean"]["value"]
    q8 = results["runs"]["q8_0"]["kld_mean"]["value"]
    check(floor <= q8, f"f16 against its own base gave a mean KLD of {floor}, q8_0 only {q8}:"
          " the measurement's floor is above what it measures")  # fmt: skip
    if not args.keep:
        base_file.unlink(missing_ok=True)
    results["seconds"] = time.perf_counter() - t_start
    print(gpu.record(results, gpu.worst(mems), "llama-perplexity"))
    print(f"wrote {write_results('kld', results)}; kld.py took {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
