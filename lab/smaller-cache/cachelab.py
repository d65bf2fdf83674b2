"""Helpers shared by the lab's scripts: reading configs, the byte arithmetic of each way of
keeping keys and values, printing, results and checks.

Only the standard library is imported at the top, so that configs.py and serving.py run
anywhere. The helpers that need PyTorch import it when they are called.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

LAB = Path(__file__).resolve().parent
MODELS = LAB / "models"
BF16_BYTES = 2
CONVERSATION = 32_768  # the conversation the lesson sizes everything for
LONG_CONVERSATION = 131_072
H200_USABLE = 139 * 2**30  # what one H200 offers to PyTorch
CARD_24GB = 24 * 2**30  # a 24 GB consumer card (24 GiB, as such cards report)

# Fields a published config leaves out, with the value transformers (5.17) gives them.
DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"sliding_window_pattern": 6, "max_position_embeddings": 131_072},
}


def key_of(name: str) -> str:
    """A model or design name as a results key: lowercase, no dots (the runner splits on them)."""
    return name.lower().replace(".", "_").replace("-", "_")


# --- published configs ---------------------------------------------------------------------


def model_names() -> list[str]:
    """The models shipped under models/, oldest release first."""
    releases = json.loads((MODELS / "releases.json").read_text())
    return sorted(releases, key=lambda name: (releases[name]["release"], name))


def release_of(name: str) -> str:
    """The model's release month, YYYY-MM, from models/releases.json."""
    return str(json.loads((MODELS / "releases.json").read_text())[name]["release"])


