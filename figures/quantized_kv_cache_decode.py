"""Decode speed against the tokens already cached, one line per cache format, measured by
llama-bench (the medians of the `decode` step), beside what the bytes read predict."""

from __future__ import annotations

from typing import Any

DEPTHS = ((0, "0k"), (8192, "8k"), (16384, "16k"), (32768, "32k"))
TYPES = (("f16", "f16", "#1f77b4", "o"), ("q8", "q8_0", "#ff7f0e", "s"),
         ("q4", "q4_0", "#2ca02c", "^"))  # fmt: skip


def draw(fig: Any, data: Any) -> None:
    """Tokens per second against depth: measured (solid), and f16's measured speed at depth 0
    scaled by the bytes each decode step reads on paper (dashed)."""
    fig.set_size_inches(6.5, 4.0)
    ax = fig.subplots()
    xs = [d / 1024 for d, _ in DEPTHS]
    start = data.value("decode.tok_s_f16_d0k", unit="tok/s")
    weights = data.value("paper.q8_weights_read", unit="B")
    timed = 64  # llama-bench's timed tokens: their middle sits 31.5 tokens past the depth

    def read(depth: int, per_token: float) -> float:
        return weights + (depth + (timed - 1) / 2) * per_token

    base = read(0, data.value("paper.per_token_f16", unit="B"))
    for key, label, colour, marker in TYPES:
        ys = [data.value(f"decode.tok_s_{key}_d{k}", unit="tok/s") for _, k in DEPTHS]
        ax.plot(xs, ys, color=colour, marker=marker, lw=2, label=f"{label} measured")
        per = data.value(f"paper.per_token_{key}", unit="B")
        ax.plot(xs, [start * base / read(d, per) for d, _ in DEPTHS], color=colour, ls="--", lw=1)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{d:,}" for d, _ in DEPTHS])
    ax.set_xlabel("tokens already cached")
    ax.set_ylabel("tokens per second (median of 5 runs)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, title="dashed: bytes read, on paper", title_fontsize=8)
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
