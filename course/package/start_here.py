"""START-HERE.md, the first file of a lesson zip: how to set up, then each step with its command,
its form for a machine without a GPU, what it does and the output it should print, all from the
lab's recipe and the recorded run. Steps are numbered as the page numbers them (`numbering.py`);
every command block is typed as it stands, in order, from the zip's `lab/` folder (the test that
follows them: tests/lessons/test_learner_path.py).
"""

from __future__ import annotations

from ..lab.load import LoadedLab
from ..pages.facts import RENTED_CARD, card_bytes, gpu_need, gpu_steps
from ..pages.format import day, duration, minutes_text
from ..pages.install import PYTHON, cpu_install_commands, install_commands, lab_spec, pins
from ..pages.numbering import step_labels
from ..record.models import Run
from .start_steps import GIB, build_section, fenced, step_section
from .start_steps import machine as machine_of

START_HERE = "START-HERE.md"
GUIDE = "Before you start"
"""The course's page for learners on renting a GPU, connecting and copying a lab there."""


def start_here(
    lab: LoadedLab, run: Run, pdf_name: str, page: str | None = None, guide: str | None = None
) -> str:
    """The guide to the zip: set-up, then every step with its command, purpose, output and time.

    `page` is the lesson page's Markdown (its "Step N" headings number the steps); `guide` the
    address of the course's "Before you start" page, when the site has one.
    """
    record = run.record
    machine = machine_of(run, lab)
    steps = lab.lab.steps
    labels = step_labels(page, [s.id for s in steps])
    lines = [
        f"# {lab.lab.title}: start here",
        "",
        f'This folder is the lab of the lesson "{lab.lab.title}", ready to run on your own '
        "machine.",
        "",
        f"- `{pdf_name}`: the lesson's page, to read or print.",
        "- `figures/`: the page's figures as PNG.",
        "- `lab/`: the lab's files, exactly as the course runs them.",
        "",
        (
            f"The outputs and times below are from our recorded run `{record.run_id}`, made on "
            f"{machine} on {day(record.started)}. Your numbers will differ a little on another "
            "machine; the shape of the results should not. The steps are numbered as the page "
            "numbers them."
        ),
        "",
        *_before_you_start(lab, run, machine, labels, guide),
    ]
    for step in steps:
        for name in step.uses:  # how to get an engine, right before the first step that uses it
            if next(s for s in steps if name in s.uses) is step:
                lines += build_section(lab, run, machine, labels, name)
        lines += step_section(step, labels, run, lab)
    lines += compare_section(machine, bool(gpu_steps(lab)))
    total = sum(s.seconds or 0.0 for s in record.steps if s.kind != "build")
    rented = " If you rented a GPU for this lab, stop or delete the machine now: it costs money "
    lines += [
        "## When you are done",
        "",
        f"All {len(steps)} steps took {duration(total)} on {machine}."
        + (rented + "for as long as it runs." if gpu_steps(lab) else ""),
        "",
    ]
    return "\n".join(lines)


