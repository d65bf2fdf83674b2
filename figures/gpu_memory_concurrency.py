"""Output speed against the number of requests sent at once, with the cache a 0.9 fraction gives and
with a cache of 16 blocks; each point labelled with how many requests ran at the same time.

Speeds are captured values of the `concurrency` step; the requests that ran at once are captured
only for N = 64, so each point's count is read from the JSON file the step kept
(`data.kept_json`).
"""

from __future__ import annotations

from typing import Any


def draw(fig: Any, data: Any) -> None:
    """Two lines of tokens per second against N; the small cache flattens out."""
    v = data.value
    full_n = [1, 8, 32, 64]
    full = [v(f"concurrency.tok_s_{n}") for n in full_n]
    small_n = [8, 32, 64]
    small = [v(f"concurrency.small_tok_s_{n}") for n in small_n]
    kept = data.kept_json("concurrency", "results/concurrency.json")
    at_once = {
        budget: {int(n): r["peak_concurrency"] for n, r in kept[budget]["runs"].items()}
        for budget in ("full", "small")
    }
    if at_once["small"][64] != v("concurrency.small_at_once_64"):
        raise ValueError("the kept concurrency.json is not the run's")
    blocks_full, blocks_small = v("concurrency.full_blocks"), v("concurrency.small_blocks")
    fig.set_size_inches(7.0, 3.9)
    ax = fig.subplots()
    ax.plot(
        full_n,
        full,
        color="#2ca02c",
        lw=2,
        marker="o",
        label=f"cache of a 0.9 fraction ({blocks_full:,.0f} blocks)",
    )
    ax.plot(
        small_n,
        small,
        color="#d62728",
        lw=2,
        marker="s",
        label=f"cache of {blocks_small:.0f} blocks",
    )
    for n, y in zip(full_n, full, strict=True):
        ax.annotate(
            f"{at_once['full'][n]} at once",
            (n, y),
            xytext=(-6, 8),
            textcoords="offset points",
            ha="right",
            fontsize=9,
            color="#2ca02c",
        )
    for n, y in zip(small_n, small, strict=True):
        ax.annotate(
            f"{at_once['small'][n]} at once",
            (n, y),
            xytext=(0, -16),
            textcoords="offset points",
            ha="center",
            fontsize=9,
            color="#d62728",
        )
    ax.set_xlabel("requests sent together (300-token prompts, 64 new tokens each)")
    ax.set_ylabel("output tokens per second")
    ax.set_xticks(full_n)
    ax.set_xlim(-2, 70)
    ax.set_ylim(-40, max(full) * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
