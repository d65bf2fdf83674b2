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
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's own package index of CPU-only builds: without it, pip installs the CUDA build
(with its CUDA libraries, about 4.9 GB) even on a machine without a GPU."""


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


def needs_torch(lab: LoadedLab) -> bool:
    """Whether the lab installs PyTorch (an engine package or a requirement of its pyproject)."""
    if "torch" in lab.lab.engine:
        return True
    path = lab.folder / "pyproject.toml"
    if not path.is_file():
        return False
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    wanted = [*project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        wanted += extra
    return any(_name(w) == "torch" for w in wanted)


def _name(requirement: str) -> str:
    """'torch' from 'torch>=2.4' or 'torch[cuda] ; python_version > "3"'."""
    cut = min((i for i, c in enumerate(requirement) if c in "<>=!~[; "), default=len(requirement))
    return requirement[:cut].strip().lower()


def cpu_install_commands(lab: LoadedLab, run: Run) -> list[str] | None:
    """The install on a machine without an NVIDIA GPU: PyTorch's CPU build first, from its own
    index, then the same line as `install_commands`; None when the lab installs no PyTorch."""
    if not needs_torch(lab):
        return None
    torch = next((p for p in pins(run, lab) if p.startswith("torch==")), "torch")
    first, *rest = install_commands(lab, run)
    return [first, f"pip install {torch} --index-url {TORCH_CPU_INDEX}", *rest]


def get_files_commands(lab: LoadedLab, run: Run, zip_name: str) -> list[str]:
    """From the downloaded zip to a lab ready to run: unpack, enter `lab/`, install."""
    top = zip_name.removesuffix(".zip")
    return [f"unzip {zip_name} && cd {top}/lab", *install_commands(lab, run)]


def zip_name(ctx: PageContext) -> str:
    """The lesson zip's file name under `downloads/`, named by its number: `lesson-2.4.zip`."""
    return f"{ctx.outline.lesson(ctx.lesson).download_stem}.zip"


@macro
def get_files(ctx: PageContext) -> str:
    """The "Get the files" block: the zip to download and the lines that make the lab ready, on a
    machine with an NVIDIA GPU and on one without."""
    name = zip_name(ctx)
    link = f"{ctx.to_root()}downloads/{html.escape(name, quote=True)}"
    guide = f"{ctx.to_root()}before-you-start/"
    lines = "\n".join(get_files_commands(ctx.lab, ctx.run, name))
    text = (
        f'Download <a href="{link}" download>the lab ({html.escape(name)})</a>, then in a '
        f"terminal, with Python {PYTHON} or newer:\n\n```text\n{lines}\n```\n\n"
    )
    cpu = cpu_install_commands(ctx.lab, ctx.run)
    if cpu:
        top = name.removesuffix(".zip")
        cpu_lines = "\n".join([f"unzip {name} && cd {top}/lab", *cpu])
        text += (
            "On a machine without an NVIDIA GPU, install PyTorch's CPU build first (pip would "
            "otherwise fetch the GPU build and its CUDA libraries, gigabytes you do not need):"
            f"\n\n```text\n{cpu_lines}\n```\n\n"
        )
    return text + (
        "The same lines open START-HERE.md inside the zip, which walks through every step. "
        f'Renting a GPU, connecting to it and copying the zip there: <a href="{guide}">Before '
        "you start</a>."
    )
