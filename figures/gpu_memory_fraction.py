"""Conversations of 8,192 tokens the cache holds against the memory fraction, on an H200 and on a
24 GB card, for Qwen3-8B and Qwen3-0.6B: the paper's sweep as lines, the engine's own counts as
points.

The sweep (fractions 0.1 to 0.95) is not a captured value: it is read from the JSON file the
`paper` step kept, through `data.kept_json`. The measured points are captured values of the
`settings` step, except Qwen3-0.6B's, read from the file that step kept.
"""

from __future__ import annotations

from typing import Any

from matplotlib.ticker import MaxNLocator

MODELS = (("qwen3-8b", "Qwen3-8B", "#1f77b4"), ("qwen3-0_6b", "Qwen3-0.6B", "#ff7f0e"))
CARDS = (
    ("h200", "NVIDIA H200 (on paper from its figures; points measured)"),
    ("card_24gb", "a 24 GB card (on paper)"),
)


def draw(fig: Any, data: Any) -> None:
    """Two panels, one per card; a line per model; the engine's measured counts on the H200."""
    paper = data.kept_json("paper", "results/paper.json")
    sweep = paper["sweep"]
    fractions = sweep["fractions"]
    measured = [
        (0.5, data.value("settings.conv_8k_f50")),
        (0.7, data.value("settings.conv_8k_f70")),
        (0.9, data.value("settings.conv_8k_f90")),
    ]
    # Qwen3-0.6B's count of 8,192-token conversations at 0.9 is not captured: read it from the
    # JSON file the `settings` step kept
    settings = data.kept_json("settings", "results/settings.json")
    small = settings["qwen3-0_6b"]["f90"]["conversations"]["8k"]
    fig.set_size_inches(7.0, 5.4)
    axes = fig.subplots(2, 1, sharex=True)
    for ax, (card, title) in zip(axes, CARDS, strict=True):
        for key, name, colour in MODELS:
            ys = sweep[card][key]["conversations_8k"]
            ax.plot(fractions, ys, color=colour, lw=2, marker=".", ms=6, label=f"{name}, on paper")
            ax.annotate(
                f"{ys[-1]:,}",
                (fractions[-1], ys[-1]),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=9,
                color=colour,
            )
        if card == "h200":
            ax.plot(
                [f for f, _ in measured] + [0.9],
                [n for _, n in measured] + [small],
                ls="none",
                marker="o",
                ms=9,
                mfc="none",
                mec="black",
                mew=1.5,
                label="the engine's own count, measured",
            )
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel("conversations")
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=9, frameon=False)
    axes[1].set_xlabel(
        "memory fraction (max_memory_percent), applied to the memory free after the weights"
    )
    axes[1].set_xlim(0, 1.02)
    fig.suptitle("conversations of 8,192 tokens the KV cache holds at once", fontsize=10)
