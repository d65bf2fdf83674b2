"""A lab folder's files: what a learner gets, without caches and virtual environments."""

from __future__ import annotations

import fnmatch
import glob
import os
from pathlib import Path

IGNORED_PARTS = {"__pycache__", ".venv", "venv", ".git", ".ipynb_checkpoints", ".pytest_cache"}
IGNORED_SUFFIXES = {".pyc", ".pyo"}


def lab_files(folder: Path) -> list[str]:
    """Every file of a lab folder, relative and sorted, without caches and virtual environments."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if any(part in IGNORED_PARTS for part in rel.parts) or p.suffix in IGNORED_SUFFIXES:
            continue
        if p.is_file() and not p.is_symlink():
            out.append(rel.as_posix())
    return sorted(out)


def expand_inputs(
    folder: Path, globs: list[str], extra: list[str] | None = None, files: list[str] | None = None
) -> dict[str, list[str]]:
    """Each input glob of a step with the lab files it matches (and the `extra` names, included
    from other labs, that it matches by name); `files`, the folder's `lab_files` when known."""
    own = set(lab_files(folder) if files is None else files)
    result = {}
    for pattern in globs:
        matched = sorted(
            Path(m).relative_to(folder).as_posix()
            for m in glob.glob(str(folder / pattern), recursive=True)
        )
        found = [m for m in matched if m in own]
        found += [name for name in extra or [] if fnmatch.fnmatch(name, pattern)]
        result[pattern] = sorted(set(found))
    return result


def link_loops(folder: Path) -> list[tuple[str, str]]:
    """Links in a lab folder that lead back to a folder holding them (`ln -s . l1`), each as
    (its path in the folder, what it points to): a glob over the folder would walk them
    forever."""
    loops = []
    for current, dirs, _ in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if d not in IGNORED_PARTS]
        for name in dirs:
            link = Path(current) / name
            if link.is_symlink() and link.parent.resolve().is_relative_to(link.resolve()):
                loops.append((link.relative_to(folder).as_posix(), os.readlink(link)))
    return sorted(loops)
