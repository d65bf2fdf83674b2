"""A page's figure, drawn from its run and kept between builds: drawn again only when what it read
changed.

A drawing is keyed by the figure script's source, matplotlib's version and everything
`draw(fig, data)` read (`context.FigureData.reads`): each value as recorded, each kept file by
the sha256 the record gives it, and the run's id if it asked for the whole run. The reads are
kept beside the SVG and PNG in `<cache>/<lesson>/<name>.json`; the next build reads the same
things from its own run and, when they and the script are unchanged, copies the kept drawing
instead of importing matplotlib and drawing it again. A new run whose numbers and files did not
move therefore redraws nothing; a kept file with a new hash redraws the figures that read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

from .context import FigureData
from .widgets import Drawn, draw_figure, load_drawer

FORMAT = 1
"""Bump when the way figures are drawn changes (size, style), so kept drawings are not reused."""


def figure(
    script: Path, shown: str, data: FigureData, site_dir: Path, rel_stem: str, keep: Path | None
) -> tuple[Drawn, bool]:
    """Draw `script` into `<site>/<rel_stem>.svg` and `.png`, or copy the drawing kept at `keep`
    (`<cache>/<lesson>/<name>`, None: keep nothing); (the files, whether it was reused)."""
    source = hashlib.sha256(script.read_bytes()).hexdigest() if script.is_file() else ""
    if keep is not None:
        kept = _reusable(keep, source, data)
        if kept is not None:
            target = site_dir / rel_stem
            target.parent.mkdir(parents=True, exist_ok=True)
            for suffix in (".svg", ".png"):
                shutil.copyfile(keep.with_suffix(suffix), target.with_suffix(suffix))
            return Drawn(f"{rel_stem}.svg", f"{rel_stem}.png", kept[0], kept[1]), True
    drawn = draw_figure(load_drawer(script, shown), data, site_dir, rel_stem)
    if keep is not None:
        _remember(keep, source, data, site_dir / rel_stem, drawn)
    return drawn, False


def _drawn_by(source: str) -> dict[str, Any]:
    """What else than its reads a drawing depends on."""
    return {"format": FORMAT, "matplotlib": version("matplotlib"), "source": source}


def _reusable(keep: Path, source: str, data: FigureData) -> tuple[int, int] | None:
    """(width, height) of the kept drawing when it may be reused."""
    try:
        saved = json.loads(keep.with_suffix(".json").read_text(encoding="utf-8"))
        same = all(saved[k] == v for k, v in _drawn_by(source).items())
        reads = {tuple(item[:-1]): item[-1] for item in saved["reads"]}
        size = (int(saved["width"]), int(saved["height"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    files_there = keep.with_suffix(".svg").is_file() and keep.with_suffix(".png").is_file()
    if same and files_there and data.unchanged(reads):
        return size
    return None


def _remember(keep: Path, source: str, data: FigureData, drawn_at: Path, drawn: Drawn) -> None:
    """Keep the drawing and what it read; the manifest is written last, so a half-kept drawing
    is never reused."""
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.with_suffix(".json").unlink(missing_ok=True)
    for suffix in (".svg", ".png"):
        shutil.copyfile(drawn_at.with_suffix(suffix), keep.with_suffix(suffix))
    manifest = _drawn_by(source) | {
        "reads": sorted([*key, value] for key, value in data.reads.items()),
        "width": drawn.width,
        "height": drawn.height,
    }
    tmp = keep.with_name(f".{keep.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, keep.with_suffix(".json"))
