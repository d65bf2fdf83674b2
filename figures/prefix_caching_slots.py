"""When each of eight requests sharing an 8,000-token manual got its first token, sent all at
once to llama-server with one slot and with four (the `burst` mode of steps 5 and 7, every
round): by slot, and whether the request computed the manual or found it in its slot."""

from __future__ import annotations

from typing import Any

PANELS = (("burst-1", "results/slots_1.json", "one slot"),
          ("burst-4", "results/slots_4.json", "four slots"))  # fmt: skip


def draw(fig: Any, data: Any) -> None:
    """One panel per server: seconds to the first token along x, the slot along y."""
    fig.set_size_inches(6.5, 4.6)
    axes = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2.6]})
    for ax, (step, path, name) in zip(axes, PANELS, strict=True):
        kept = data.kept_json(step, path)
        burst = kept["modes"]["burst"]
        shared = burst["shared"]
        rounds = burst["rounds"]
        for r, got in enumerate(rounds):
            offset = (r - (len(rounds) - 1) / 2) * 0.18
            for request in got["requests"]:
                computed = request["cache_n"] < shared / 2
                ax.scatter(
                    request["ttft"],
                    request["slot"] + offset,
                    s=42,
                    marker="s" if computed else "o",
                    facecolors="#d62728" if computed else "none",
                    edgecolors="#d62728" if computed else "#2ca02c",
                    linewidths=1.5,
                    label=("computed the manual" if computed else "reused it from its slot")
                    if r == 0
                    else None,
                )
        slots = int(kept["slots"])
        ax.set_yticks(range(slots))
        ax.set_yticklabels([f"slot {s}" for s in range(slots)])
        ax.set_ylim(-0.6, slots - 0.4)
        ax.invert_yaxis()
        ax.set_title(f"{name}: eight requests sent at once, {len(rounds)} rounds", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    handles, labels = axes[1].get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes[1].legend(unique.values(), unique.keys(), fontsize=9, loc="lower left")
    axes[1].set_xlabel("seconds from sending the eight requests to each one's first token")
    axes[1].set_xlim(left=0)
