"""Decode speed of the ~8B model in five attention designs, against the tokens already cached:
measured on the left, the bytes bound (copy bandwidth / bytes read per token) on the right.
"""

from __future__ import annotations

from typing import Any

DESIGNS = [
    ("mha", "multi-head", "#d62728", "s"),
    ("gqa", "grouped-query", "#1f77b4", "o"),
    ("mqa", "multi-query", "#9467bd", "^"),
    ("mla", "latent (MLA)", "#2ca02c", "D"),
    ("sliding", "sliding window", "#ff7f0e", "v"),
]
DEPTHS = [("d0", 0), ("d8k", 8192), ("d32k", 32767)]


def draw(fig: Any, data: Any) -> None:
    """Two panels sharing one scale, one line per design."""
    fig.set_size_inches(7.0, 4.4)
    measured_ax, bound_ax = fig.subplots(1, 2, sharey=True)
    xs = [tokens / 1024 for _, tokens in DEPTHS]
    top = 0.0
    for key, label, colour, marker in DESIGNS:
        measured = [data.value(f"designs.tok_s_{key}_{d}", unit="tok/s") for d, _ in DEPTHS]
        bound = [data.value(f"designs.bound_{key}_{d}", unit="tok/s") for d, _ in DEPTHS]
        top = max(top, *bound)
        measured_ax.plot(xs, measured, color=colour, marker=marker, ms=5, lw=1.8, label=label)
        bound_ax.plot(xs, bound, color=colour, marker=marker, ms=5, lw=1.8, ls="--", label=label)
    for ax, title in (
        (measured_ax, "measured"),
        (bound_ax, "bytes bound (prediction)"),
    ):
        ax.set_title(title, fontsize=10)
        ax.set_xticks(xs)
        ax.set_xticklabels(["0", "8K", "32K"])
        ax.set_xlabel("tokens already cached")
        ax.grid(alpha=0.3)
        ax.set_ylim(0, top * 1.08)
    measured_ax.set_ylabel("tokens per second, one conversation")
    measured_ax.legend(fontsize=9, loc="lower left", framealpha=0.9)
