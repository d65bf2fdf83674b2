"""Time to first token against prompt length: measured, beside the prediction from the GPU's
measured peak (and, for the shortest prompts, its bandwidth)."""

from __future__ import annotations

from typing import Any

LENGTHS = [128, 512, 2048, 8192, 32768]
MEASURED, PREDICTED, GPU = "#1f77b4", "#7f7f7f", "#2ca02c"


def median(value: Any) -> float:
    """A timed value's median: {"median", "min", ...}, or a plain number in older records."""
    return float(value["median"] if isinstance(value, dict) else value)


def draw(fig: Any, data: Any) -> None:
    """Log-log: measured TTFT with the fraction of the peak at each point; the prediction dashed."""
    kept = data.kept_json("prefill", "results/prefill.json")
    measured = [data.value(f"prefill.ttft_{n}", unit="ms") for n in LENGTHS]
    rows = [kept["lengths"][str(n)] for n in LENGTHS]
    # a timed value is kept with its spread (older records: the median alone)
    of_peak = [median(r["percent_of_peak"]) for r in rows]
    predicted = [1e3 * r["predicted_ttft"] for r in rows]
    # the kept file must tell the record's story
    for n, ms, r in zip(LENGTHS, measured, rows, strict=True):
        if abs(1e3 * median(r["ttft"]) - ms) > 1e-6 * ms:
            raise ValueError(f"prefill.json and the record disagree at {n} tokens")
    gpu = [1e3 * median(r["gpu_ttft"]) for r in rows] if "gpu_ttft" in rows[0] else None

    fig.set_size_inches(6.0, 4.2)
    ax = fig.subplots()
    ax.plot(
        LENGTHS,
        predicted,
        color=PREDICTED,
        ls="--",
        marker="s",
        ms=4,
        lw=1.3,
        label="predicted from step 2's peak and bandwidth",
    )
    ax.plot(LENGTHS, measured, color=MEASURED, marker="o", ms=6, lw=2, label="measured")
    if gpu:
        ax.plot(LENGTHS, gpu, color=GPU, marker="^", ms=5, lw=1.3,
                label="the GPU's own time (CUDA graph)")  # fmt: skip
    # each label where its line leaves room: right of the falling first segment, under the
    # lowest point, left of the rising ones
    offsets = {128: (8, 6, "left"), 512: (-8, -15, "right")}
    for n, ms, pct in zip(LENGTHS, measured, of_peak, strict=True):
        dx, dy, ha = offsets.get(n, (-8, 6, "right"))
        ax.annotate(
            f"{pct:.0f} % of peak",
            xy=(n, ms),
            xytext=(dx, dy),
            textcoords="offset points",
            ha=ha,
            fontsize=9.5,
            color=MEASURED,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(LENGTHS, [f"{n:,}" for n in LENGTHS])
    ticks = [3, 10, 30, 100, 300, 1000, 3000]
    ax.set_yticks(ticks, [f"{t:,}" for t in ticks])
    ax.set_xlim(80, 32768 * 1.6)
    ax.set_ylim(2, max(measured) * 2.5)
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("time to first token (ms, log scale)")
    ax.legend(loc="lower right", fontsize=9.5)
    ax.grid(alpha=0.3)
