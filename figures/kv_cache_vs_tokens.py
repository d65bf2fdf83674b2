"""Memory of Qwen3-8B on the GPU: weights plus the KV cache, against the tokens held in the
cache.
"""

GIB = 1024**3


def draw(fig, data):
    """Weights + cache for both models as straight lines; the GPU's memory, and as the ceiling
    vLLM's share of it less the working space paid inside the share (step 5's rule)."""
    gpu = data.value("cache-budget.gpu_memory", unit="GiB")
    share = data.value("cache-budget.share")
    usable = data.value(
        "cache-budget.gpu_memory * cache-budget.share - cache-budget.work - cache-budget.outside",
        unit="GiB",
    )
    weights_8b = data.value("gpu-check.weights_8b", unit="GiB")
    weights_06b = data.value("gpu-check.weights_06b", unit="GiB")
    per_token_8b = data.value("size.bytes_per_token_8b", unit="GiB")
    per_token_06b = data.value("size.bytes_per_token_06b", unit="GiB")
    budget_tokens = data.value("cache-budget.tokens")
    top = budget_tokens * 1.15
    xs = [0, top]
    ax = fig.subplots()
    ax.plot(
        [x / 1000 for x in xs],
        [weights_8b + x * per_token_8b for x in xs],
        color="#1f77b4",
        lw=2,
        label="Qwen3-8B: weights + cache",
    )
    ax.plot(
        [x / 1000 for x in xs],
        [weights_06b + x * per_token_06b for x in xs],
        color="#ff7f0e",
        lw=2,
        label="Qwen3-0.6B: weights + cache",
    )
    ax.axhline(gpu, color="black", lw=1)
    ax.axhline(usable, color="black", lw=1, ls="--")
    ax.axhline(weights_8b, color="#1f77b4", lw=1, ls=":")
    # labels at the left, above their lines, where no rising line crosses them
    ax.text(0, gpu, f" GPU memory, {gpu:.0f} GiB", va="bottom", ha="left", fontsize=9)
    ax.text(
        0,
        usable,
        f" vLLM's share, {share:.0%}, less its working space: {usable:.0f} GiB",
        va="bottom",
        ha="left",
        fontsize=9,
    )
    ax.text(
        budget_tokens / 2000,
        weights_8b,
        f"Qwen3-8B weights alone, {weights_8b:.1f} GiB",
        va="bottom",
        ha="center",
        fontsize=9,
    )
    ax.axvline(budget_tokens / 1000, color="#1f77b4", lw=1, ls="--")
    ax.text(
        budget_tokens / 1000,
        4,
        f"{budget_tokens / 1000:,.0f}k tokens ",
        ha="right",
        fontsize=9,
        color="#1f77b4",
    )
    ax.set_xlabel("tokens held in the KV cache (thousands), all conversations together")
    ax.set_ylabel("GPU memory (GiB)")
    ax.set_xlim(0, top / 1000)
    ax.set_ylim(0, gpu * 1.08)
    ax.legend(loc="center right", fontsize=9)
    ax.grid(alpha=0.3)
