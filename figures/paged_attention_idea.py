"""One cache of 32,768 token slots, filled from the start of the mix two ways: one reservation of
8,192 tokens per request (four requests, mostly empty slots), and blocks of 256 tokens (requests
take whole blocks as they need them; only each last block is partly empty). Drawn from the mix's
lengths as the `paper` step kept them.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.patches import Rectangle

CAPACITY, RESERVATION, BLOCK = 32_768, 8_192, 256
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def draw(fig: Any, data: Any) -> None:
    """Two strips of the same capacity; each request one colour, empty slots hatched grey."""
    paper = data.kept_json("paper", "results/paper.json")
    tokens = [p + a - 1 for p, a in paper["mix"]["lengths"]]
    fig.set_size_inches(7.5, 3.0)
    ax = fig.subplots()
    ax.set_xlim(0, CAPACITY)
    ax.set_ylim(-0.2, 2.4)
    ax.axis("off")

    def slot(x: float, width: float, y: float, colour: str | None) -> None:
        face, hatch = (colour, None) if colour else ("white", "////")
        ax.add_patch(Rectangle((x, y), width, 0.7, facecolor=face, edgecolor="#555", lw=0.4,
                               hatch=hatch, alpha=0.85 if colour else 1))  # fmt: skip

    for i in range(CAPACITY // RESERVATION):  # one reservation each
        x = i * RESERVATION
        used = min(tokens[i], RESERVATION)
        slot(x, used, 1.4, COLOURS[i % len(COLOURS)])
        slot(x + used, RESERVATION - used, 1.4, None)
    held = 0
    count = 0
    for i, n in enumerate(tokens):  # blocks of 256, in order, until the cache is full
        need = math.ceil(n / BLOCK) * BLOCK
        if held + need > CAPACITY:
            break
        slot(held, n, 0.2, COLOURS[i % len(COLOURS)])
        slot(held + n, need - n, 0.2, None)
        held, count = held + need, count + 1
    if held < CAPACITY:
        ax.add_patch(Rectangle((held, 0.2), CAPACITY - held, 0.7, facecolor="#eee", lw=0.4,
                               edgecolor="#555"))  # fmt: skip
    ax.text(0, 2.2, f"one reservation of {RESERVATION:,} tokens each: {CAPACITY // RESERVATION}"
            " requests", fontsize=10)  # fmt: skip
    ax.text(0, 1.0, f"blocks of {BLOCK} tokens: {count} requests", fontsize=10)
    ax.text(CAPACITY, -0.15, f"{CAPACITY:,} token slots", ha="right", fontsize=8, color="#555")