def _before_you_start(
    lab: LoadedLab, run: Run, machine: str, labels: dict[str, str], guide: str | None
) -> list[str]:
    """Where to type, the GPU the lab needs (memory from the recorded peaks), the install."""
    lines = [
        "## Before you start",
        "",
        (
            "Every command below runs inside `lab/`. Open a terminal in this folder and type `cd "
            f"lab`. The steps use `{lab.lab.python}` (Python {PYTHON} or newer)."
        ),
        "",
    ]
    needing = gpu_steps(lab)
    where = f" ({guide})" if guide else ""
    if needing:
        lines += [_gpu_text(lab, run, machine, labels), ""]
        lines += [
            (
                "Each of them also runs on a CPU with shrunk models, in the form given beside it: "
                "try the lab there before you rent a GPU. Renting a GPU, connecting to it and "
                f'copying this folder there: the course\'s page "{GUIDE}"{where}.'
            ),
            "",
        ]
    else:
        lines += ["Every step runs on any machine.", ""]
    if lab_spec(lab.folder) or pins(run, lab):
        lines += [
            (
                "Install the lab's requirements with the engine versions we recorded, in a "
                "virtual environment, with one command:"
            ),
            "",
            *fenced("\n".join(install_commands(lab, run)), "bash"),
            "",
        ]
        cpu = cpu_install_commands(lab, run)
        if cpu:
            lines += [
                (
                    "On a machine without an NVIDIA GPU, install PyTorch's CPU build first: "
                    "without it pip fetches the GPU build and its CUDA libraries, gigabytes "
                    "you do not need. Type these lines instead:"
                ),
                "",
                *fenced("\n".join(cpu), "bash"),
                "",
            ]
    setup = lab.lab.setup
    allow = [f"{minutes_text(setup.install_seconds)} for the install"] * bool(setup.install_seconds)
    allow += [f"{minutes_text(setup.download_seconds)} for downloads"] * bool(
        setup.download_seconds
    )
    if allow:
        lines += [f"Allow {' and '.join(allow)} (our estimate, not a timing).", ""]
    return lines


def _gpu_text(lab: LoadedLab, run: Run, machine: str, labels: dict[str, str]) -> str:
    """How many steps need a GPU, with how much memory, and which size themselves to it."""
    needing, steps = gpu_steps(lab), lab.lab.steps
    need = gpu_need(run, lab)
    text = f"{len(needing)} of the {len(steps)} steps need an NVIDIA GPU (marked below)."
    if need.peak is not None and need.step is not None:
        room = card_bytes(lab.folder.parent.parent, RENTED_CARD)  # the project's facts
        fits = (
            ""
            if room is None
            else ": a 24 GB card such as an RTX 4090 runs every step"
            if need.peak <= room
            else ": that is more than a 24 GB card such as an RTX 4090 holds"
        )
        text += (
            f" They need at least {need.peak / GIB:.1f} GiB of GPU memory, the most one of them "
            f"took on {machine} (step {labels[need.step]}){fits}."
        )
    if need.sized:
        peaks = sorted(peak / GIB for _, peak in need.sized)
        shown = f"{peaks[0]:.1f}" if len(peaks) == 1 else f"{peaks[0]:.1f}–{peaks[-1]:.1f}"
        which = ", ".join(labels[s] for s, _ in need.sized)
        one = len(need.sized) == 1
        text += (
            f" Step{'' if one else 's'} {which} size{'s' if one else ''} "
            f"{'itself' if one else 'themselves'} to the card {'it finds' if one else 'they find'}"
            f": {'its peak' if one else 'their peaks'} on {machine} ({shown} GiB) "
            f"{'is' if one else 'are'} a share of its memory, not what "
            f"{'it needs' if one else 'they need'}; on a smaller card "
            f"{'it takes' if one else 'they take'} less."
        )
    return text


def compare_section(machine: str, gpu_lab: bool = True) -> list[str]:
    """How to check one's own run against the page's (the zip's lab/compare.py)."""
    if gpu_lab:
        what = (
            "It reads the results your run wrote (`results/*.json`) and your GPU (through "
            f"`nvidia-smi`), and prints, value by value, the page's number from {machine}, yours, "
            "and what to expect on your card once its memory bandwidth, compute and memory are "
            "accounted for (from the datasheets of common rental GPUs: RTX 4090, L40S, A100, "
            "H100, H200), with a verdict and what to look at where they disagree. Sizes must "
            "match to the byte: it ends with status 1 when one differs. After the CPU form of "
            "the steps it checks the sizes the CPU steps computed and says why the rest cannot "
            "be compared."
        )
    else:
        what = (
            "It reads the results your run wrote (`results/*.json`) and prints, value by value, "
            f"the page's number from {machine} and yours, with a verdict. Sizes must match to "
            "the byte: it ends with status 1 when one differs."
        )
    return [
        "## Compare your numbers with the page's",
        "",
        "When the steps have run, type in `lab/`:",
        "",
        *fenced("python3 compare.py", "bash"),
        "",
        what,
        "",
    ]
