"""Where a lesson's lab is: a name that names a folder under `lab/`, and nothing else."""

from __future__ import annotations

from pathlib import Path

from ..errors import RunError
from ..record.store import LESSON_NAME


def lab_path(root: Path, lesson: str) -> Path:
    """Where a lesson's recipe lives; RunError unless the lesson is a name that names a folder
    under lab/ (a path that leaves lab/, through '..' or a link, is refused)."""
    labs = root / "lab"
    known = ", ".join(sorted(p.parent.name for p in labs.glob("*/lab.yml"))) or "none"
    if not LESSON_NAME.match(lesson):
        raise RunError(
            f"'{lesson}' is not a lesson name: expected lowercase letters, digits and '-', naming "
            f"a folder under lab/ (lessons: {known})"
        )
    path = labs / lesson / "lab.yml"
    if path.exists() and not path.resolve().is_relative_to(labs.resolve()):
        raise RunError(
            f"lab/{lesson}/lab.yml leads outside lab/ (to {path.resolve()}); a lab is run only "
            "from its own folder under lab/"
        )
    return path
