"""Figures drawn once per input: the SVG and PNG of a figure kept in the build's cache.

A figure is a function of its figure module (and any other module of `figures/` it may import),
the run it reads (a run is added, never rewritten, so its `run.json` stands for it) and the
version of matplotlib. When none of these changed, the kept files are copied into the site
instead of drawing again: drawing is most of the time of a build where nothing changed (about
0.15 s a figure, against milliseconds for a copy). A figure that fails is never kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..record.files import RUN_FILE
from ..record.models import Run
from .widgets import Drawn

FORMAT = "figure-1"
"""Bump when the way figures are drawn changes, so kept figures are not reused."""
CACHE = Path(".cache") / "package"
"""The build's cache under the project, unless the build names another (`build_site(cache_dir)`):
the PDFs and zips in a folder per lesson, figures in `.figures/`, social cards in `.cards/`."""
EXTRA = "course_cache"
"""The mkdocs `extra` key through which `build_site` names the cache to the pages."""


def cache_of(config: Any) -> Path:
    """The build's cache folder, from the mkdocs configuration."""
    given = (config.get("extra") or {}).get(EXTRA)
    return Path(given) if given else Path(config.config_file_path).resolve().parent / CACHE


def figure_key(figures: Path, name: str, run: Run, target: str) -> str:
    """A hash of everything a figure is drawn from."""
    import matplotlib

    digest = hashlib.sha256(f"{FORMAT}\0{matplotlib.__version__}\0{name}\0{target}\0".encode())
    for module in sorted(figures.glob("*.py")):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    digest.update((run.folder / RUN_FILE).read_bytes())
    return digest.hexdigest()


def drawn_once(
    cache: Path, key: str, site_dir: Path, target: str, draw: Callable[[], Drawn]
) -> Drawn:
    """The figure's files put in the site at `target` (.svg and .png): copied when kept, else
    drawn by `draw()` and kept."""
    kept = cache / key
    size = kept / "size.json"
    out = site_dir / target
    if size.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        for suffix in (".svg", ".png"):
            shutil.copyfile(kept / f"figure{suffix}", out.with_suffix(suffix))
        width, height = json.loads(size.read_text(encoding="utf-8"))
        return Drawn(f"{target}.svg", f"{target}.png", width, height)
    drawn = draw()
    tmp = cache / f".{key}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for suffix in (".svg", ".png"):
        shutil.copyfile(out.with_suffix(suffix), tmp / f"figure{suffix}")
    (tmp / "size.json").write_text(json.dumps([drawn.width, drawn.height]), encoding="utf-8")
    shutil.rmtree(kept, ignore_errors=True)
    os.replace(tmp, kept)
    return drawn
