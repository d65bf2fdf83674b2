"""Where a lesson pins an engine release, and the pins moved to a new one.

Learners see a release in three places. The page's "Get the files" lines and the zip's
START-HERE.md are made from the record (`pages.install.pins`): they follow the newest good run by
themselves. The lab's own files are written by hand: its `pyproject.toml` (and any
`requirements*.txt`), its README.md and the lesson's pages; there each `NAME==OLD` becomes
`NAME==NEW`. A sentence that names the old release in prose ("transformers 5.17.0") may state a
fact about that release, so it is listed for an author, not rewritten; so is a range in the lab's
requirements that leaves the new release out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..lab.load import LoadedLab
from ..pages.lessons import scan

_QUOTED = re.compile(r"""["']([^"'\n]+)["']""")


@dataclass(frozen=True)
class Place:
    """A line of a file, relative to the project, and what it holds or became."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _name(name: str) -> str:
    """A package name matching every spelling pip accepts (`huggingface_hub`, `Huggingface-Hub`)."""
    return "[-_.]+".join(re.escape(part) for part in re.split(r"[-_.]+", name))


def pin_pattern(name: str, version: str) -> re.Pattern[str]:
    """`NAME==VERSION` (extras allowed), not part of a longer name or version."""
    return re.compile(
        rf"(?<![\w.-])({_name(name)}(?:\[[^\]]*\])?\s*==\s*){re.escape(version)}(?!\w|\.\w)",
        re.IGNORECASE,
    )


def prose_pattern(name: str, version: str) -> re.Pattern[str]:
    """The release named in prose: `NAME 5.17.0`, `NAME (5.17.0)`, `NAME v5.17.0`."""
    return re.compile(
        rf"(?<![\w.-]){_name(name)}\W{{0,3}}\s*\(?v?{re.escape(version)}(?!\w|\.\w)",
        re.IGNORECASE,
    )


def lesson_files(root: Path, loaded: LoadedLab) -> list[Path]:
    """The hand-written files of a lesson that may name a release: the lab's requirements and
    README, its Python files, and its pages with their data files."""
    folder = loaded.folder
    files = [
        folder / "pyproject.toml",
        folder / "README.md",
        *sorted(folder.glob("requirements*.txt")),
    ]
    files += sorted(folder.glob("*.py"))
    for entry in scan(root / "docs"):
        if entry.meta.lesson == loaded.lab.lesson:
            page = root / "docs" / entry.src
            files += [page, page.with_suffix(".yml")]
    return [f for f in files if f.is_file()]


def _shown(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def rewrite_pins(root: Path, files: list[Path], name: str, old: str, new: str) -> list[Place]:
    """`NAME==OLD` -> `NAME==NEW` in these files (not in Python files); each line changed."""
    pattern = pin_pattern(name, old)
    changed = []
    for path in files:
        if path.suffix == ".py":
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines):
            moved = pattern.sub(lambda m: m.group(1) + new, line)
            if moved != line:
                lines[number] = moved
                changed.append(Place(_shown(root, path), number + 1, moved.strip()))
        if "".join(lines) != text:
            path.write_text("".join(lines), encoding="utf-8")
    return changed


def pinned_at(root: Path, files: list[Path], name: str, version: str) -> list[Place]:
    """Lines that pin `NAME==VERSION` (Python files aside)."""
    pattern = pin_pattern(name, version)
    found = []
    for path in files:
        if path.suffix == ".py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if pattern.search(line):
                found.append(Place(_shown(root, path), number, line.strip()))
    return found


def mentions(root: Path, files: list[Path], name: str, old: str) -> list[Place]:
    """Lines that name the old release in prose, for an author to read again."""
    pattern = prose_pattern(name, old)
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if pattern.search(line):
                found.append(Place(_shown(root, path), number, line.strip()))
    return found


def ranges_leaving_out(root: Path, files: list[Path], name: str, new: str) -> list[Place]:
    """Requirements of the lab (quoted in pyproject.toml, or lines of requirements*.txt) that name
    the engine with a range the new release falls outside."""
    found = []
    for path in files:
        if path.name != "pyproject.toml" and not path.name.startswith("requirements"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            body = line.split("#", 1)[0]
            texts = _QUOTED.findall(body) if path.suffix == ".toml" else [body.strip()]
            for text in texts:
                try:
                    req = Requirement(text)
                except InvalidRequirement:
                    continue
                if canonicalize_name(req.name) == canonicalize_name(name) and not (
                    req.specifier.contains(new, prereleases=True)
                ):
                    found.append(Place(_shown(root, path), number, text))
    return found
