"""Helpers shared by the lab's scripts: model configs, byte arithmetic, printing, results, checks.

Only the standard library is imported at the top, so that size_on_paper.py runs anywhere.
The helpers that need PyTorch or transformers import them when they are called.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LAB = Path(__file__).resolve().parent
# Key used in results/*.json -> folder under models/ (no dots in keys: the runner splits on them).
MODELS = {"qwen3-0_6b": "Qwen3-0.6B", "qwen3-8b": "Qwen3-8B"}
BF16_BYTES = 2
# Bytes per number for the names config.json files use in `torch_dtype` (or `dtype`, newer files).
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "fp8": 1,
}


def load_config(folder: str) -> dict[str, Any]:
    """Read models/<folder>/config.json, the model's published Hugging Face config."""
    return json.loads((LAB / "models" / folder / "config.json").read_text())


def model_key(name: str) -> str:
    """The results key of a model name or path: 'Qwen/Qwen3-0.6B' -> 'qwen3-0_6b'."""
    last = name.rstrip("/").rsplit("/", 1)[-1] or name
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in last.lower())


def text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config: a multimodal config nests it under `text_config`."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        return {**cfg, **cfg["text_config"]}
    return cfg


def count_kv_heads(cfg: dict[str, Any]) -> int:
    """Key-value heads: `num_key_value_heads`, or one per query head when the config has none
    (multi-head attention, as in Llama-2-7B or GPT-2)."""
    return int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])


def head_size(cfg: dict[str, Any]) -> int:
    """Numbers per head: `head_dim` when the config names it, else hidden size / query heads."""
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def is_latent(cfg: dict[str, Any]) -> bool:
    """Latent attention (DeepSeek's MLA): the config names a `kv_lora_rank`."""
    return bool(cfg.get("kv_lora_rank"))


def number_bytes(cfg: dict[str, Any]) -> tuple[int, str]:
    """Bytes per number from `torch_dtype` (or `dtype`), and the name read; bf16 when absent."""
    name = str(cfg.get("torch_dtype") or cfg.get("dtype") or "").removeprefix("torch.")
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name], name
    return BF16_BYTES, ""


def kv_bytes_per_token(
    cfg: dict[str, Any], kv_heads: int | None = None, nbytes: int = BF16_BYTES
) -> int:
    """Bytes the cache keeps per token, with `nbytes` bytes per number.

    Grouped-query or multi-head attention: 2 (key and value) x layers x key-value heads x head
    size. Latent attention (MLA): layers x (kv_lora_rank + qk_rope_head_dim), one compressed
    vector per token and layer from which every head's key and value are rebuilt.
    """
    if is_latent(cfg):
        return cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * nbytes
    heads = count_kv_heads(cfg) if kv_heads is None else kv_heads
    return 2 * cfg["num_hidden_layers"] * heads * head_size(cfg) * nbytes


def mla_uncompressed_bytes_per_token(cfg: dict[str, Any], nbytes: int = BF16_BYTES) -> int:
    """What a latent-attention model would keep without the compression: every query head its
    own key (qk_nope_head_dim + qk_rope_head_dim numbers) and value (v_head_dim numbers)."""
    key = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    return (
        cfg["num_hidden_layers"] * cfg["num_attention_heads"] * (key + cfg["v_head_dim"]) * nbytes
    )


def weight_bytes_on_paper(cfg: dict[str, Any], nbytes: int = BF16_BYTES) -> int:
    """The bytes of a Qwen3 model's weights from its shapes alone (the steps' memory on paper)."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * head_size(cfg), count_kv_heads(cfg) * head_size(cfg)
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h + 2 * head_size(cfg)
    tables = (1 if cfg.get("tie_word_embeddings") else 2) * cfg["vocab_size"] * h
    return (layers * per_layer + tables + h) * nbytes


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

GIB = 2**30
LIMIT_24GB = 22 * GIB  # what a step with a fixed need may peak at, to fit a rented 24 GB card
LEFT_AFTER_FREE = 512 * 2**20  # more than this still allocated after freeing a model is a leak


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """The options every GPU script shares."""
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="shrink the models so the script runs in seconds (tests)",
    )
    parser.add_argument(
        "--weights",
        help="real weights: a Hugging Face model id (Qwen/Qwen3-0.6B) or a local folder;"
        " the run then covers that one model",
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

    `weights` is a Hugging Face model id or a local folder, loaded with from_pretrained (ids
    through huggingface_hub and its cache: HF_HOME, HF_HUB_OFFLINE). Otherwise the model is
    built from models/<folder>/config.json; with `tiny` it is shrunk and its vocabulary cut to
    `vocab` (None keeps it). Returns the model, its shapes as a plain dict, and a phrase saying
    which path ran.
    """
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.utils import logging

    # Keep version notes (e.g. past_key_values renamed to cache in newer releases) out of the output.
    logging.set_verbosity_error()
    logging.disable_progress_bar()  # the loading bars would clutter the recorded output
    warnings.filterwarnings("ignore", category=FutureWarning)
    if weights:
        # Loaded in host memory first, then moved: device_map would need the accelerate package.
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16).to(device)
        how = f"real weights from {weights}"
    else:
        cfg = load_config(folder)
        cfg = tiny_config(cfg, vocab) if tiny else cfg
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
        how = "random bf16 weights from its config.json" + (", shrunk (--tiny)" if tiny else "")
    model.eval()
    c = model.config
    keys = (
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
    )
    shapes = {k: getattr(c, k) for k in keys}
    shapes.update(
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        tie_word_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
    )
    return model, shapes, how


