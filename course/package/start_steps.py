"""START-HERE.md's steps: how to get a native engine the lab builds (llama.cpp), then each step
with its command, its form for a machine without a GPU, what it does, its time and peak GPU
memory, and the output it should print. `start_here.py` puts them in order.
"""

from __future__ import annotations

import re

from ..lab.load import LoadedLab
from ..lab.schema import AnyStep, Build, StartStep, StopStep, step_command
from ..pages.facts import build_seconds, gpu_name, gpu_steps, step_peak
from ..pages.format import duration
from ..pages.install import lab_spec
from ..record.models import PROMPT, Run, build_step_id

# Expected output longer than this is shown as its head and tail.
HEAD_LINES = 40
TAIL_LINES = 20
LONG_LINE = 200
GIB = 2**30

_VERSION = re.compile(r"[^0-9A-Za-z.+!_-]")


def sdist_name(package: str, version: str) -> str:
    """The file `pip download --no-binary :all:` saves: 'llama_cpp_python-0.3.36.tar.gz'."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}.tar.gz"


def build_prefix(name: str) -> str:
    """Where START-HERE.md builds a native engine: '$HOME/llama.cpp'."""
    return f"$HOME/{name}"


def path_line(name: str) -> str:
    """The line that makes a build's programs findable in a terminal."""
    return f'export PATH="{build_prefix(name)}/bin:$PATH"'


def _build_command(build: Build, name: str, device: str) -> str:
    source = f"$HOME/{name}-source/{sdist_name(build.package, build.version)}"
    return (
        build.command.replace('"$SOURCE"', source)
        .replace('"$PREFIX"', build_prefix(name))
        .replace('"$DEVICE"', device)
    )


def build_section(
    lab: LoadedLab, run: Run, machine: str, labels: dict[str, str], name: str
) -> list[str]:
    """How to get a native engine the lab builds (llama.cpp), before the steps that use it:
    download its source, build it, make its programs findable, as lines typed in order."""
    build = lab.lab.builds[name]
    users = [s.id for s in lab.lab.steps if name in s.uses]
    numbers = list(dict.fromkeys(re.sub(r"[a-z]+$", "", labels[s]) for s in users))
    # recorded strings go into Markdown and a shell command: only a version's characters
    version = _VERSION.sub("", run.record.engine.get(name) or build.version)
    recorded = next((r for r in run.record.steps if r.id == build_step_id(name)), None)
    commit = recorded.values.get("commit") if recorded else None
    made = f" (source commit {_VERSION.sub('', str(commit.value))[:9]})" if commit else ""
    env = name.replace(".", "_").replace("-", "_").upper() + "_DIR"
    lines = [
        f"## Before step {', '.join(numbers)}: get {name}",
        "",
        (
            f"These steps run {name}'s own programs; we used release {version}{made} of "
            f"`{build.package}`, built from its source (a prebuilt release of {name} for your "
            f"GPU, unpacked in `{build_prefix(name)}`, does as well). Building needs CMake, a "
            "C++ compiler and, for an NVIDIA GPU, the CUDA toolkit. Download the source, build "
            "it, and make its programs findable, in this order:"
        ),
        "",
        *fenced(
            "\n".join(
                [
                    f"pip download --no-deps --no-binary :all: {build.package}=={version} "
                    f"-d $HOME/{name}-source",
                    _build_command(build, name, "cuda"),
                    f"export {env}={build_prefix(name)}",
                    path_line(name),
                ]
            ),
            "bash",
        ),
        "",
        "Without an NVIDIA GPU, build it for the CPU instead (the same line, ending in `cpu`):",
        "",
        *fenced(_build_command(build, name, "cpu"), "bash"),
        "",
    ]
    took = build_seconds(run, name)
    timing = [f"for the GPU on the machine of {machine}, {duration(took)}"] if took else []
    if build.cpu_seconds:
        timing.append(f"for the CPU on 2 cores, {duration(build.cpu_seconds)}")
    if timing:
        lines += [f"Building it took {'; '.join(timing)}.", ""]
    lines += [
        (
            "The two `export` lines hold for this terminal only: a step that opens another "
            "terminal types the second again."
        ),
        "",
    ]
    return lines


