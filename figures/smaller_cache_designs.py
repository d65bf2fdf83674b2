"""What one layer of the ~8B model keeps for one token, in each attention design, drawn to scale
in bytes; below it, which tokens a sliding-window layer keeps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.patches import Rectangle

# The shapes come from the config.json the lab builds its model from; the bytes from the record.
CONFIG = (
    Path(__file__).resolve().parents[1]
    / "lab"
    / "smaller-cache"
    / "models"
    / "Qwen3-8B"
    / "config.json"
)
KEY, VALUE, LATENT, ROPE, SCALE = "#6baed6", "#fd8d3c", "#74c476", "#9e9ac8", "#444444"
EDGE = "#333333"
BAR_H = 0.42


def blocks(ax: Any, y: float, parts: list[tuple[float, str]], unit: float) -> float:
    """Draw side-by-side blocks (width in bytes, colour) at height y; return the right edge."""
    x = 0.0
    for width, colour in parts:
        w = width * unit
        ax.add_patch(Rectangle((x, y), w, BAR_H, facecolor=colour, edgecolor="white", lw=0.4))
        x += w
    ax.add_patch(Rectangle((0, y), x, BAR_H, facecolor="none", edgecolor=EDGE, lw=0.6))
    return x


def draw(fig: Any, data: Any) -> None:
    """Five rows of cached vectors, widths in proportion to bytes, then the window's timeline."""
    cfg = json.loads(CONFIG.read_text(encoding="utf-8"))
    layers, heads, head_dim = (
        cfg["num_hidden_layers"],
        cfg["num_attention_heads"],
        cfg["head_dim"],
    )
    per_layer = {
        name: data.value(f"designs.bytes_per_token_{name}", unit="B") / layers
        for name in ("mha", "gqa", "mqa", "mla")
    }
    fp8 = data.value("fp8-cache.bytes_per_token_fp8", unit="B") / layers
    kv = {name: int(per_layer[name] / (2 * head_dim * 2)) for name in ("mha", "gqa", "mqa")}
    if kv["mha"] != heads:  # the drawing must tell the record's sums
        raise ValueError(f"the record gives {kv['mha']} key-value heads for MHA, config {heads}")
    rope = 64  # the rotary part of each latent, as in DeepSeek-V2 and V3
    latent = per_layer["mla"] / 2 - rope
    fp8_kv = kv["gqa"]
    fp8_scale = fp8 / (2 * fp8_kv) - head_dim  # bytes of scale per stored vector
    sliding_cache = data.value("designs.cache_32k_sliding", unit="B")
    conversation = 32768
    per_window_token = data.value("designs.bytes_per_token_sliding", unit="B") / 2
    window = sliding_cache / per_window_token - conversation

    fig.set_size_inches(7.0, 5.6)
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [4.2, 1.4]})
    for ax in (top, bottom):
        ax.set_axis_off()
    unit = 1.0 / per_layer["mha"]  # the multi-head row spans the whole width
    vec = head_dim * 2  # bytes of one bf16 key or value vector

    rows = [
        (
            f"multi-head (MHA): a key and a value for each of the {heads} query heads",
            [(vec, KEY)] * kv["mha"] + [(vec, VALUE)] * kv["mha"],
            per_layer["mha"],
        ),
        (
            f"grouped-query (GQA): {kv['gqa']} key-value heads,"
            f" each shared by {heads // kv['gqa']} query heads",
            [(vec, KEY)] * kv["gqa"] + [(vec, VALUE)] * kv["gqa"],
            per_layer["gqa"],
        ),
        (
            f"multi-query (MQA): one key-value head shared by all {heads}",
            [(vec, KEY), (vec, VALUE)],
            per_layer["mqa"],
        ),
        (
            f"latent (MLA): one {latent:.0f}-number latent + a {rope}-number rotary key",
            [(latent * 2, LATENT), (rope * 2, ROPE)],
            per_layer["mla"],
        ),
        (
            "GQA in 8 bits: 1 byte per number, plus a 4-byte scale per vector",
            [(head_dim, KEY), (fp8_scale, SCALE)] * fp8_kv
            + [(head_dim, VALUE), (fp8_scale, SCALE)] * fp8_kv,
            fp8,
        ),
    ]
    y = 0.0
    for label, parts, total in rows:
        right = blocks(top, y, parts, unit)
        top.text(0, y + BAR_H + 0.08, label, fontsize=9, va="bottom", ha="left")
        top.text(
            right + 0.012,
            y + BAR_H / 2,
            f"{total:,.0f} B",
            fontsize=9,
            va="center",
            ha="left",
            fontweight="bold",
        )
        y -= 1.0
    top.set_xlim(0, 1.13)
    top.set_ylim(y + 0.7, BAR_H + 0.85)
    top.text(
        0,
        BAR_H + 0.67,
        "Bytes per token, one layer (to scale)",
        fontsize=10,
        fontweight="bold",
        va="center",
    )

    for i, (label, colour) in enumerate(
        (("key", KEY), ("value", VALUE), ("latent", LATENT), ("rotary key", ROPE))
    ):
        x = (0.64, 0.74, 0.865, 0.99)[i]
        top.add_patch(
            Rectangle((x, BAR_H + 0.55), 0.03, 0.25, facecolor=colour, edgecolor=EDGE, lw=0.4)
        )
        top.text(x + 0.037, BAR_H + 0.67, label, fontsize=9, va="center")

    # the sliding window: which tokens each kind of layer keeps in a 32K conversation
    bottom.set_xlim(0, 1.13)
    bottom.set_ylim(-1.45, 1.05)
    bottom.text(
        0,
        0.95,
        f"Sliding window ({window:,.0f} tokens) on every other layer, GQA otherwise",
        fontsize=10,
        fontweight="bold",
        va="top",
    )
    for yy, label, start in (
        (0.0, "global layer: all 32,768 tokens", 0.0),
        (-1.0, f"window layer: the last {window:,.0f} only", 1 - window / conversation),
    ):
        bottom.add_patch(
            Rectangle((0, yy), 1.0, BAR_H, facecolor="white", edgecolor="#999999", lw=0.6)
        )
        bottom.add_patch(
            Rectangle((start, yy), 1.0 - start, BAR_H, facecolor=KEY, edgecolor=EDGE, lw=0.5)
        )
        bottom.text(1.012, yy + BAR_H / 2, label, fontsize=9, va="center", ha="left")
    bottom.text(0, -1.12, "oldest token", fontsize=9, va="top", ha="left", color="#555555")
    bottom.text(1.0, -1.12, "newest", fontsize=9, va="top", ha="right", color="#555555")
