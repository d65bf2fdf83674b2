"""One streamed request: the tokens its user has received against time, measured beside the
prediction from steps 1 and 2."""

from __future__ import annotations

from typing import Any

MEASURED, PREDICTED, PREFILL = "#1f77b4", "#7f7f7f", "#ffdd99"


def draw(fig: Any, data: Any) -> None:
    """A step line of tokens received; the prefill's wait shaded; the prediction dashed."""
    kept = data.kept_json("request", "results/request.json")
    arrivals = [1e3 * t for t in kept["measured"]["arrivals"]]  # ms after the prompt was sent
    # the request drawn: the one whose whole answer took the median time (older records: the one)
    example = kept["measured"].get("example")
    ttft = 1e3 * example["ttft"] if example else data.value("request.ttft", unit="ms")
    tpot = data.value("request.tpot", unit="ms")
    ttft_pred = data.value("request.ttft_predicted", unit="ms")
    tpot_pred = data.value("request.tpot_predicted", unit="ms")
    total = data.value("request.total", unit="ms")
    if abs(arrivals[0] - ttft) > 1e-6 * ttft or abs(arrivals[-1] - total) > 1e-6 * total:
        raise ValueError("request.json and the record disagree")
    n = len(arrivals)

    fig.set_size_inches(6.0, 4.0)
    ax = fig.subplots()
    ax.axvspan(0, ttft, color=PREFILL, alpha=0.6, lw=0)
    xs, ys = [0.0], [0]
    for i, t in enumerate(arrivals, start=1):  # a step up at each arrival
        xs += [t, t]
        ys += [i - 1, i]
    ax.plot(xs, ys, color=MEASURED, lw=2, label="measured: tokens received")
    pred = [ttft_pred + i * tpot_pred for i in range(n)]
    ax.plot(
        [0, *pred],
        [0, *range(1, n + 1)],
        color=PREDICTED,
        ls="--",
        lw=1.3,
        label="predicted from steps 1 and 2",
    )
    ax.text(
        ttft * 1.15,
        n * 0.6,
        "← prefill: the wait\n    before any token",
        ha="left",
        va="center",
        fontsize=9.5,
        color="#7a5a00",
    )
    ax.annotate(
        f"first token after {ttft:.0f} ms (TTFT)",
        xy=(ttft, 1),
        xytext=(ttft + 230, 6),
        fontsize=9.5,
        arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
    )
    mid = n // 2
    ax.annotate(
        f"then one token every {tpot:.1f} ms (TPOT)",
        xy=(arrivals[mid], mid),
        xytext=(arrivals[mid] + 60, mid - 70),
        fontsize=9.5,
        arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
    )
    ax.set_xlim(0, max(arrivals[-1], pred[-1]) * 1.03)
    ax.set_ylim(0, n * 1.02)
    ax.set_xlabel("time since the prompt was sent (ms)")
    ax.set_ylabel("tokens of the answer received")
    ax.legend(loc="upper left", bbox_to_anchor=(0.1, 1.0), fontsize=9.5)
    ax.grid(alpha=0.3)
