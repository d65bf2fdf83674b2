"""START-HERE.md, the first file of a lesson zip: how to set up, then each step with its command,
what it does and the output it should print, all from the lab's recipe and the recorded run."""

from __future__ import annotations

import re

from ..lab.load import LoadedLab
from ..lab.schema import AnyStep, StartStep, StopStep, step_command
from ..pages.facts import gpu_name
from ..pages.format import day, duration
from ..pages.install import PYTHON, install_commands, lab_spec, pins
from ..record.models import PROMPT, Run, Value

START_HERE = "START-HERE.md"
# Expected output longer than this is shown as its head and tail.
HEAD_LINES = 40
TAIL_LINES = 20
LONG_LINE = 200
_VERSION = re.compile(r"[^0-9A-Za-z.+!_-]")


def start_here(lab: LoadedLab, run: Run, pdf_name: str) -> str:
    """The guide to the zip: set-up, then every step with its command, purpose, output and time."""
    record = run.record
    machine = _machine(run)
    steps = lab.lab.steps
    gpu_steps = [s for s in steps if s.needs == "gpu"]
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
            "machine; the shape of the results should not."
        ),
        "",
        "## Before you start",
        "",
        (
            f"Every command below runs inside `lab/`. Open a terminal in this folder and type `cd "
            "lab`. "
            f"The steps use `{lab.lab.python}` (Python {PYTHON} or newer)."
        ),
        "",
    ]
    if gpu_steps:
        lines += [
            (
                f"{len(gpu_steps)} of the {len(steps)} steps need an NVIDIA GPU (marked below). "
                "Steps without the mark run on any machine, with nothing to install."
            ),
            "",
        ]
    if lab_spec(lab.folder) or pins(run, lab):
        lines += [
            (
                "For the steps that use them, install the lab's requirements with the engine "
                "versions we recorded, in a virtual environment, with one command:"
            ),
            "",
            "```bash",
            *install_commands(lab, run),
            "```",
            "",
        ]
    setup = lab.lab.setup
    spent = [f"installing about {duration(setup.install_seconds)}"] if setup.install_seconds else []
    spent += (
        [f"downloads about {duration(setup.download_seconds)}"] if setup.download_seconds else []
    )
    if spent:
        lines += [f"On our machine, {' and '.join(spent)}.", ""]
    lines += _builds_section(lab, run, machine)
    numbers = {step.id: i for i, step in enumerate(steps, start=1)}
    for index, step in enumerate(steps, start=1):
        lines += _step_section(step, index, len(steps), run, machine, numbers, lab.lab.cpu_args)
    if any(c.scales for step in steps for c in step.capture.values()):
        lines += compare_section(machine)
    total = sum(s.seconds or 0.0 for s in record.steps)
    lines += [
        "## When you are done",
        "",
        (
            f"All {len(steps)} steps took {duration(total)} on {machine}. If you rented a GPU for "
            "this lab, stop or delete the machine now: it costs money for as long as it runs."
        ),
        "",
    ]
    return "\n".join(lines)


def compare_section(machine: str) -> list[str]:
    """How to check one's own run against the page's (the zip's lab/compare.py)."""
    return [
        "## Compare your numbers with the page's",
        "",
        "When the steps have run, type in `lab/`:",
        "",
        *_fenced("python3 compare.py", "bash"),
        "",
        (
            "It reads the results your run wrote (`results/*.json`) and your GPU (through "
            f"`nvidia-smi`), and prints, value by value, the page's number from {machine}, yours, "
            "and what to expect on your card once its memory bandwidth, compute and memory are "
            "accounted for (from the datasheets of common rental GPUs: RTX 4090, L40S, A100, "
            "H100, H200), with a verdict and what to look at where they disagree. Sizes must "
            "match to the byte: it ends with status 1 when one differs. After the CPU form of "
            "the steps it checks the sizes the CPU steps computed and says why the rest cannot "
            "be compared."
        ),
        "",
    ]


def _builds_section(lab: LoadedLab, run: Run, machine: str) -> list[str]:
    """How to get each native engine the lab builds (llama.cpp), before the steps that use it."""
    lines: list[str] = []
    for name, build in lab.lab.builds.items():
        users = [s.id for s in lab.lab.steps if name in s.uses]
        step_id = "build-" + name.replace(".", "-")
        recorded = next((r for r in run.record.steps if r.id == step_id), None)
        # recorded strings go into Markdown and a shell command: only a version's characters
        version = _VERSION.sub("", run.record.engine.get(name) or build.version)
        commit = recorded.values.get("commit") if recorded else None
        took = recorded.values.get("build_seconds") if recorded else None
        made = f" (source commit {_VERSION.sub('', str(commit.value))[:9]})" if commit else ""
        env = name.replace(".", "_").replace("-", "_").upper() + "_DIR"
        lines += [
            f"## Before steps {', '.join(users)}: get {name}",
            "",
            f"These steps run {name}'s own programs; we used release {version}{made} of "
            f"`{build.package}`, built from its source. Either download a prebuilt release of "
            f"{name} for your GPU and unpack it, or build it. The source comes with "
            f"`pip download --no-deps --no-binary :all: {build.package}=={version}`; the lab's "
            "build script takes it packed as a .tar.xz with the source folder on top, and needs "
            "CMake, a C++ compiler and, for an NVIDIA GPU, the CUDA toolkit:",
            "",
            *_fenced(
                build.command.replace('"$SOURCE"', "SOURCE.tar.xz")
                .replace('"$PREFIX"', "~/" + name)
                .replace('"$DEVICE"', "cuda"),
                "bash",
            ),
            "",
            f"Then make its programs findable: `export {env}=~/{name}` (or put its `bin/` on "
            "your PATH).",
        ]
        if took is not None and not isinstance(took.value, str):
            lines.append(f"Building it took {duration(float(took.value))} on {machine}.")
        lines.append("")
    return lines


