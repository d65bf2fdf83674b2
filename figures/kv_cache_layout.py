"""What the KV cache of Qwen3-8B holds: layers x key-value heads x tokens, a key and a value
each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.patches import Rectangle

# The shapes come from the config.json the lab ships; the bytes per token from the record.
CONFIG = (
    Path(__file__).resolve().parents[1] / "lab" / "kv-cache" / "models" / "Qwen3-8B" / "config.json"
)
BYTES_PER_NUMBER = {"bfloat16": 2, "float16": 2, "float32": 4}
OLD, NEW, EDGE = "#c6dbef", "#ff7f0e", "#4a6f8a"
SHOWN_TOKENS = 7  # columns drawn before the gap; the last column is the newest token
CELL_W, CELL_H = 0.42, 0.30


def shapes() -> tuple[int, int, int, int]:
    """Layers, key-value heads, head size and bytes per number, as config.json names them."""
    cfg = json.loads(CONFIG.read_text(encoding="utf-8"))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return cfg["num_hidden_layers"], cfg["num_key_value_heads"], head_dim, BYTES_PER_NUMBER[dtype]


def panel(ax: Any, x0: float, y0: float, title: str, heads: int) -> float:
    """One grid of cached vectors (rows: key-value heads, columns: tokens); returns its right
    edge.
    """
    columns = list(range(SHOWN_TOKENS)) + [
        None,
        SHOWN_TOKENS + 1,
    ]  # None: the gap of earlier tokens
    x = x0
    for col in columns:
        if col is None:
            ax.text(
                x + CELL_W / 2, y0 + heads * CELL_H / 2, "…", ha="center", va="center", fontsize=12
            )
            x += CELL_W
            continue
        colour = NEW if col == SHOWN_TOKENS + 1 else OLD
        for row in range(heads):
            ax.add_patch(
                Rectangle(
                    (x, y0 + row * CELL_H),
                    CELL_W * 0.9,
                    CELL_H * 0.85,
                    facecolor=colour,
                    edgecolor=EDGE,
                    lw=0.6,
                )
            )
        x += CELL_W
    ax.text(
        (x0 + x) / 2,
        y0 + heads * CELL_H + 0.12,
        title,
        ha="center",
        va="bottom",
        fontsize=10,
        fontweight="bold",
    )
    return x


def draw(fig: Any, data: Any) -> None:
    """A stack of layers; the front one shows its keys and values, one cell per head and token."""
    layers, heads, head_dim, per_number = shapes()
    per_token = data.value("size.bytes_per_token_8b", unit="B")
    if (
        2 * layers * heads * head_dim * per_number != per_token
    ):  # the drawing must tell the record's sum
        raise ValueError(
            f"config.json gives {2 * layers * heads * head_dim * per_number:,} B per token, "
            f"the record {per_token:,.0f} B"
        )
    fig.set_size_inches(8.4, 4.3)
    ax = fig.subplots()
    ax.set_axis_off()
    ax.set_aspect("equal")

    x0, y0, gap = 1.3, 1.2, 0.55
    width = 2 * (SHOWN_TOKENS + 2) * CELL_W + gap + 0.5
    height = heads * CELL_H + 0.75
    # the layers behind the one shown: offset cards, the last one labelled
    for i in (3, 2, 1):
        ax.add_patch(
            Rectangle(
                (x0 - 0.25 + 0.22 * i, y0 - 0.25 + 0.22 * i),
                width,
                height,
                facecolor="white",
                edgecolor="#888888",
                lw=0.8,
            )
        )
    ax.text(
        x0 - 0.25 + 0.22 * 3 + width,
        y0 - 0.25 + 0.22 * 3 + height + 0.05,
        f"… {layers} layers in all, each holding the same",
        ha="right",
        va="bottom",
        fontsize=8.5,
        color="#555555",
    )
    ax.add_patch(
        Rectangle(
            (x0 - 0.25, y0 - 0.25), width, height, facecolor="white", edgecolor="black", lw=1.0
        )
    )
    ax.text(x0 - 0.15, y0 + height - 0.32, "one layer", fontsize=8.5, va="top", color="#333333")

    right = panel(ax, x0, y0, "keys", heads)
    end = panel(ax, right + gap, y0, "values", heads)
    # rows are key-value heads
    ax.text(x0 - 0.35, y0 + CELL_H / 2, "kv head 1", ha="right", va="center", fontsize=8)
    ax.text(
        x0 - 0.35,
        y0 + (heads - 0.5) * CELL_H,
        f"kv head {heads}",
        ha="right",
        va="center",
        fontsize=8,
    )
    ax.annotate(
        "",
        xy=(x0 - 0.7, y0 + (heads - 1) * CELL_H),
        xytext=(x0 - 0.7, y0 + 1.6 * CELL_H),
        arrowprops={"arrowstyle": "-", "color": "#555555", "ls": ":"},
    )
    # columns are tokens, oldest first
    ax.annotate(
        "",
        xy=(end, y0 - 0.5),
        xytext=(x0, y0 - 0.5),
        arrowprops={"arrowstyle": "->", "color": "#333333"},
    )
    ax.text(
        (x0 + end) / 2,
        y0 - 0.62,
        "tokens of the conversation, oldest first",
        ha="center",
        va="top",
        fontsize=8.5,
    )
    # one cell, explained
    cell_x, cell_y = x0 + 2 * CELL_W + CELL_W * 0.45, y0 + (heads - 1) * CELL_H + CELL_H * 0.4
    ax.annotate(
        f"one cell: the key of one head for one token,\n{head_dim} numbers × {per_number} bytes",
        xy=(cell_x, cell_y),
        xytext=(x0 - 1.5, y0 + height + 0.45),
        fontsize=8.5,
        va="bottom",
        arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
    )
    new_x = end - CELL_W * 0.55
    stack_right = x0 - 0.25 + 0.22 * 3 + width
    ax.annotate(
        "the newest token:\none key and one\nvalue per head",
        xy=(new_x + CELL_W * 0.45, y0 + heads * CELL_H / 2),
        xytext=(stack_right + 0.25, y0 + heads * CELL_H / 2),
        fontsize=8.5,
        va="center",
        ha="left",
        color=NEW,
        arrowprops={"arrowstyle": "->", "color": NEW, "lw": 0.8},
    )

    ax.text(
        x0 - 1.6,
        y0 - 1.25,
        f"Each new token adds one orange column to the keys and the values of every layer:\n"
        f"2 × {layers} layers × {heads} kv heads × {head_dim} numbers × {per_number} bytes"
        f" = {per_token:,.0f} B per token ({per_token / 1024:,.0f} KiB).",
        ha="left",
        va="top",
        fontsize=9,
    )
    ax.set_xlim(x0 - 1.7, x0 + width + 2.6)
    ax.set_ylim(y0 - 2.0, y0 + height + 1.2)
