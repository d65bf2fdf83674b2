"""The bytes one key vector of Qwen3-8B (one head, one token, one layer: 128 numbers) takes in
each cache format, drawn to scale: f16's 2 bytes a number, and q8_0's and q4_0's four blocks of
32 numbers, each its integers and its 2-byte scale. The bytes come from the `paper` step's bytes
per token, divided by the vectors a token keeps (keys and values, 8 heads, 36 layers)."""

from __future__ import annotations

from typing import Any

from matplotlib.patches import Rectangle

VECTORS = 2 * 36 * 8  # a key and a value per key-value head per layer, for each token
NUMBERS, BLOCK, SCALE = 128, 32, 2  # numbers a vector; numbers a block; bytes of a block's scale
ROWS = (("f16", "f16", "#1f77b4"), ("q8", "q8_0", "#ff7f0e"), ("q4", "q4_0", "#2ca02c"))


def draw(fig: Any, data: Any) -> None:
    """One bar per format, as long as its bytes; blocks outlined, scales dark."""
    fig.set_size_inches(7.5, 2.8)
    ax = fig.subplots()
    full = data.value("paper.per_token_f16", unit="B") / VECTORS
    ax.set_xlim(-0.5, full * 1.02)
    ax.set_ylim(-0.6, len(ROWS) * 1.0 + 0.1)
    ax.axis("off")
    for row, (key, label, colour) in enumerate(ROWS):
        y = (len(ROWS) - 1 - row) * 1.0
        vector = data.value(f"paper.per_token_{key}", unit="B") / VECTORS
        bits = data.value(f"paper.bits_{key}")
        if key == "f16":
            ax.add_patch(Rectangle((0, y), vector, 0.5, facecolor=colour, edgecolor="#333",
                                   lw=0.6, alpha=0.85))  # fmt: skip
            note = f"{NUMBERS} numbers × 2 B, no scale"
        else:
            per_block = vector / (NUMBERS / BLOCK)
            for b in range(NUMBERS // BLOCK):
                x = b * per_block
                ax.add_patch(Rectangle((x, y), SCALE, 0.5, facecolor="#333", edgecolor="#333",
                                       lw=0.6))  # fmt: skip
                ax.add_patch(Rectangle((x + SCALE, y), per_block - SCALE, 0.5, facecolor=colour,
                                       edgecolor="#333", lw=0.6, alpha=0.85))  # fmt: skip
            note = (f"{NUMBERS // BLOCK} blocks of {BLOCK} integers + a 2-byte scale"
                    f" ({per_block:.0f} B a block)")  # fmt: skip
        ax.text(0, y + 0.62, f"{label}: {vector:.0f} B, {bits:.1f} bits a number — {note}",
                fontsize=9)  # fmt: skip
    ax.add_patch(Rectangle((full * 0.62, -0.5), 6, 0.25, facecolor="#333", edgecolor="#333"))
    ax.text(full * 0.62 + 9, -0.47, "a block's scale (2 B)", fontsize=8, color="#333")
    ax.text(0, -0.47, "one key vector: one head, one token, one layer", fontsize=8, color="#555")