def cpu_command(step: AnyStep, cpu_args: str | None) -> str | None:
    """A GPU step's command with the lab's CPU arguments, when it is one Python script."""
    command = step_command(step)
    if not cpu_args or step.needs != "gpu" or not command.startswith("python3 "):
        return None
    if step.uses:  # it needs a native engine built first (see the build step's commands)
        return None
    if any(mark in command for mark in ("&&", "|", ";", ">")):
        return None
    return f"{command} {cpu_args}"


def _step_section(
    step: AnyStep,
    index: int,
    count: int,
    run: Run,
    machine: str,
    numbers: dict[str, int],
    cpu_args: str | None = None,
) -> list[str]:
    recorded = next((r for r in run.record.steps if r.id == step.id), None)
    title = step.title or f"step '{step.id}'"
    mark = " (needs a GPU)" if step.needs == "gpu" else ""
    lines = [f"## Step {index} of {count}: {step.id}{mark}", ""]
    if isinstance(step, StopStep):
        started = numbers.get(step.stop)
        lines += [
            (
                f"**What it does:** ends the service of step {started} ({step.stop}). Go to the "
                "terminal "
                "where it runs and press Ctrl-C."
            ),
            "",
        ]
        return lines
    lines += [f"**What it does:** {title.rstrip('.')}.", ""]
    if step.env:
        settings = " ".join(f"{name}={value}" for name, value in sorted(step.env.items()))
        lines += [f"It runs with these environment variables set: `{settings}`.", ""]
    if isinstance(step, StartStep):
        ready = (
            f"`{step.ready.url}` answers"
            if step.ready.url
            else f"a line matching `{step.ready.log}` appears"
        )
        lines += [
            (
                "This one starts a service that keeps running: type it in a second terminal (also "
                "in "
                f"`lab/`) and leave it there. It is ready when {ready}."
            ),
            "",
        ]
    lines += ["Type:", "", *_fenced(step_command(step), "bash"), ""]
    tiny = cpu_command(step, cpu_args)
    if tiny:
        lines += [
            "No GPU at hand? The same script runs on a CPU in seconds with shrunk models (its "
            "numbers are not the page's, but every line of the output is there):",
            "",
            *_fenced(tiny, "bash"),
            "",
        ]
    if recorded is None:
        lines += ["Our recorded run predates this step: there is no output of ours to compare.", ""]
        return lines
    took = duration(recorded.seconds or 0.0)
    verb = "was ready after" if isinstance(step, StartStep) else "took"
    memory = peak_memory(recorded.values)
    lines += [f"It {verb} {took} on {machine}{memory}. Expected output (from our run):", ""]
    lines += [*_fenced("\n".join(expected_output(run, step.id)), "text"), ""]
    return lines


def peak_memory(values: dict[str, Value]) -> str:
    """', and its peak GPU memory was 20.4 GiB' from the step's recorded `peak_gpu_memory` values
    (the reserved figure when there is one: what the GPU had to hand over)."""
    found = values.get("peak_gpu_memory_reserved") or values.get("peak_gpu_memory")
    if found is None or found.unit != "B" or isinstance(found.value, str) or not found.value:
        return ""
    return f", and its peak GPU memory was {found.value / 2**30:.1f} GiB"


def expected_output(run: Run, step_id: str) -> list[str]:
    """A step's recorded output without its command line, trimmed to head and tail when long."""
    step = run.record.step(step_id)
    if step.transcript is None:
        return ["(no output was recorded)"]
    text = run.transcript(step_id)
    head = f"{PROMPT}{step.command}\n"
    body = text.removeprefix(head)
    lines = body.rstrip("\n").split("\n") if body.strip() else []
    lines = [line if len(line) <= LONG_LINE else line[:LONG_LINE] + " …" for line in lines]
    if len(lines) > HEAD_LINES + TAIL_LINES + 1:
        left = len(lines) - HEAD_LINES - TAIL_LINES
        lines = [*lines[:HEAD_LINES], f"[… {left} lines left out …]", *lines[-TAIL_LINES:]]
    return lines or ["(the step printed nothing)"]


def _fenced(text: str, language: str) -> list[str]:
    longest = max((len(run) for run in text.split("\n") for run in _backtick_runs(run)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", text, fence]


def _backtick_runs(line: str) -> list[str]:
    runs, current = [], ""
    for char in line:
        if char == "`":
            current += char
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def _machine(run: Run) -> str:
    name = gpu_name(run)
    return f"our {name}" if name else "our machine (no GPU)"
