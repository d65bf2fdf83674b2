"""Bytes each of twelve published models keeps per token, against its release date.

The models, their release months and designs come from the chart file the lab's first step
kept (results/bytes_chart.json); every byte count is read as a recorded value.
"""

from __future__ import annotations

from typing import Any

MARKERS = {"MHA": ("s", "#d62728"), "GQA": ("o", "#1f77b4"), "MLA": ("D", "#2ca02c")}
# where each label sits relative to its point (points), chosen so that no two labels collide
OFFSETS = {
    "llama_2_7b": (8, -3, "left"),
    "mistral_7b_v0_1": (8, 2, "left"),
    "deepseek_v2": (-8, 0, "right"),
    "gemma_2_9b": (-8, 4, "right"),
    "llama_3_1_8b": (-8, -9, "right"),
    "deepseek_v3": (-8, -6, "right"),
    "gemma_3_27b": (8, 0, "left"),
    "qwen3_0_6b": (8, -1, "left"),
    "qwen3_30b_a3b": (8, -10, "left"),
    "qwen3_8b": (8, 4, "left"),
    "gpt_oss_120b": (8, -8, "left"),
    "gpt_oss_20b": (8, 0, "left"),
}
# models released in the same month, drawn a little apart so that their arrows do not overlap
NUDGE = {"gpt_oss_120b": -0.02, "gpt_oss_20b": 0.12}


def draw(fig: Any, data: Any) -> None:
    """One point per model on a log scale; windowed models also show their 32K average."""
    chart = data.kept_json("configs", "results/bytes_chart.json")
    fig.set_size_inches(7.0, 5.4)
    ax = fig.subplots()
    for p in chart["points"]:
        key = p["key"]
        year = p["year"] + NUDGE.get(key, 0.0)
        per_token = data.value(f"configs.bytes_per_token_{key}", unit="KiB")
        marker, colour = MARKERS[p["attention"]]
        ax.scatter(year, per_token, marker=marker, s=46, color=colour, zorder=3)
        if p["window"]:
            average = data.value(f"configs.avg_bytes_per_token_32k_{key}", unit="KiB")
            ax.scatter(
                year,
                average,
                marker=marker,
                s=46,
                facecolor="white",
                edgecolor=colour,
                lw=1.4,
                zorder=3,
            )
            ax.annotate(
                "",
                xy=(year, average * 1.08),
                xytext=(year, per_token / 1.08),
                arrowprops={"arrowstyle": "->", "color": "#777777", "lw": 0.9},
                zorder=2,
            )
        dx, dy, ha = OFFSETS.get(key, (8, 0, "left"))
        ax.annotate(
            p["model"],
            (year, per_token),
            xytext=(dx, dy),
            textcoords="offset points",
            fontsize=9,
            ha=ha,
            va="center",
        )
    ax.set_yscale("log")
    ticks = [16, 32, 64, 128, 256, 512]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{t}" for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(11, 800)
    ax.set_xlim(2023.2, 2026.1)
    ax.set_xticks([2023.5, 2024, 2024.5, 2025, 2025.5])
    ax.set_xticklabels(["mid 2023", "2024", "mid 2024", "2025", "mid 2025"])
    ax.set_ylabel("KiB per token (16-bit, log scale)")
    ax.set_xlabel("release")
    ax.grid(alpha=0.3)
    handles = [
        ax.scatter([], [], marker=m, color=c, s=46, label=label)
        for label, (m, c) in (
            ("multi-head", MARKERS["MHA"]),
            ("grouped-query", MARKERS["GQA"]),
            ("latent (MLA)", MARKERS["MLA"]),
        )
    ]
    handles.append(
        ax.scatter(
            [],
            [],
            marker="o",
            facecolor="white",
            edgecolor="#555555",
            lw=1.4,
            s=46,
            label="sliding window: average over 32K",
        )
    )
    fig.legend(handles=handles, fontsize=9, loc="outside lower center", ncol=2, frameon=False)
