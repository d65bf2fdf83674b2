"""How a learner gets a lab and installs what it needs: one source for the page's "Get the files"
section and the zip's START-HERE.md, so both show the same lines.

The install is one command: the lab's own requirements (its `all` extra when it has one) together
with the engine versions the page's run recorded, so pip resolves them once and downloads each
package once.
"""

from __future__ import annotations

import html
import shlex
import tomllib
from pathlib import Path

from ..lab.load import LoadedLab
from ..record.models import Run
from .context import PageContext
from .macros import macro

PYTHON = "3.11"
"""The oldest Python the labs support (each lab's pyproject says `requires-python >= 3.11`)."""


def lab_spec(folder: Path) -> str | None:
    """What to install from the lab's pyproject.toml: `.[all]` when it has that extra, else `.`."""
    path = folder / "pyproject.toml"
    if not path.is_file():
        return None
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    extras = project.get("optional-dependencies", {})
    if "all" in extras:
        return ".[all]"
    return "." if project.get("dependencies") or extras else None


def pins(run: Run, lab: LoadedLab) -> list[str]:
    """The lab's Python engine packages at the versions the run recorded (`transformers==5.17.0`);
    native builds such as llama.cpp are not pip packages and are left out."""
    engine = run.record.engine
    names = [n for n in lab.lab.engine if n not in lab.lab.builds]
    return [f"{n}=={engine[n]}" for n in sorted(names) if engine.get(n)]


def install_commands(lab: LoadedLab, run: Run) -> list[str]:
    """A virtual environment and the one install command, as shell lines typed in `lab/`."""
    lines = ["python3 -m venv .venv && . .venv/bin/activate"]
    wanted = [w for w in [lab_spec(lab.folder), *pins(run, lab)] if w]
    if wanted:
        lines.append("pip install " + " ".join(shlex.quote(w) for w in wanted))
    return lines


def get_files_commands(lab: LoadedLab, run: Run, zip_name: str) -> list[str]:
    """From the downloaded zip to a lab ready to run: unpack, enter `lab/`, install."""
    top = zip_name.removesuffix(".zip")
    return [f"unzip {zip_name} && cd {top}/lab", *install_commands(lab, run)]


def zip_name(lesson: str) -> str:
    """The lesson zip's file name under `downloads/`."""
    return f"{lesson}.zip"


@macro
def get_files(ctx: PageContext) -> str:
    """The "Get the files" block: the zip to download and the lines that make the lab ready."""
    name = zip_name(ctx.lesson)
    link = f"{ctx.to_root()}downloads/{html.escape(name, quote=True)}"
    lines = "\n".join(get_files_commands(ctx.lab, ctx.run, name))
    return (
        f'Download <a href="{link}" download>the lab ({html.escape(name)})</a>, then in a '
        f"terminal, with Python {PYTHON} or newer:\n\n```text\n{lines}\n```\n\n"
        "The same lines open START-HERE.md inside the zip, which walks through every step."
    )
