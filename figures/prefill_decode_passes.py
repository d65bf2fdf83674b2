"""The two phases of one request: prefill, one pass for all prompt tokens; decode, one pass per
new token; and below, the request's time line drawn to the scale the lab measured."""

from __future__ import annotations

from typing import Any

from matplotlib.patches import FancyArrowPatch, Rectangle

WEIGHTS, PROMPT, NEW, EDGE = "#c6dbef", "#ffb366", "#1f77b4", "#4a6f8a"


def weights_box(ax: Any, x: float, y: float, gib: float) -> None:
    """The model's weights: one tall box."""
    ax.add_patch(Rectangle((x, y), 1.2, 2.0, facecolor=WEIGHTS, edgecolor=EDGE, lw=1))
    ax.text(
        x + 0.6,
        y + 1.0,
        f"weights\n{gib:.1f} GiB,\nread once\na pass",
        ha="center",
        va="center",
        fontsize=9.5,
    )


def arrow(ax: Any, x0: float, x1: float, y: float) -> None:
    """An arrow from the weights to the tokens they multiply."""
    ax.add_patch(
        FancyArrowPatch((x0, y), (x1, y), arrowstyle="-|>", mutation_scale=12, color="#333333")
    )


def draw(fig: Any, data: Any) -> None:
    """Two passes side by side on top; the request's time line, to scale, below."""
    gib = data.value("paper.decode_weight_bytes", unit="GiB")
    prompt = data.value("request.prompt_tokens", unit="tok")
    prefill_fpb = data.value("paper.prefill_intensity_4096")
    decode_fpb = data.value("paper.decode_intensity_0")
    ttft = data.value("request.ttft", unit="ms")
    tpot = data.value("request.tpot", unit="ms")

    fig.set_size_inches(7.0, 4.9)
    ax = fig.subplots()
    ax.set_axis_off()
    ax.set_xlim(0, 10.6)
    ax.set_ylim(0.05, 6.45)

    # prefill: the whole prompt in one pass
    ax.text(0.1, 6.25, "Prefill: one pass for the whole prompt", fontsize=10.5, weight="bold")
    weights_box(ax, 0.1, 3.6, gib)
    arrow(ax, 1.35, 1.9, 4.6)
    for i in range(14):  # the prompt's tokens, side by side
        ax.add_patch(
            Rectangle((2.0 + i * 0.2, 3.6), 0.17, 2.0, facecolor=PROMPT, edgecolor=EDGE, lw=0.5)
        )
    ax.text(4.9, 4.6, "…", fontsize=12, va="center")
    ax.text(3.5, 5.75, f"{prompt:,.0f} prompt tokens at once", ha="center", fontsize=9.5)
    ax.text(
        0.1,
        3.35,
        f"each weight read serves {prompt:,.0f} tokens:\n"
        f"≈ {prefill_fpb:,.0f} FLOP per byte\n→ arithmetic sets the time",
        fontsize=9.5,
        va="top",
    )

    # decode: one new token per pass
    ax.text(5.9, 6.25, "Decode: one pass per new token", fontsize=10.5, weight="bold")
    weights_box(ax, 5.9, 3.6, gib)
    arrow(ax, 7.15, 7.7, 4.6)
    ax.add_patch(Rectangle((7.8, 3.6), 0.17, 2.0, facecolor=NEW, edgecolor=EDGE, lw=0.5))
    ax.text(8.1, 4.6, "1 token", fontsize=9.5, va="center")
    ax.text(
        5.9,
        3.35,
        f"each weight read serves 1 token:\n≈ {decode_fpb:.0f} FLOP per byte\n"
        "→ memory bandwidth sets the time",
        fontsize=9.5,
        va="top",
    )

    # the request's time line, to scale: prefill, then decode steps
    scale = 10.2 / (ttft + 40 * tpot)  # inches of axis per ms, room for 40 decode steps
    y = 0.7
    ax.text(0.1, 1.75, "One request in time (to scale, as measured)", fontsize=10.5, weight="bold")
    ax.add_patch(Rectangle((0.1, y), ttft * scale, 0.6, facecolor=PROMPT, edgecolor=EDGE, lw=0.8))
    ax.text(0.1 + ttft * scale / 2, y + 0.3, "prefill", ha="center", va="center", fontsize=9.5)
    x = 0.1 + ttft * scale
    for _ in range(36):
        ax.add_patch(
            Rectangle((x, y), tpot * scale * 0.85, 0.6, facecolor=NEW, edgecolor=EDGE, lw=0.4)
        )
        x += tpot * scale
    ax.text(x + 0.05, y + 0.3, "…", fontsize=12, va="center")
    ax.text(
        0.1 + ttft * scale - 0.09,
        y - 0.12,
        f"▲ the first token arrives: TTFT, {ttft:.0f} ms after the prompt",
        fontsize=9.5,
        va="top",
        ha="left",
    )
    ax.text(
        0.1 + ttft * scale + 14 * tpot * scale,
        y + 0.75,
        f"one decode step per token: TPOT, {tpot:.1f} ms each",
        fontsize=9.5,
        va="bottom",
        ha="left",
        color=NEW,
    )
