"""A lesson's pages evaluated against one run, without HTML: for `course diff`.

Each page that names the lesson is rendered as `course check` renders it, but with the run
given; its claims, its predict checks' revealed answers and the values each figure reads are
collected into a `PageSide`.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from .claims import plain_text
from .diff import PageSide
from .lessons import page_url, read_meta, scan
from .pages import FigureData, PageContext
from .records import Run
from .widgets import load_drawer

_FIGURE = re.compile(r"""figure\(\s*["']([\w-]+)["']""")


class _RecordingData(FigureData):
    """FigureData that notes every value a figure reads."""

    def __init__(self, context: PageContext) -> None:
        super().__init__(context)
        self.read: set[str] = set()

    def value(self, reference: str, unit: str | None = None) -> float:
        self.read.update(re.findall(r"[a-z0-9][a-z0-9-]*\.[a-z_][a-z0-9_]*", reference))
        return super().value(reference, unit)


def figure_inputs(root: Path, context: PageContext, name: str) -> list[str]:
    """The values (`step.name`) a figure draws from, found by drawing it off-screen."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    draw = load_drawer(root / "figures" / f"{name}.py", f"figures/{name}.py")
    data = _RecordingData(context)
    try:
        draw(Figure(), data)
    except Exception:  # noqa: BLE001 - a figure that fails on this run still reads values; keep them
        pass
    return sorted(data.read)


def evaluate_pages(root: Path, lesson: str, run: Run) -> PageSide:
    """Claims, revealed answers and figure inputs of every page of `lesson`, against `run`."""
    env = jinja2.Environment(undefined=jinja2.Undefined, autoescape=False)
    side = PageSide()
    docs = root / "docs"
    for entry in scan(docs):
        meta, raw, body = read_meta(docs / entry.src, f"docs/{entry.src}")
        if meta.lesson != lesson:
            continue
        ctx = PageContext(root, entry.src, meta, raw, page_url(entry.src), None)
        ctx._run = run
        try:
            env.from_string(body).render(page={"meta": raw, "title": entry.title, "url": ctx.url},
                                         config={}, **ctx.bound())
        except jinja2.TemplateError:
            pass  # `course check` reports template errors; the diff compares what it could read
        page = f"docs/{entry.src}"
        for result in ctx.claim_results:
            side.claims.append((page, result.text, result.condition, result.holds, dict(result.values)))
        for check_id, shown in ctx.reveals.items():
            side.reveals[f"{page}#{check_id}"] = plain_text(shown)
        for name in sorted(set(_FIGURE.findall(body))):
            side.figures[f"{page}: {name}"] = figure_inputs(root, ctx, name)
    return side
