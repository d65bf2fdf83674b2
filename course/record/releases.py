"""What the package index last said about the engines' releases, kept in `.cache/releases.json`.

`course outdated` asks the index and writes the answer here with its date; the authors' freshness
page reads it, so a build never goes to the network. Each engine is named as a run records it
(`transformers`, or a build's name such as `llama.cpp`), with the index package it was looked up as.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, ValidationError

from .files import dump_json, write_atomic

RELEASES = Path(".cache") / "releases.json"


class Release(BaseModel):
    """The newest release of one engine on the index (None: the index does not hold it)."""

    model_config = ConfigDict(extra="forbid")
    package: str
    newest: str | None


class Releases(BaseModel):
    """The index's answer, and when it was given."""

    model_config = ConfigDict(extra="forbid")
    checked: str
    """When the index was asked (ISO 8601, UTC)."""
    index: str
    """The simple repository API's address that answered."""
    engines: dict[str, Release] = {}

    @property
    def checked_on(self) -> str:
        """The day of the check, as `2026-12-01`."""
        return datetime.fromisoformat(self.checked.replace("Z", "+00:00")).date().isoformat()


def load_releases(root: Path) -> Releases | None:
    """The kept answer, or None when there is none (or it cannot be read: it is only a cache)."""
    path = root / RELEASES
    try:
        return Releases.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None


def save_releases(root: Path, releases: Releases) -> Path:
    """Keep an answer, merged over the kept one (engines asked before and not now stay)."""
    kept = load_releases(root)
    if kept is not None and kept.index == releases.index:
        releases = releases.model_copy(update={"engines": {**kept.engines, **releases.engines}})
    path = root / RELEASES
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, dump_json(releases.model_dump(mode="json")))
    return path


def public(version: str) -> Version | None:
    """A version without its local part (`2.11.0+cu130` -> 2.11.0); None if it is not one."""
    try:
        return Version(Version(version).public)
    except InvalidVersion:
        return None


def is_newer(newest: str | None, recorded: str | None) -> bool:
    """Whether the index's newest release is newer than the recorded one."""
    if newest is None or recorded is None:
        return False
    a, b = public(newest), public(recorded)
    return a is not None and b is not None and a > b
