"""Other engine releases for one run: `course run LESSON --engine transformers==X.Y.Z`.

The packages asked for are installed, without their dependencies, into a folder of their own
under `.cache/engines/` (kept between runs, keyed by what was asked), and the runner puts that
folder first
on the PYTHONPATH it gives the steps (and the engine-version query). The installed packages stay
untouched, and the record's engine
versions, read through the same path, say which release ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import RunError

COMPLETE = ".complete"


def overlay(root: Path, python: str, specs: list[str], wheels: Path | None = None) -> Path:
    """The folder holding `specs` for `python`, installed once (offline from `wheels` if given)."""
    key = hashlib.sha256(
        json.dumps([python, sorted(specs), str(wheels or "")]).encode()
    ).hexdigest()[:16]
    target = root / ".cache" / "engines" / key
    if (target / COMPLETE).is_file():
        return target
    partial = target.with_name(f"{key}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-compile",
        "--disable-pip-version-check",
        "--target",
        str(partial),
        *specs,
    ]
    if wheels is not None:
        command += ["--no-index", "--find-links", str(wheels)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join(
            f"  | {line}" for line in (done.stdout + done.stderr).strip().splitlines()[-10:]
        )
        where = f" from {wheels}" if wheels else ""
        raise RunError(
            f"--engine {' '.join(specs)}: pip could not install it{where} "
            f"(exit status {done.returncode}):\n{tail}"
        )
    (partial / COMPLETE).write_text(json.dumps(specs) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    return target
