"""The whole H200 while a serving engine runs Qwen3-8B at a memory fraction of 0.9: the budget on
paper beside the one measured, as two stacked bars.

Every segment is a recorded value of the `paged` step (the paper's context is what the GPU had
taken, besides the weights counted from config.json, when the engine started).
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
# bottom to top; (label, colour)
SEGMENTS = (
    ("context", "CUDA context, driver", "#7f7f7f"),
    ("weights", "weights", "#1f77b4"),
    ("cache", "KV cache (blocks)", "#2ca02c"),
    ("batch", "attention mask + indices", "#9467bd"),
    ("work", "working space, largest batch", "#ff7f0e"),
    ("allocator", "allocator, cached unused", "#d62728"),
    ("libraries", "libraries loaded later", "#8c564b"),
    ("free", "left free", "#e8e8e8"),
)


def budgets(data: Any) -> tuple[dict[str, float], dict[str, float], float]:
    """Paper and measured segments in GiB, and the GPU's total."""
    v = data.value
    total = v("paged.total", unit="GiB")
    paper = {
        "context": total - v("paged.free", unit="GiB") - v("paper.weights_8b", unit="GiB"),
        "weights": v("paper.weights_8b", unit="GiB"),
        "cache": v("paged.paper_cache_bytes", unit="GiB"),
        "batch": v("paged.paper_batch_tensors", unit="GiB"),
        "work": v("paged.paper_activations", unit="GiB"),
        "allocator": 0.0,
        "libraries": 0.0,
        "free": v("paged.paper_left_free", unit="GiB"),
    }
    measured = {
        "context": v("paged.context", unit="GiB"),
        "weights": v("paged.weights", unit="GiB"),
        "cache": v("paged.cache_bytes", unit="GiB"),
        "batch": v("paged.batch_tensors", unit="GiB"),
        "work": v("paged.activations", unit="GiB"),
        "allocator": v("paged.allocator", unit="GiB"),
        "libraries": v("paged.libraries", unit="GiB"),
        "free": v("paged.left_free", unit="GiB"),
    }
    for name, side in (("paper", paper), ("measured", measured)):
        if abs(sum(side.values()) - total) > 1e-6 * total:  # each bar must be the whole GPU
            raise ValueError(
                f"the {name} segments add up to {sum(side.values()):.3f} GiB, not {total:.3f}"
            )
    return paper, measured, total


def spread(wanted: list[float], gap: float, low: float, high: float) -> list[float]:
    """Label heights near `wanted` (ascending), at least `gap` apart, within [low, high]."""
    placed: list[float] = []
    for y in wanted:
        placed.append(max(y, low if not placed else placed[-1] + gap))
    over = placed[-1] - high
    if over > 0:  # pushed past the top: slide the stack down, keeping the gaps
        for i in range(len(placed) - 1, -1, -1):
            limit = high if i == len(placed) - 1 else placed[i + 1] - gap
            placed[i] = min(placed[i], limit)
    return placed


def draw(fig: Any, data: Any) -> None:
    """Two stacked bars (paper, measured) and a label per segment: paper → measured GiB."""
    paper, measured, total = budgets(data)
    fig.set_size_inches(7.0, 4.6)
    ax = fig.subplots()
    width, xs = 0.55, (0.0, 0.8)
    for x, side in zip(xs, (paper, measured), strict=True):
        bottom = 0.0
        for key, _, colour in SEGMENTS:
            h = side[key]
            if h > 0:
                ax.bar(x, h, width, bottom=bottom, color=colour, edgecolor="white", lw=0.6)
            bottom += h
    # labels to the right of the measured bar, each pointing at its segment's middle
    mids, bottom = [], 0.0
    for key, _, _ in SEGMENTS:
        mids.append(bottom + measured[key] / 2)
        bottom += measured[key]
    ys = spread(mids, gap=total * 0.075, low=total * 0.02, high=total * 0.98)
    right = xs[1] + width / 2
    for (key, label, colour), mid, y in zip(SEGMENTS, mids, ys, strict=True):
        text = f"{label}: {paper[key]:.2f} → {measured[key]:.2f}"
        ax.annotate(
            text,
            xy=(right, mid),
            xytext=(right + 0.35, y),
            va="center",
            fontsize=9,
            arrowprops={
                "arrowstyle": "-",
                "color": colour if key != "free" else "#999999",
                "lw": 1,
                "relpos": (0, 0.5),  # from the label's left edge, not its middle
                "shrinkA": 2,
                "shrinkB": 0,
            },
        )
    ax.text(
        right + 0.35,
        total * 1.06,
        "segment: paper → measured (GiB)",
        fontsize=9,
        va="center",
        fontweight="bold",
    )
    ax.set_xticks(xs, ["on paper", "measured"], fontsize=10)
    ax.set_xlim(-0.4, 3.0)
    ax.set_ylim(0, total * 1.1)
    ax.set_ylabel("GPU memory (GiB)")
    ax.axhline(total, color="black", lw=0.8, ls=":")
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