def cpu_command(step: AnyStep, cpu_args: str | None) -> str | None:
    """A step's command on a machine without a GPU: its `cpu:` when lab.yml gives one, else a
    GPU step's Python script with the lab's CPU arguments; None when there is no such form."""
    if step.cpu:
        return step.cpu
    command = step_command(step)
    if not cpu_args or step.needs != "gpu" or not command.startswith("python3 "):
        return None
    if any(mark in command for mark in ("&&", "|", ";", ">")):
        return None
    return f"{command} {cpu_args}"


def _typed(step: AnyStep, command: str, lab: LoadedLab) -> str:
    """What to type for a step: a service in a second terminal first makes the lab's builds
    findable there (and enters the environment when it is a Python script)."""
    if not isinstance(step, StartStep):
        return command
    first = [path_line(name) for name in step.uses]
    if command.startswith("python3 ") and lab_spec(lab.folder):
        first.insert(0, ". .venv/bin/activate")
    return "\n".join([*first, command])


def step_section(step: AnyStep, labels: dict[str, str], run: Run, lab: LoadedLab) -> list[str]:
    recorded = next((r for r in run.record.steps if r.id == step.id), None)
    title = step.title or f"step '{step.id}'"
    mark = " (needs a GPU)" if step.needs == "gpu" else ""
    lines = [f"## Step {labels[step.id]}: {step.id}{mark}", ""]
    if isinstance(step, StopStep):
        lines += [
            (
                f"**What it does:** ends the service of step {labels[step.stop]} ({step.stop}). "
                "Go to the terminal where it runs and press Ctrl-C."
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
                "This one starts a service that keeps running: open a second terminal, go to "
                "this `lab/` folder, type it there and leave it running. It is ready when "
                f"{ready}."
            ),
            "",
        ]
    lines += ["Type:", "", *fenced(_typed(step, step_command(step), lab), "bash"), ""]
    tiny = cpu_command(step, lab.lab.cpu_args)
    if tiny:
        lines += [
            (
                "No GPU at hand? The same step runs on a CPU with shrunk models (its numbers are "
                "not the page's, but every line of the output is there):"
                if step.needs == "gpu"
                else "If you ran the steps before it in their CPU form, type this instead:"
            ),
            "",
            *fenced(_typed(step, tiny, lab), "bash"),
            "",
        ]
    if step.real_weights:
        lines += [
            (
                "With the model's real weights (downloaded the first time, then kept in the "
                "Hugging Face cache): what the step measures then describes a real model, but "
                "its numbers are not the page's, which measure random weights of the same shapes:"
            ),
            "",
            *fenced(_typed(step, step.real_weights, lab), "bash"),
            "",
        ]
    if recorded is None:
        lines += ["Our recorded run predates this step: there is no output of ours to compare.", ""]
        return lines
    took = duration(recorded.seconds or 0.0)
    verb = "was ready after" if isinstance(step, StartStep) else "took"
    peak = step_peak(recorded.values)
    memory = f", and its peak GPU memory was {peak / GIB:.1f} GiB" if peak else ""
    if peak and step.sizes_to_card:
        memory += " (it sizes itself to the card: a share of whatever GPU it finds)"
    lines += [
        f"It {verb} {took} on {machine(run, lab)}{memory}. Expected output (from our run):",
        "",
    ]
    lines += [*fenced("\n".join(expected_output(run, step.id)), "text"), ""]
    return lines


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


def fenced(text: str, language: str) -> list[str]:
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


def machine(run: Run, lab: LoadedLab) -> str:
    """'our NVIDIA H200', or 'our machine' for a lab without GPU steps (it says nothing of GPUs)
    or a run without one."""
    name = gpu_name(run)
    return f"our {name}" if name and gpu_steps(lab) else "our machine"
