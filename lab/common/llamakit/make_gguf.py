"""A Qwen3 GGUF file with random weights of the real shapes, written straight into llama.cpp's format.

The shapes come from the lab's models/<Name>/config.json; the matrices are random numbers in one
ggml format (Q8_0 by default: 32 numbers in 34 bytes, a scale and 32 small integers), the norms
ones, the vocabulary and chat template Qwen3's (llamakit/qwen3.py). No checkpoint is made and
nothing is converted: an 8 GB file is written in seconds by one process per core. Speeds, cache
sizes and token counts depend on the shapes and the vocabulary, not on the weights' values.

    python3 -m llamakit.make_gguf --model Qwen3-8B --type q8_0          # gguf/qwen3-8b-q8_0.gguf
    python3 -m llamakit.make_gguf --model Qwen3-8B --device cpu --tiny  # shrunk, for a CPU
    python3 -m llamakit.make_gguf --weights Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q8_0.gguf   # real weights

With --weights (a GGUF file, or REPO:FILE on the Hugging Face Hub, downloaded with huggingface_hub),
that file takes the random one's name in gguf/, so the later steps serve it unchanged.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.configs import load_config, tiny_config, weight_count
from labkit.results import key_of, write_results
from labkit.units import human

from . import gguf, gpu, qwen3

TYPES = {"f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0"}
# --tiny: two layers and narrow widths, Qwen's whole vocabulary (the tokenizer needs every row);
# every width a multiple of 32, so that Q8_0 and Q4_0 blocks and quantized caches fit
TINY = {"hidden_size": 128, "intermediate_size": 384, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32}  # fmt: skip


def model_config(models: Path, name: str, tiny: bool) -> dict[str, Any]:
    """models/<name>/config.json, shrunk with --tiny."""
    cfg = load_config(models / name / "config.json")
    return tiny_config(cfg, vocab=None, **TINY) if tiny else cfg


def file_name(name: str, fmt: str, tiny: bool) -> str:
    """qwen3-8b-q8_0.gguf, qwen3-8b-tiny-q8_0.gguf."""
    return f"{key_of(name)}{'-tiny' if tiny else ''}-{fmt}.gguf"


def fetch(weights: str) -> Path:
    """A real GGUF file: a local path, or REPO:FILE downloaded from the Hugging Face Hub."""
    if Path(weights).is_file():
        return Path(weights).resolve()
    repo, _, name = weights.partition(":")
    check(bool(name), f"--weights {weights}: give a GGUF file, or REPO:FILE on the Hub")
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo, name)).resolve()


def describe(path: Path) -> dict[str, Any]:
    """What the file holds, read back from the file itself."""
    s = gguf.summary(path)
    per_token = s["layers"] * s["kv_heads"] * (s["head_dim_k"] + s["head_dim_v"]) * 2
    return {k: s[k] for k in ("file_bytes", "tensor_bytes", "weights", "bytes_per_weight",
                              "bits_per_weight", "read_bytes_per_token", "layers", "kv_heads",
                              "head_dim_k", "bytes_by_type", "tied_embeddings")} | {
        "kv_bytes_per_token_f16": per_token}  # fmt: skip


def make(args: argparse.Namespace, cfg: dict[str, Any], fmt: str, path: Path) -> tuple[int, str]:
    """Write (or link, with --weights) the file; its size and where its weights came from."""
    if args.weights:
        real = fetch(args.weights)
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(real, path)
        return real.stat().st_size, f"real weights: {real}"
    vocab = qwen3.vocabulary(cfg["vocab_size"])
    meta = qwen3.metadata(cfg, fmt, f"{args.model} (random {args.type} weights)", vocab)
    tensors = qwen3.tensors(cfg, fmt, args.seed)
    workers = args.workers or min(os.cpu_count() or 1, 32)
    size = gguf.write_gguf(path, meta, tensors, workers)
    return size, f"random {fmt} weights (seed '{args.seed}'), {workers} writers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="Qwen3-8B", help="a folder under models/")
    parser.add_argument("--type", default="q8_0", choices=list(TYPES), help="the matrices' format")
    parser.add_argument("--out", default="gguf", help="folder for the file")
    parser.add_argument("--models", default="models", help="folder of the config.json files")
    parser.add_argument("--device", default="cuda", help="recorded only: the file is the same")
    parser.add_argument(
        "--tiny", action="store_true", help="shrink the model (the vocabulary stays)"
    )
    parser.add_argument("--seed", default="course", help="the random numbers' seed (a word)")
    parser.add_argument("--workers", type=int, help="processes writing tensors (default: cores)")
    parser.add_argument("--weights", help="a real GGUF file (or REPO:FILE on the Hub) instead")
    parser.add_argument("--name", default="gguf", help="results/<name>.json")
    args = parser.parse_args()
    cfg = model_config(Path(args.models), args.model, args.tiny)
    fmt = TYPES[args.type]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / file_name(args.model, args.type, args.tiny)
    t0 = time.perf_counter()
    print(
        f"{args.model}{' (shrunk, --tiny)' if args.tiny else ''}: {cfg['num_hidden_layers']} layers,"
        f" hidden {cfg['hidden_size']}, {cfg['num_attention_heads']} query heads and"
        f" {cfg['num_key_value_heads']} key-value\n  heads of {cfg.get('head_dim')},"
        f" vocabulary {cfg['vocab_size']:,}"
    )
    with gpu.GpuMemory() as mem:  # writing the file takes no GPU memory: the record says so
        size, source = make(args, cfg, fmt, path)
    seconds = time.perf_counter() - t0
    got = describe(path)
    print(f"  {path}: {human(size)} ({size:,} B) in {seconds:.1f} s\n  {source}")
    print(
        f"  {got['weights']:,} weights, {got['bytes_per_weight']:.4f} B each"
        f" ({got['bits_per_weight']:.2f} bits);\n  a decode step reads"
        f" {human(got['read_bytes_per_token'])} of them"
    )
    paper = qwen3.tensor_bytes(cfg, fmt)["bytes"]
    if not args.weights:
        check(
            got["weights"] == weight_count(cfg),
            f"the file holds {got['weights']:,} weights, config.json counts {weight_count(cfg):,}",
        )
        check(
            got["tensor_bytes"] == paper,
            f"the tensors take {got['tensor_bytes']:,} B, on paper {paper:,} B",
        )
        print(f"  the tensors' {got['tensor_bytes']:,} B equal the sum on paper")
    results = {
        "device": args.device,
        "tiny": args.tiny,
        "model": args.model,
        "type": args.type,
        "file": str(path),
        "random": not args.weights,
        "seconds": seconds,
        "tensor_bytes_paper": paper,
        "gpu_memory": mem.result(),
        "peak_gpu_memory": mem.result()["peak_used"],
        "config": {
            k: cfg[k]
            for k in (
                "num_hidden_layers",
                "hidden_size",
                "num_attention_heads",
                "num_key_value_heads",
                "vocab_size",
            )
        },  # fmt: skip
        **got,
    }
    print(gpu.report(results["gpu_memory"], "writing the file"))
    print(f"wrote {write_results(args.name, results)}")


if __name__ == "__main__":
    main()
