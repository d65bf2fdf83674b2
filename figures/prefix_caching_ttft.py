"""Time to the first token of requests 2 to 4 against the length of the manual they share, with
llama-server's prompt cache on and off (the medians of the `reuse` step)."""

from __future__ import annotations

from typing import Any

LENGTHS = ("1k", "2k", "4k", "8k")


def draw(fig: Any, data: Any) -> None:
    """Milliseconds to the first token against the prompt's tokens, one line per setting."""
    fig.set_size_inches(6.5, 4.0)
    ax = fig.subplots()
    xs = [data.value(f"reuse.prompt_{k}", unit="tok") for k in LENGTHS]
    for key, label, colour, marker in (
        ("off", "cache_prompt off: every token computed", "#d62728", "s"),
        ("on", "cache_prompt on: the shared manual reused", "#2ca02c", "o"),
    ):
        ys = [data.value(f"reuse.ttft_{key}_{k}", unit="ms") for k in LENGTHS]
        ax.plot(xs, ys, color=colour, marker=marker, lw=2, label=label)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:,.0f}" for x in xs])
    ax.set_xlabel("tokens in each request's prompt")
    ax.set_ylabel("ms to the first token (median)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
