"""A lesson's pages evaluated against one run, without HTML: what `course diff` compares.

Each page that names the lesson is rendered by `render.render_page` with the run given; its claims,
its predict checks' revealed answers and the values each figure reads are collected into a
`PageSide`. A page that could not be rendered is named in `unread`, never silently left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..lab.load import load_lab
from ..record.models import Run, build_step_id
from ..record.noise import BUILD_FACTS, Rules
from .claims import claim_line, plain_text
from .context import FigureData, PageContext
from .lessons import scan
from .render import render_page
from .widgets import load_drawer, script_failure

_FIGURE = re.compile(r"""figure\(\s*["']([\w-]+)["']""")
KEPT = "file:"
"""How a figure's use of a kept file is named in `PageSide.figures`: `file:step/path`."""
_REFERENCE = re.compile(r"[a-z0-9][a-z0-9-]*\.[a-z_][a-z0-9_]*")


@dataclass
class PageSide:
    """What the lesson's pages show with one run: claims, checks' revealed answers, figures'
    inputs.
    """

    claims: list[tuple[str, str, str, bool, dict[str, str], int | None]] = field(
        default_factory=list
    )
    """(page, text, condition, holds, values read, the line it is written on)"""
    reveals: dict[str, str] = field(default_factory=dict)
    """'page#check' -> the revealed measured answer as shown"""
    figures: dict[str, list[str]] = field(default_factory=dict)
    """'page: figure' -> the values (`step.name`) and kept files (`file:step/path`) it draws
    from"""
    unread: list[str] = field(default_factory=list)
    """Pages or figures that could not be evaluated on this run, each with why."""


def figure_inputs(root: Path, context: PageContext, name: str) -> tuple[list[str], str | None]:
    """What a figure draws from, found by drawing it off-screen: the values (`step.name`) and
    the kept files (`file:step/path`) it read; and any error."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    script = root / "figures" / f"{name}.py"
    draw = load_drawer(script, f"figures/{name}.py")
    data = FigureData(context)
    error = None
    try:
        draw(Figure(), data)
    except Exception as exc:  # noqa: BLE001 - the author's figure script; the diff names the failure
        error = script_failure(exc, script, f"figures/{name}.py")
    used: set[str] = set()
    for key in data.reads:
        if key[0] == "value":
            used.update(_REFERENCE.findall(key[1]))
        elif key[0] == "file":
            used.add(f"{KEPT}{key[1]}/{key[2]}")
    return sorted(used), error


def evaluate_pages(root: Path, lesson: str, run: Run) -> PageSide:
    """Claims, revealed answers and figure inputs of every page of `lesson`, against `run`."""
    side = PageSide()
    for entry in scan(root / "docs"):
        if entry.meta.lesson != lesson:
            continue
        rendered = render_page(root, entry, run, strict=False)
        ctx, page = rendered.context, f"docs/{entry.src}"
        if rendered.markdown is None:
            why = "; ".join(p.message for p in ctx.problems)
            side.unread.append(f"{page}: not rendered on {run.run_id}: {why}")
        source = (root / page).read_text(encoding="utf-8")
        for result in ctx.claim_results:
            line = claim_line(source, result.condition)
            side.claims.append(
                (page, result.text, result.condition, result.holds, dict(result.values), line)
            )
        for check_id, shown in ctx.reveals.items():
            side.reveals[f"{page}#{check_id}"] = plain_text(shown)
        for name in sorted(set(_FIGURE.findall(rendered.body))):
            inputs, error = figure_inputs(root, ctx, name)
            side.figures[f"{page}: {name}"] = inputs
            if error:
                side.unread.append(f"{page}: figure {name} failed on {run.run_id}: {error}")
    return side


def rules_of(root: Path, lesson: str) -> Rules:
    """What the lesson's lab.yml declares about its values (`scales: exact`, `scales: free`, its
    noise between hosts, for all values and by pattern) and its builds' dates and durations, for
    `course diff`: none when the lesson has no lab.yml any more; a lab.yml that cannot be read
    is a LabError naming it, not a diff judged without its declarations."""
    path = root / "lab" / lesson / "lab.yml"
    if not path.is_file():
        return Rules()
    lab = load_lab(path).lab

    def declared(kind: str) -> frozenset[str]:
        found = set()
        for step in lab.steps:
            for name, capture in getattr(step, "capture", {}).items():
                scales = capture.scales or getattr(step, "scales", None)  # the step's, by default
                if scales is not None and scales.kind == kind:
                    found.add(f"{step.id}.{name}")
        return frozenset(found)

    facts = {
        f"{build_step_id(name)}.{value}": why
        for name in lab.builds
        for value, why in BUILD_FACTS.items()
    }
    return Rules(
        declared("exact"),
        declared("free"),
        lab.noise.between_hosts / 100,
        tuple((pattern, pct / 100) for pattern, pct in lab.noise.values.items()),
        facts,
    )
