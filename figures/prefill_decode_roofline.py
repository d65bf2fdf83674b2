"""The roofline of one Qwen3-8B layer on the GPU: achieved TFLOP/s against tokens multiplied at
once, beside the two limits step 2 measured (bandwidth x FLOP per byte, and the peak)."""

from __future__ import annotations

from typing import Any

BF16 = 2
MEASURED, ROOF, RIDGE = "#1f77b4", "#7f7f7f", "#d62728"


def flop_per_byte(tokens: float, shapes: list[list[int]]) -> float:
    """FLOPs per byte moved when `tokens` tokens meet bf16 weights of these (N, K) shapes:
    2 T N K FLOPs over the weights and inputs read and the outputs written."""
    flops = sum(2 * tokens * n * k for n, k in shapes)
    moved = sum(BF16 * (n * k + tokens * k + tokens * n) for n, k in shapes)
    return flops / moved


def draw(fig: Any, data: Any) -> None:
    """Log-log: measured points, the sloping memory roof, the flat compute roof, the ridge."""
    kept = data.kept_json("limits", "results/limits.json")
    shapes = list(kept["shapes"].values())
    rows = sorted(kept["sweep"].values(), key=lambda r: r["tokens"])
    for r in rows:  # a timed value is kept with its spread: the median is the one drawn
        r["tflop_s"] = r["tflop_s"]["median"] if isinstance(r["tflop_s"], dict) else r["tflop_s"]
    peak = data.value("limits.peak_tflop_s")
    bandwidth = data.value("limits.bandwidth", unit="TB/s")
    ridge_tokens = data.value("limits.ridge_tokens_measured", unit="tok")
    ridge = data.value("limits.ridge_measured")
    # the step's own rows must agree with what the record captured
    if abs(max(r["tflop_s"] for r in rows) - peak) > 1e-6 * peak:
        raise ValueError("limits.json and the record disagree about the peak")

    fig.set_size_inches(6.4, 4.3)
    ax = fig.subplots()
    tokens = [r["tokens"] for r in rows]
    xs = [2 ** (i / 8) for i in range(0, 8 * 13 + 1)]  # 1 ... 8,192, smooth
    memory_roof = [bandwidth * flop_per_byte(t, shapes) for t in xs]  # TB/s x FLOP/B = TFLOP/s
    ax.plot(xs, memory_roof, color=ROOF, ls="--", lw=1.3)
    ax.axhline(peak, color=ROOF, ls="--", lw=1.3)
    ax.plot(
        tokens,
        [r["tflop_s"] for r in rows],
        color=MEASURED,
        marker="o",
        ms=5,
        lw=2,
        label="measured: one layer's four products",
    )
    ax.axvline(ridge_tokens, color=RIDGE, ls=":", lw=1.5)

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(0.8, 8192 * 1.25)
    ax.set_ylim(2, peak * 2.2)
    ticks = [1, 4, 16, 64, 256, 1024, 4096]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.set_yticks([3, 10, 30, 100, 300, 1000], ["3", "10", "30", "100", "300", "1,000"])
    ax.set_xlabel("tokens multiplied at once")
    ax.set_ylabel("TFLOP/s (log scale)")

    ax.text(
        1.0,
        peak * 1.12,
        f"compute roof: measured peak, {peak:,.0f} TFLOP/s",
        fontsize=9.5,
        color="#444444",
        va="bottom",
    )
    ax.annotate(
        f"memory roof:\n{bandwidth:.2f} TB/s × FLOP per byte",
        xy=(24, bandwidth * flop_per_byte(24, shapes)),
        xytext=(1.0, 180),
        fontsize=9.5,
        color="#444444",
        arrowprops={"arrowstyle": "->", "color": ROOF, "lw": 0.8},
    )
    ax.text(
        ridge_tokens / 1.12,
        peak * 1.75,
        "← memory-bound",
        fontsize=9.5,
        color=RIDGE,
        ha="right",
        va="center",
    )
    ax.text(
        ridge_tokens * 1.12,
        peak * 1.75,
        "compute-bound →",
        fontsize=9.5,
        color=RIDGE,
        ha="left",
        va="center",
    )
    ax.text(
        ridge_tokens * 1.12,
        12,
        f"ridge point:\n{ridge:.0f} FLOP per byte,\n≈ {ridge_tokens:.0f} tokens",
        fontsize=9.5,
        color=RIDGE,
        ha="left",
        va="bottom",
    )
    ax.annotate(
        "decode:\n1 token a pass",
        xy=(1, rows[0]["tflop_s"]),
        xytext=(2.4, 2.4),
        fontsize=9.5,
        arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
    )
    chunk = next(r for r in rows if r["tokens"] == 4096)
    ax.annotate(
        "prefill:\n4,096-token chunks",
        xy=(4096, chunk["tflop_s"]),
        xytext=(2048, 150),
        fontsize=9.5,
        ha="center",
        arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
    )
    ax.legend(loc="lower right", fontsize=9.5)
    ax.grid(alpha=0.3, which="major")