def load_config(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A config.json with the text model's fields on top, and the defaults it needed filled in.

    Multimodal configs (Gemma 3) keep the language model under `text_config`; its fields win.
    Returns the fields and a note for each default that was used.
    """
    raw = json.loads(path.read_text())
    cfg = {k: v for k, v in raw.items() if k != "text_config"} | raw.get("text_config", {})
    notes = []
    for field, value in DEFAULTS.get(str(cfg.get("model_type")), {}).items():
        if field not in cfg:
            cfg[field] = value
            notes.append(f"{field} not in the file: transformers' default {value:,} used")
    return cfg, notes


@dataclass(frozen=True)
class Layout:
    """What one model keeps per token: enough to work out its cache for any conversation."""

    kind: str  # MHA, GQA, MQA or MLA
    layers: int
    query_heads: int
    kv_heads: int  # key-value heads (MLA: the one latent, shared by every head)
    head_dim: int  # numbers per key and per value (MLA: the width of the latent)
    key_dim: int  # numbers per query-key product per head, before any compression
    value_dim: int
    window: int | None = None  # tokens a sliding-window layer keeps
    window_layers: int = 0
    number_bytes: int = BF16_BYTES
    scale_bytes: int = 0  # per stored vector, for a quantised cache

    @property
    def full_layers(self) -> int:
        """Layers that keep every token of the conversation."""
        return self.layers - self.window_layers

    def layer_bytes(self) -> int:
        """Bytes one layer keeps for one token."""
        vectors = 1 if self.kind == "MLA" else 2 * self.kv_heads  # MLA: one latent, else K and V
        return vectors * (self.head_dim * self.number_bytes + self.scale_bytes)

    def bytes_per_token(self) -> int:
        """Bytes per token while the conversation is shorter than any window: every layer."""
        return self.layers * self.layer_bytes()

    def bytes_per_token_mha(self) -> int:
        """The same model with one key and one value per query head, uncompressed, 16-bit."""
        return self.layers * self.query_heads * (self.key_dim + self.value_dim) * BF16_BYTES

    def cache_bytes(self, tokens: int) -> int:
        """The cache of one conversation of `tokens` tokens; window layers hold at most the window."""
        kept = min(tokens, self.window) if self.window else tokens
        return (self.full_layers * tokens + self.window_layers * kept) * self.layer_bytes()


def window_layers(cfg: dict[str, Any]) -> tuple[int | None, int, str]:
    """The sliding window, how many layers use it, and which config field said so."""
    window, layers = cfg.get("sliding_window"), cfg["num_hidden_layers"]
    if not window or cfg.get("use_sliding_window") is False:
        return None, 0, "no sliding window"
    if "layer_types" in cfg:
        count = sum(t == "sliding_attention" for t in cfg["layer_types"])
        return window, count, "layer_types"
    if "sliding_window_pattern" in cfg:  # Gemma 3: every n-th layer is global, the rest local
        n = cfg["sliding_window_pattern"]
        return window, sum(bool((i + 1) % n) for i in range(layers)), f"sliding_window_pattern {n}"
    if cfg.get("model_type") == "gemma2":  # Gemma 2: local and global layers alternate
        return window, sum(bool((i + 1) % 2) for i in range(layers)), "Gemma 2 alternates"
    return window, layers, "sliding_window on every layer"


def layout_of(cfg: dict[str, Any]) -> Layout:
    """The cache layout a published config describes."""
    layers, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    if cfg.get("kv_lora_rank"):
        nope, rope = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
        return Layout(
            "MLA", layers, heads, 1, cfg["kv_lora_rank"] + rope, nope + rope, cfg["v_head_dim"]
        )
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    kind = "MHA" if kv == heads else "MQA" if kv == 1 else "GQA"
    window, count, _ = window_layers(cfg)
    return Layout(kind, layers, heads, kv, head_dim, head_dim, head_dim, window, count)


# --- the five designs of one model ---------------------------------------------------------


@dataclass(frozen=True)
class Design:
    """One ~8B decoder with one way of keeping its keys and values."""

    name: str  # mha, gqa, mqa, mla, sliding
    layers: int
    hidden: int
    heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float
    eps: float
    kv_heads: int = 0
    kv_lora_rank: int = 0  # MLA: width of the compressed latent
    rope_dim: int = 0  # MLA: the part of each key that carries the position
    window: int | None = None  # sliding: tokens kept by the window layers

    def is_window_layer(self, layer: int) -> bool:
        """Sliding design: even layers are local (window), odd layers global, as in Gemma 2."""
        return self.window is not None and layer % 2 == 0

    def layout(self) -> Layout:
        """The cache layout of this design."""
        if self.name == "mla":
            return Layout(
                "MLA",
                self.layers,
                self.heads,
                1,
                self.kv_lora_rank + self.rope_dim,
                self.head_dim + self.rope_dim,
                self.head_dim,
            )
        kind = "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"
        count = sum(self.is_window_layer(i) for i in range(self.layers))
        return Layout(
            kind,
            self.layers,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.head_dim,
            self.head_dim,
            self.window,
            count,
        )

    def attention_params(self) -> int:
        """Numbers in one layer's attention weights (projections and norms)."""
        h, q, d = self.hidden, self.heads, self.head_dim
        if self.name == "mla":
            r, rope = self.kv_lora_rank, self.rope_dim
            return q * (d + rope) * h + (r + rope) * h + r + q * (d + d) * r + h * q * d
        return (q + 2 * self.kv_heads) * d * h + h * q * d

    def weight_bytes(self) -> int:
        """Bytes of all weights in bf16, the embedding table included."""
        per_layer = self.attention_params() + 3 * self.hidden * self.intermediate + 2 * self.hidden
        return (self.layers * per_layer + 2 * self.vocab * self.hidden + self.hidden) * BF16_BYTES

    def weight_bytes_read(self) -> int:
        """Bytes of weights one decode step reads: all but the embedding table (one row of it)."""
        return self.weight_bytes() - self.vocab * self.hidden * BF16_BYTES


DESIGN_NAMES = ["mha", "gqa", "mqa", "mla", "sliding"]
DESCRIPTIONS = {
    "mha": "multi-head: one key and one value per query head",
    "gqa": "grouped-query: each key-value head serves a group of query heads",
    "mqa": "multi-query: every query head shares one key-value head",
    "mla": "latent (MLA): one compressed latent per token, projections absorbed",
    "sliding": "sliding window on alternating layers, grouped-query otherwise",
    "gqa_fp8": "grouped-query, cache stored as float8 with a scale per head and token",
}


def designs(tiny: bool) -> list[Design]:
    """The five designs, with Qwen3-8B's sizes read from its config (or a shrunken copy)."""
    cfg, _ = load_config(MODELS / "Qwen3-8B" / "config.json")
    if tiny:
        base = Design("", 4, 128, 4, 32, 256, 512, cfg["rope_theta"], cfg["rms_norm_eps"])
        kv, rank, rope, window = {"mha": 4, "gqa": 2, "mqa": 1}, 32, 16, 8
    else:
        base = Design(
            "",
            cfg["num_hidden_layers"],
            cfg["hidden_size"],
            cfg["num_attention_heads"],
            cfg["head_dim"],
            cfg["intermediate_size"],
            cfg["vocab_size"],
            cfg["rope_theta"],
            cfg["rms_norm_eps"],
        )
        kv, rank, rope, window = (
            {"mha": base.heads, "gqa": cfg["num_key_value_heads"], "mqa": 1},
            512,
            64,
            4096,
        )
    return [
        replace(base, name="mha", kv_heads=kv["mha"]),
        replace(base, name="gqa", kv_heads=kv["gqa"]),
        replace(base, name="mqa", kv_heads=kv["mqa"]),
        replace(base, name="mla", kv_lora_rank=rank, rope_dim=rope),
        replace(base, name="sliding", kv_heads=kv["gqa"], window=window),
    ]


def fp8_layout(design: Design) -> Layout:
    """The design's cache stored in 8 bits, with one float32 scale per head and token."""
    return replace(design.layout(), number_bytes=1, scale_bytes=4)


# --- printing, results, checks -------------------------------------------------------------


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


def read_results(name: str) -> dict[str, Any] | None:
    """results/<name>.json as written by an earlier step, or None when that step has not run."""
    path = Path("results") / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def check(ok: bool, what: str) -> None:
    """Stop the script with a clear message when a number is not physically sensible."""
    if not ok:
        print(f"\nSANITY CHECK FAILED: {what}", file=sys.stderr)
        sys.exit(2)


class Stopwatch:
    """Wall time of the whole step, printed at the end."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        """Seconds since the step started."""
        return time.perf_counter() - self.start


# --- the helpers below need PyTorch --------------------------------------------------------


def add_device_args(parser: argparse.ArgumentParser) -> None:
    """The two options every GPU script shares."""
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument(
        "--tiny", action="store_true", help="shrink the model so the script runs in seconds (tests)"
    )


def pick_device(name: str, tiny: bool) -> Any:
    """The torch device to run on; stop with a hint when CUDA was asked for and is missing."""
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        check(False, "no CUDA GPU is visible; for a quick run on the CPU use --device cpu --tiny")
    if tiny and name == "cpu":
        torch.set_num_threads(1)  # a tiny model gains nothing from threads that wait on each other
    return torch.device(name)


def describe(device: Any) -> str:
    """One line naming the device and PyTorch's version, printed first by every GPU script."""
    import torch

    what = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return f"device: {device.type} ({what}); torch {torch.__version__}"


def sync(device: Any) -> None:
    """Wait for the GPU to finish queued work, so a host clock measures it."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PeakMemory:
    """The peak GPU memory of a whole step, kept across the resets that measure its parts."""

    def __init__(self, device: Any) -> None:
        import torch

        self.device, self.allocated, self.reserved = device, 0, 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def reset(self) -> None:
        """Fold the peak so far into the step's peak, then start counting a new part afresh."""
        import torch

        if self.device.type == "cuda":
            self.fold()
            torch.cuda.reset_peak_memory_stats(self.device)

    def fold(self) -> dict[str, int]:
        """The step's peak so far: bytes handed to tensors and bytes the allocator took."""
        import torch

        if self.device.type == "cuda":
            self.allocated = max(self.allocated, torch.cuda.max_memory_allocated(self.device))
            self.reserved = max(self.reserved, torch.cuda.max_memory_reserved(self.device))
        return {"allocated": self.allocated, "reserved": self.reserved}

    def part(self) -> dict[str, int]:
        """The peak since the last reset (zeros on the CPU)."""
        import torch

        if self.device.type != "cuda":
            return {"allocated": 0, "reserved": 0}
        return {
            "allocated": torch.cuda.max_memory_allocated(self.device),
            "reserved": torch.cuda.max_memory_reserved(self.device),
        }


def allocated(device: Any) -> int:
    """Bytes the allocator has handed to tensors now (0 on the CPU, which has no counter)."""
    import torch

    if device.type != "cuda":
        return 0
    sync(device)
    return int(torch.cuda.memory_allocated(device))


def outside_bytes(device: Any) -> int:
    """GPU memory in use outside PyTorch's allocator: the CUDA context and libraries."""
    import torch

    if device.type != "cuda":
        return 0
    free, total = torch.cuda.mem_get_info(device)
    return int(total - free - torch.cuda.memory_reserved(device))


# What a freed part may leave allocated: a few small tensors, rounded up by the allocator. One
# leftover cuBLAS workspace alone (32 MiB on an H100 or H200) is far above it.
LEFT_TOLERANCE = 2**21


def release_memory(device: Any) -> None:
    """Free what nothing references any more, cuBLAS's workspaces included, and give it back.

    cuBLAS keeps a workspace for every stream it has run on (32 MiB on a Hopper GPU, plus a
    smaller one for cuBLASLt), taken from PyTorch's allocator and kept until cleared, so it
    counts as allocated memory. Call this only once no CUDA graph that used them is left.
    """
    import gc

    import torch

    gc.collect()  # a decoder refers to itself through its compiled methods: a reference cycle
    if device.type == "cuda":
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()
        torch.cuda.empty_cache()


def check_freed(device: Any, before: int, what: str, gone: list[Callable[[], Any]]) -> int:
    """Free a finished part and stop unless it is all gone; the bytes it left allocated.

    `gone` holds weak references to the part's objects: none may still be referenced (this
    holds on the CPU too). On a GPU the allocated bytes must come back to `before`, what was
    allocated when the part began, within LEFT_TOLERANCE; otherwise the next part's peak would
    count the leftover as its own.
    """
    release_memory(device)
    kept = sum(ref() is not None for ref in gone)
    check(
        kept == 0,
        f"{what}: {kept} of its objects (decoder, weights) are still referenced after it was"
        " freed: a list, a dict, a closure or a compiled function keeps them",
    )
    left = allocated(device) - before
    check(
        abs(left) <= LEFT_TOLERANCE,
        f"{what}: once freed, {left:+,} B allocated against before it began (at most"
        f" {LEFT_TOLERANCE:,} B either way): something keeps GPU memory from one part to the next"
        " (CUDA graphs, cuBLAS workspaces of extra streams, cached tensors)",
    )
    return left


def free_bytes(device: Any) -> int | None:
    """GPU memory free now, counting what PyTorch holds but does not use; None on the CPU."""
    import torch

    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()
    return int(torch.cuda.mem_get_info(device)[0])


def copy_bandwidth(device: Any, nbytes: int) -> float:
    """Bytes read plus bytes written per second by a large device-to-device copy."""
    import torch

    def measure() -> float:
        src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=device)
        dst = torch.empty_like(src)
        return time_calls(lambda: dst.copy_(src), device, calls=10, repeats=5)

    seconds = measure()
    if device.type == "cuda":
        torch.cuda.empty_cache()  # give the two buffers back before anything else is measured
    return 2 * nbytes / seconds


def time_calls(fn: Callable[[], Any], device: Any, calls: int, repeats: int) -> float:
    """Seconds per call of fn: the median over `repeats` runs of `calls` calls, after one warm run."""
    times = []
    for i in range(repeats + 1):
        sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        if i:
            times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)
