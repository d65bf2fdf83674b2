"""Two runs of a lesson side by side (`course diff`): `report` compares, `show` prints."""

from .report import ClaimOutcome, Report, ValueChange, compare, pick_runs
from .show import render_console, render_markdown, summary, to_json

__all__ = [
    "ClaimOutcome",
    "Report",
    "ValueChange",
    "compare",
    "pick_runs",
    "render_console",
    "render_markdown",
    "summary",
    "to_json",
]
