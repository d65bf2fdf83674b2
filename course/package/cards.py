"""Datasheet figures of GPUs people rent, for the expectation of a run on another card.

The figures live in the course's facts (lab/common/labkit/facts.toml, `cards.*`); this module
turns them into the table the lesson zip's expected.json carries (with each figure's source),
by which the zip's compare.py (`compare_lab.py`) scales the page's values: decode speeds by
memory bandwidth, prefill by dense bf16 tensor FLOP/s, what fills the card by its memory.

`match` are the words that must all appear in the upper-cased name nvidia-smi prints ("NVIDIA
GeForce RTX 4090", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"), `avoid`
the words that must not: the first row that fits is the card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..lab.facts import Card, load_facts


def _row(card: Card) -> dict[str, Any]:
    bw, flops, memory = card.bandwidth, card.bf16_flops, card.memory
    note = f" ({flops.note})" if flops.note else ""
    source = (
        f"NVIDIA datasheet: {bw.value:g} {bw.unit}, dense BF16 tensor {flops.value:g} TFLOP/s"
        f"{note}, {memory.value:g} GB ({bw.source}, read {bw.date.isoformat()})"
    )
    scale = {"GB/s": 1.0, "TB/s": 1e3}[bw.unit]
    return {
        "name": card.label,
        "bandwidth_gb_s": round(bw.value * scale, 6),
        "bf16_tflops": flops.value,
        "memory_gb": memory.value,
        "source": source,
        "match": list(card.match),
        "avoid": list(card.avoid),
    }


def rental_cards(root: Path) -> list[dict[str, Any]]:
    """The table of cards, in the facts file's order: memory bandwidth (GB/s), dense bf16 tensor
    TFLOP/s and memory (GB) as the datasheet prints them (the cards report about as many GiB:
    nvidia-smi says 24,564 MiB on an RTX 4090, 143,771 on an H200), with match and avoid."""
    return [_row(card) for card in load_facts(root).cards.values()]
