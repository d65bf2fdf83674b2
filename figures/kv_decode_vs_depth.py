"""Decode speed against the tokens already cached: measured beside the bytes-bound prediction."""

DEPTHS = [0, 2048, 8192, 16384, 32768]


def draw(fig, data):
    """Two panels, one per model: measured tokens per second and the bytes-bound speed."""
    axes = fig.subplots(1, 2)
    for ax, (key, name) in zip(axes, [("8b", "Qwen3-8B"), ("06b", "Qwen3-0.6B")], strict=False):
        measured = [data.value(f"decode-speed.tok_s_{key}_d{d}", unit="tok/s") for d in DEPTHS]
        bound = [data.value(f"decode-speed.bound_{key}_d{d}", unit="tok/s") for d in DEPTHS]
        ks = [d / 1024 for d in DEPTHS]
        ax.plot(
            ks, bound, color="gray", ls="--", marker="o", ms=3, label="bytes bound (prediction)"
        )
        ax.plot(ks, measured, color="#1f77b4", marker="o", ms=4, lw=2, label="measured")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("tokens already cached (Ki)")
        ax.set_ylim(0, max(bound) * 1.1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("tokens per second")
    axes[0].legend(fontsize=8, loc="lower left")