def model_name(folder: str, weights: str | None) -> str:
    """The name a script prints for its model: the weights' id or folder, else the config's folder."""
    return weights.rstrip("/") if weights else folder


class GpuMemory:
    """The peak GPU memory of one step: PyTorch's peak counters reset at its start, read at its end.

    `allocated` counts the bytes in tensors at the worst moment; `reserved` the bytes PyTorch's
    allocator held from the GPU then, which is what must fit on the card (with the CUDA context,
    a few hundred MiB, besides). On the CPU both stay 0: no GPU memory is used.
    """

    def __init__(self, device: Any) -> None:
        import torch

        self.device, self.cuda = device, device.type == "cuda"
        self.allocated = self.reserved = 0
        self.start = time.perf_counter()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)

    def phase(self) -> tuple[int, int]:
        """The peaks since the last call (or the start), folded into the step's; counters reset."""
        import torch

        if not self.cuda:
            return 0, 0
        torch.cuda.synchronize(self.device)
        got = (
            torch.cuda.max_memory_allocated(self.device),
            torch.cuda.max_memory_reserved(self.device),
        )
        self.allocated, self.reserved = max(self.allocated, got[0]), max(self.reserved, got[1])
        torch.cuda.reset_peak_memory_stats(self.device)
        return got

    def report(self, paper: int, what: str, sized_to_card: str = "") -> dict[str, Any]:
        """Print the step's peak beside the estimate on paper, and its time; return both for the JSON.

        `sized_to_card` is the sentence saying how a step that fills the card sizes itself.
        """
        self.phase()
        seconds = time.perf_counter() - self.start
        print(f"\npeak GPU memory of this step, on paper: {paper:,} B ({human(paper)}) = {what}")
        if self.cuda:
            print(
                f"  measured: {self.allocated:,} B allocated ({human(self.allocated)}),"
                f" {self.reserved:,} B reserved ({human(self.reserved)})"
            )
        else:
            print(
                "  measured: none, this run used the CPU (the sum above is for these shrunk sizes)"
            )
        if sized_to_card:
            print(f"  {sized_to_card}")
        else:
            fits = max(self.reserved, paper) < LIMIT_24GB
            print(
                f"  a 24 GB card leaves about {human(LIMIT_24GB)} to PyTorch:"
                f" {'fits' if fits else 'does NOT fit'}"
            )
        print(f"time of this step: {seconds:.1f} s (after Python's imports)")
        return {
            "allocated": self.allocated,
            "reserved": self.reserved,
            "paper": paper,
            "sized_to_card": bool(sized_to_card),
            "seconds": seconds,
        }


def release(device: Any, what: str, *refs: Any) -> int:
    """Free a model that is no longer used; return the bytes still allocated on the GPU after it.

    `refs` are weak references to the objects that must be gone. Anything left is a leak that
    would add to the next model's peak, so it is reported (as a warning: the numbers measured so
    far are still good).
    """
    import torch

    gc.collect()
    if any(r() is not None for r in refs):
        print(f"  WARNING: {what} is still referenced after it was freed")
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    left = torch.cuda.memory_allocated(device)
    print(f"  freed {what}: {left:,} B ({human(left)}) left allocated")
    if left >= LEFT_AFTER_FREE:
        print(f"  WARNING: {human(left)} still allocated after freeing {what}: a leak")
    return left


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
