"""`course outdated`: each lesson's engines, as its newest good run recorded them, against the
newest release on the package index; the answer is kept in `.cache/releases.json` with its date.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from ..lab.load import LoadedLab, load_lab
from ..record.files import now_iso
from ..record.releases import Release, Releases, is_newer, save_releases
from ..record.store import Store
from .index import Index, newest_releases


@dataclass(frozen=True)
class EngineRow:
    """One engine of one lesson: recorded, and the newest on the index."""

    lesson: str
    run_id: str | None
    """The newest good run (None: the lesson has none)."""
    engine: str
    """As the run records it: `transformers`, or a build's name (`llama.cpp`)."""
    package: str
    """The package looked up on the index (a build's `package:`)."""
    recorded: str | None
    newest: str | None

    @property
    def outdated(self) -> bool:
        """Whether the index has a newer final release than the one recorded."""
        return is_newer(self.newest, self.recorded)

    @property
    def state(self) -> str:
        """A few words for the table."""
        if self.newest is None:
            return "not on the index"
        if self.recorded is None:
            return "no good run" if self.run_id is None else "not recorded"
        return "newer release" if self.outdated else "up to date"


def labs(root: Path) -> list[LoadedLab]:
    """Every lesson's lab under lab/, by name."""
    return [load_lab(p) for p in sorted((root / "lab").glob("*/lab.yml"))]


def engines_of(loaded: LoadedLab) -> dict[str, str]:
    """A lab's engines as runs record them -> the package to look up on the index."""
    builds = loaded.lab.builds
    found = {name: name for name in loaded.lab.engine if name not in builds}
    found.update({name: build.package for name, build in builds.items()})
    return found


def check(root: Path, index: Index, lessons: list[LoadedLab]) -> tuple[list[EngineRow], Path]:
    """Ask the index about every engine of these labs; the rows, and where the answer was kept."""
    store = Store(root / "build")
    wanted = {name: package for loaded in lessons for name, package in engines_of(loaded).items()}
    newest = newest_releases(index, sorted(set(wanted.values())))
    kept = save_releases(
        root,
        Releases(
            checked=now_iso(),
            index=index.url,
            engines={n: Release(package=p, newest=newest[p]) for n, p in sorted(wanted.items())},
        ),
    )
    rows = []
    for loaded in lessons:
        good = store.newest_good(loaded.lab.lesson, loaded.lab.card)
        for name, package in engines_of(loaded).items():
            recorded = good.record.engine.get(name) if good else None
            rows.append(
                EngineRow(loaded.lab.lesson, good.run_id if good else None, name, package,
                          recorded, newest[package])
            )  # fmt: skip
    return rows, kept


def table(rows: list[EngineRow], index: Index) -> Table:
    """The rows as a terminal table, newer releases marked."""
    shown = Table(title=f"Engines against {index.url}", title_justify="left")
    for column in ("lesson", "engine", "recorded", "newest", "", "newest good run"):
        shown.add_column(column)
    for row in rows:
        engine = row.engine if row.engine == row.package else f"{row.engine} ({row.package})"
        state = f"[bold yellow]{row.state}[/]" if row.outdated else row.state
        shown.add_row(row.lesson, engine, row.recorded or "—", row.newest or "—", state,
                      row.run_id or "—")  # fmt: skip
    return shown


def as_json(rows: list[EngineRow], index: Index, checked: str) -> str:
    """The rows for a script."""
    data = {
        "index": index.url,
        "checked": checked,
        "engines": [
            {
                "lesson": r.lesson,
                "run": r.run_id,
                "engine": r.engine,
                "package": r.package,
                "recorded": r.recorded,
                "newest": r.newest,
                "outdated": r.outdated,
            }  # fmt: skip
            for r in rows
        ],
    }
    return json.dumps(data, indent=2)
