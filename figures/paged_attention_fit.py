"""Requests of the mix that fit at once in Qwen3-8B's cache on an RTX 4090 and on an H200 (the
cache each card leaves under transformers' rule), by how the cache is handed out: one reservation
of the whole context, one of 8,192 tokens, blocks of 256, 64 and 16 tokens, every slot used.
"""

from __future__ import annotations

from typing import Any

ROWS = (
    ("static", "one reservation of 40,960 tokens"),
    ("tight", "one reservation of 8,192 tokens"),
    ("paged256", "blocks of 256 tokens"),
    ("paged64", "blocks of 64 tokens"),
    ("paged16", "blocks of 16 tokens"),
    ("exact", "every token slot used"),
)
CARDS = (("4090", "RTX 4090 (24 GB)"), ("h200", "H200"))


def draw(fig: Any, data: Any) -> None:
    """One horizontal bar chart per card, the count written at the end of each bar."""
    fig.set_size_inches(7.5, 4.2)
    axes = fig.subplots(1, 2)
    for ax, (card, title) in zip(axes, CARDS, strict=True):
        counts = [data.value(f"paper.{key}_{card}") for key, _ in ROWS]
        ys = range(len(ROWS))
        colours = ["#bbbbbb", "#999999", "#2ca02c", "#2ca02c", "#2ca02c", "#1f77b4"]
        ax.barh(list(ys), counts, color=colours)
        for y, n in zip(ys, counts, strict=True):
            ax.annotate(f"{n:,.0f}", (n, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=9)  # fmt: skip
        ax.set_yticks(list(ys))
        ax.set_yticklabels([label for _, label in ROWS] if card == "4090" else [])
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("requests of the mix at once")
        ax.set_xlim(0, max(counts) * 1.18)
        ax.spines[["top", "right"]].set_visible(False)
