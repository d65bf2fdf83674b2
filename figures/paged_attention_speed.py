"""One layer's decode attention for the step's requests (16) against the depth of their cache:
read from a contiguous cache, and gathered from blocks of 16, 64 and 256 tokens first (the
medians of the `speed` step, with their quartiles as error bars).
"""

from __future__ import annotations

from typing import Any

DEPTHS = (1024, 4096, 16384)  # the keys of the results; each entry says its own depth
LINES = (
    ("contiguous", "contiguous cache", "#1f77b4", "o"),
    ("paged16", "paged, blocks of 16", "#d62728", "s"),
    ("paged64", "paged, blocks of 64", "#ff7f0e", "^"),
    ("paged256", "paged, blocks of 256", "#2ca02c", "v"),
)


def draw(fig: Any, data: Any) -> None:
    """Microseconds per layer against depth, log-log."""
    kept = data.kept_json("speed", "results/speed.json")
    speed = kept["depths"]
    fig.set_size_inches(6.5, 4.0)
    ax = fig.subplots()
    for key, label, colour, marker in LINES:
        xs, ys, lo, hi = [], [], [], []
        for depth in DEPTHS:
            entry = speed[f"d{depth}"]
            s = entry["contiguous"] if key == "contiguous" else entry["paged"][f"b{key[5:]}"]
            xs.append(entry["depth"])
            ys.append(s["median"] * 1e6)
            lo.append((s["median"] - s["q1"]) * 1e6)
            hi.append((s["q3"] - s["median"]) * 1e6)
        ax.errorbar(xs, ys, yerr=[lo, hi], color=colour, marker=marker, label=label, capsize=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [speed[f"d{d}"]["depth"] for d in DEPTHS]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{d:,}" for d in ticks])
    ax.set_xlabel("tokens in each request's cache")
    ax.set_ylabel(f"µs per layer, {kept['requests']} requests")
    ax.legend(fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
