"""Helpers shared by the lab's scripts: model configs, byte arithmetic, printing, results, checks.

Only the standard library is imported at the top, so that size_on_paper.py runs anywhere.
The helpers that need PyTorch or transformers import them when they are called.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

LAB = Path(__file__).resolve().parent
# Key used in results/*.json -> folder under models/ (no dots in keys: the runner splits on them).
MODELS = {"qwen3-0_6b": "Qwen3-0.6B", "qwen3-8b": "Qwen3-8B"}
BF16_BYTES = 2


def load_config(folder: str) -> dict[str, Any]:
    """Read models/<folder>/config.json, the model's published Hugging Face config."""
    return json.loads((LAB / "models" / folder / "config.json").read_text())


def head_size(cfg: dict[str, Any]) -> int:
    """Numbers per head: `head_dim` when the config names it, else hidden size / query heads."""
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def kv_bytes_per_token(cfg: dict[str, Any], kv_heads: int | None = None) -> int:
    """2 (key and value) x layers x key-value heads x head size x bytes per number."""
    heads = cfg["num_key_value_heads"] if kv_heads is None else kv_heads
    return 2 * cfg["num_hidden_layers"] * heads * head_size(cfg) * BF16_BYTES


def human(n: float) -> str:
    """Bytes in binary units, the way memory is usually quoted: 448.0 MiB, 3.50 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}" if unit == "GiB" else f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write results/<name>.json (sorted keys, base units) atomically and return its path."""
    path = Path("results") / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def check(ok: bool, what: str) -> None:
    """Stop the script with a clear message when a measured number is not physically sensible."""
    if not ok:
        print(f"\nSANITY CHECK FAILED: {what}", file=sys.stderr)
        sys.exit(2)


# --- the helpers below need PyTorch -------------------------------------------------------


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """The two options every GPU script shares."""
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument(
        "--tiny", action="store_true", help="shrink the models so the script runs in seconds (tests)"
    )


def pick_device(name: str) -> Any:
    """The torch device to run on; stop with a hint when CUDA was asked for and is missing."""
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        check(False, "no CUDA GPU is visible; for a quick run on the CPU use --device cpu --tiny")
    return torch.device(name)


def describe(device: Any) -> str:
    """One line naming the device and the engine versions, printed first by every GPU script."""
    import torch
    import transformers

    what = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return (
        f"device: {device.type} ({what}); torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )


def tiny_config(cfg: dict[str, Any], vocab: int | None = 4096) -> dict[str, Any]:
    """A much smaller model of the same shape family, for runs on the CPU."""
    small = dict(cfg)
    small.update(
        num_hidden_layers=2,
        hidden_size=cfg["hidden_size"] // 16,
        intermediate_size=cfg["intermediate_size"] // 16,
        num_attention_heads=cfg["num_attention_heads"] // 4,
        num_key_value_heads=cfg["num_key_value_heads"] // 4,
        head_dim=16,
    )
    if vocab:
        small["vocab_size"] = vocab
    return small


def build_model(
    folder: str, device: Any, tiny: bool, weights: str | None = None, vocab: int | None = 4096
) -> tuple[Any, dict[str, Any], str]:
    """The model in bf16 on `device`: real weights when given, else random ones from config.json.

    With `tiny`, the model is shrunk and its vocabulary cut to `vocab` (None keeps it). Returns the model, its config as a plain dict, and a phrase saying which path ran.
    """
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.utils import logging

    # Keep version notes (e.g. past_key_values renamed to cache in newer releases) out of the output.
    logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    if weights:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16).to(device)
        how = f"real weights from {weights}"
    else:
        cfg = load_config(folder)
        cfg = tiny_config(cfg, vocab) if tiny else cfg
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
        how = "random bf16 weights from its config.json" + (", shrunk (--tiny)" if tiny else "")
    model.eval()
    keys = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size")
    cfg = {k: getattr(model.config, k) for k in keys}
    cfg.update(
        head_dim=getattr(model.config, "head_dim", None) or cfg["hidden_size"] // cfg["num_attention_heads"],
        max_position_embeddings=model.config.max_position_embeddings,
    )
    return model, cfg, how


def sync(device: Any) -> None:
    """Wait for the GPU to finish queued work, so a host clock measures it."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(
    fn: Callable[[Any], Any],
    device: Any,
    repeats: int = 5,
    setup: Callable[[], Any] = lambda: None,
    warmup: int = 1,
) -> float:
    """Median wall time of fn(setup()) over `repeats` runs after `warmup` untimed ones.

    setup() runs outside the timed region; the GPU is synchronised before and after fn.
    """
    times = []
    for i in range(warmup + repeats):
        arg = setup()
        sync(device)
        start = time.perf_counter()
        fn(arg)
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)
