"""Helpers shared by the lab's scripts: configs, cards, byte arithmetic, printing, results, checks.

Standard library only, so that paper.py runs anywhere; serving.py holds the helpers that
need PyTorch and transformers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

LAB = Path(__file__).resolve().parent
# Key used in results/*.json -> folder under models/ (no dots in keys: the runner splits on them).
MODELS = {"qwen3-8b": "Qwen3-8B", "qwen3-0_6b": "Qwen3-0.6B"}
# Conversation lengths the lab counts, by label: 8K, 32K and the models' full context.
CONTEXTS = {"8k": 8_192, "32k": 32_768, "full": 40_960}
BF16_BYTES = 2
GIB = 2**30
MIB = 2**20


def load_config(folder: str) -> dict[str, Any]:
    """Read models/<folder>/config.json, the model's published Hugging Face config."""
    data: dict[str, Any] = json.loads((LAB / "models" / folder / "config.json").read_text())
    return data


def weight_bytes(cfg: dict[str, Any], number_bytes: int = BF16_BYTES) -> int:
    """Bytes of a Qwen3 model's weights, counted from its config.json."""
    hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    head = int(cfg.get("head_dim") or hidden // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * head, cfg["num_key_value_heads"] * head
    per_layer = (
        hidden * q * 2  # query and output projections
        + hidden * kv * 2  # key and value projections
        + head * 2  # query and key norms (Qwen3 normalises each head)
        + hidden * cfg["intermediate_size"] * 3  # gate, up and down projections
        + hidden * 2  # the two layer norms
    )
    embeddings = cfg["vocab_size"] * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return (layers * per_layer + embeddings + hidden) * number_bytes  # + the final norm


def load_cards() -> dict[str, Any]:
    """cards.json: the cards the lab budgets on paper, and their dated prices."""
    data: dict[str, Any] = json.loads((LAB / "cards.json").read_text())
    return data


def load_crosscheck() -> dict[str, Any]:
    """crosscheck.json: a published vLLM start-up log, as data."""
    data: dict[str, Any] = json.loads((LAB / "crosscheck.json").read_text())
    return data


def fraction_key(fraction: float) -> str:
    """A memory fraction as a key without a dot: 0.9 -> 'f90'."""
    return f"f{round(fraction * 100):02d}"


def human(n: float) -> str:
    """Bytes in binary units, the way memory is usually quoted: 448.0 MiB, 3.50 GiB."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}" if unit == "GiB" else f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def row(label: str, value: int, width: int = 68) -> str:
    """One line of a budget: a label, the bytes, the same in binary units."""
    return f"  {label:<{width}} {value:>17,} B {human(abs(value)):>11}"


def write_results(name: str, data: dict[str, Any]) -> Path:
    """Write results/<name>.json (sorted keys, base units) atomically and return its path."""
    path = Path("results") / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def check(ok: bool, what: str) -> None:
    """Stop the script with a clear message when a number is not physically sensible."""
    if not ok:
        print(f"\nSANITY CHECK FAILED: {what}", file=sys.stderr)
        sys.exit(2)


class Clock:
    """The wall time of a step, printed at its end."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        """Seconds since the step started."""
        return time.perf_counter() - self.start
