"""The idea of the lesson in one drawing: the whole GPU, the share of its free memory a serving
engine takes, how the engine divides that share, and the cache cut into blocks that
conversations take as they grow. Sizes are the recorded ones (Qwen3-8B on the H200, fraction 0.9).
"""

from __future__ import annotations

from typing import Any

from matplotlib.patches import Polygon, Rectangle

GREY, BLUE, SHARE, SLACK = "#9e9e9e", "#1f77b4", "#cfe8cf", "#eeeeee"
MASK, WORK, CACHE = "#9467bd", "#ff7f0e", "#2ca02c"
CONVERSATIONS = (("A", "#c44e52", 3, 0.45), ("B", "#dd8452", 1, 0.30), ("C", "#8172b3", 2, 0.80))
LEFT, RIGHT = 4.0, 96.0
BAR_H = 1.1


def bar(ax: Any, x0: float, x1: float, y: float, colour: str, label: str = "", **kw: Any) -> None:
    """One segment of a horizontal bar, its label inside when there is room."""
    ax.add_patch(
        Rectangle((x0, y), x1 - x0, BAR_H, facecolor=colour, edgecolor="white", lw=1, **kw)
    )
    if label:
        ax.text((x0 + x1) / 2, y + BAR_H / 2, label, ha="center", va="center", fontsize=9)


def zoom(ax: Any, top: tuple[float, float], y_top: float, y_bottom: float) -> None:
    """Grey wedge from a segment of one bar to the whole width of the bar below it."""
    ax.add_patch(
        Polygon(
            [(top[0], y_top), (top[1], y_top), (RIGHT, y_bottom + BAR_H), (LEFT, y_bottom + BAR_H)],
            closed=True,
            facecolor="#f4f4f4",
            edgecolor="#bbbbbb",
            lw=0.8,
            zorder=0,
        )
    )


def draw(fig: Any, data: Any) -> None:
    """Three rows: the GPU, the engine's share, the cache's blocks."""
    v = data.value
    total = v("paged.total", unit="GiB")
    context = total - v("paged.free", unit="GiB") - v("paged.weights", unit="GiB")
    weights = v("paged.weights", unit="GiB")
    free = v("paged.free", unit="GiB")
    share = v("paged.available", unit="GiB")
    work = v("paged.paper_activations", unit="GiB")
    mask = v("paged.paper_batch_tensors", unit="GiB")
    blocks = v("paged.blocks")
    block_mib = v("paged.cache_bytes", unit="MiB") / (blocks + 2)
    full_context_blocks = 40_960 // 256

    fig.set_size_inches(7.0, 4.8)
    ax = fig.subplots()
    ax.set_axis_off()
    ax.set_xlim(0, 100)
    ax.set_ylim(-1.3, 10.9)

    # row 1: the whole GPU, to scale
    y1 = 8.2
    scale = (RIGHT - LEFT) / total
    f_share = share / free
    x = LEFT
    edges = {}
    for key, size, colour, label in (
        ("context", context, GREY, ""),
        ("weights", weights, BLUE, ""),
        ("share", share, SHARE, f"engine's share: {f_share:.1f} × {free:.1f} GiB free"),
        ("slack", free - share, SLACK, ""),
    ):
        bar(ax, x, x + size * scale, y1, colour, label)
        edges[key] = (x, x + size * scale)
        x += size * scale
    ax.text(
        LEFT,
        y1 + BAR_H + 1.1,
        f"the whole GPU, {total:.1f} GiB",
        fontsize=10,
        fontweight="bold",
        va="bottom",
    )
    ax.annotate(
        f"CUDA context + weights: {context + weights:.1f} GiB",
        xy=((LEFT + edges["weights"][1]) / 2, y1 + BAR_H),
        xytext=(LEFT, y1 + BAR_H + 0.35),
        fontsize=9,
        va="bottom",
        arrowprops={"arrowstyle": "-", "color": "#777777", "lw": 0.8, "relpos": (0.1, 0)},
    )
    ax.annotate(
        f"the other {1 - f_share:.1f}: left unplanned",
        xy=((edges["slack"][0] + edges["slack"][1]) / 2, y1 + BAR_H),
        xytext=(RIGHT, y1 + BAR_H + 0.35),
        ha="right",
        fontsize=9,
        va="bottom",
        arrowprops={"arrowstyle": "-", "color": "#777777", "lw": 0.8, "relpos": (0.9, 0)},
    )

    # row 2: how the planner divides the share
    y2 = 4.6
    zoom(ax, edges["share"], y1, y2)
    scale2 = (RIGHT - LEFT) / share
    x = LEFT
    cache_edges = (0.0, 0.0)
    for size, colour, label in (
        (work, WORK, ""),
        (mask, MASK, "mask"),
        (share - work - mask, CACHE, f"KV cache: {blocks:,.0f} blocks of 256 tokens"),
    ):
        bar(ax, x, x + size * scale2, y2, colour, label)
        if colour == CACHE:
            cache_edges = (x, x + size * scale2)
        x += size * scale2
    ax.text(
        LEFT,
        y2 + BAR_H + 0.2,
        "working space of the largest batch",
        fontsize=9,
        va="bottom",
        color="#b35900",
        zorder=3,
    )

    # row 3: the cache's blocks, taken by conversations as they grow
    y3 = 0.9
    zoom(ax, cache_edges, y2, y3)
    n_shown, gap, end = 14, 0.35, 74.0
    width = (end - LEFT - gap * (n_shown - 1)) / n_shown
    owners: list[tuple[str, str, float]] = []
    for name, colour, count, last_fill in CONVERSATIONS:
        owners += [(name, colour, 1.0)] * (count - 1) + [(name, colour, last_fill)]
    for i in range(n_shown):
        x0 = LEFT + i * (width + gap)
        ax.add_patch(Rectangle((x0, y3), width, BAR_H, facecolor="white", edgecolor=CACHE, lw=1))
        if i < len(owners):
            name, colour, fill = owners[i]
            ax.add_patch(Rectangle((x0, y3), width * fill, BAR_H, facecolor=colour, lw=0))
            ax.text(
                x0 + width / 2,
                y3 + BAR_H / 2,
                name,
                ha="center",
                va="center",
                fontsize=9,
                color="white" if fill > 0.5 else "black",
                fontweight="bold",
            )
    ax.text(
        end + 1.0,
        y3 + BAR_H / 2,
        f"… {blocks - len(owners):,.0f} free",
        fontsize=9,
        va="center",
        color="#2a7a2a",
    )
    ax.text(
        LEFT,
        y3 - 0.25,
        f"one block: 256 tokens' keys and values in every layer, {block_mib:.0f} MiB."
        " Conversations",
        fontsize=9,
        va="top",
    )
    ax.text(
        LEFT,
        y3 - 1.05,
        f"take blocks as they grow; at 40,960 tokens each takes {full_context_blocks}:"
        f" {blocks:,.0f} ÷ {full_context_blocks} → {blocks // full_context_blocks:.0f} at once",
        fontsize=9,
        va="top",
    )
