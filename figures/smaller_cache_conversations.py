"""How many 32K-token conversations each design's cache leaves room for by vLLM's rule, on one
H200 and on an RTX 4090, the 24 GB card.
"""

from __future__ import annotations

from typing import Any

DESIGNS = [
    ("mha", "multi-head", "#d62728"),
    ("gqa", "grouped-query", "#1f77b4"),
    ("gqa_fp8", "grouped-query, 8-bit", "#6baed6"),
    ("sliding", "sliding window", "#ff7f0e"),
    ("mla", "latent (MLA)", "#2ca02c"),
    ("mqa", "multi-query", "#9467bd"),
]


def draw(fig: Any, data: Any) -> None:
    """Two panels of horizontal bars, each with its own scale, the count written at each bar."""
    fig.set_size_inches(7.0, 3.6)
    h200_ax, card_ax = fig.subplots(1, 2, sharey=True)
    labels = [label for _, label, _ in DESIGNS]
    ys = list(range(len(DESIGNS)))[::-1]
    h200_gib = data.value("serving.h200_memory", unit="GiB")
    card_gib = data.value("serving.card_memory", unit="GiB")
    for ax, card, title in (
        (h200_ax, "h200", f"one H200 ({h200_gib:.2f} GiB to PyTorch)"),
        (card_ax, "24gb", f"an RTX 4090 ({card_gib:.2f} GiB to PyTorch)"),
    ):
        counts = [data.value(f"serving.conversations_{card}_{key}") for key, _, _ in DESIGNS]
        ax.barh(ys, counts, color=[c for _, _, c in DESIGNS], height=0.65)
        for y, n in zip(ys, counts, strict=True):
            ax.text(n, y, f" {n:.0f}", va="center", ha="left", fontsize=9)
        ax.set_xlim(0, max(counts) * 1.18)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("conversations of 32K tokens")
        ax.grid(alpha=0.3, axis="x")
    h200_ax.set_yticks(ys)
    h200_ax.set_yticklabels(labels, fontsize=9)
