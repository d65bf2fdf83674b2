"""The lab recipe's schema, `lab/<lesson>/lab.yml`: every key declared with its type and default."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from ..record.units import ALIASES, Unit
from .scales import Scaling, like_problems
from .settings import Build, Noise, Resources, Setup, _Strict

__all__ = ["Build", "Noise", "Resources", "Setup"]  # lab.yml's top-level settings, also here

STEP_ID = r"^[a-z0-9][a-z0-9-]*$"
NAME_LENGTH = 64
"""The longest step id or lesson name: each names files and folders of the record."""
VALUE_NAME = r"^[a-z_][a-z0-9_]*$"
DEFAULT_TIMEOUT = 600.0
# Files of a lab folder that are never inputs and never travel in a scratch copy.


class Capture(_Strict):
    """One named value taken from a step: a regex over its output, or a key path in a JSON file."""

    regex: str | None = Field(default=None, examples=[r"mean latency: ([\d.]+) ms"])
    """A regular expression searched in the step's output (multi-line: `^` and `$` match at each
    line); the first group ( ... ) is the value. Give `regex` or `json`, not both."""
    json_file: str | None = Field(default=None, alias="json", examples=["results/latency.json"])
    """A JSON file the step writes, relative to the lab folder; the value is read at `key`."""
    key: str | None = Field(default=None, examples=["by_size.4096.p50_ms"])
    """With `json`: the dot-separated key path of the value; list indices and keys that are
    numbers are written as they are (`by_size.4096.p50_ms`, `runs.0.ms`). A key holding a '.'
    cannot be reached: write the file without one (`qwen3-0_6b`). A key that lands on a timed
    value (`{"median": .., "min": .., "q1": .., "q3": .., "max": .., "n": ..}`) records its
    median and spread; one level further (`ttft.128.min`) records that number alone."""
    type: Literal["int", "float", "str"] = Field(default="float", examples=["int"])
    """How the value is read: `int`, `float` or `str` (numbers may carry thousands separators,
    as in `114,688`)."""
    unit: Unit = Field(default="none", examples=["ms"])
    """The value's unit; pages convert it within its dimension (B to MiB, µs to ms, MB/s to
    GB/s, req/s) and format it (`us` is read as µs). `none`: a plain number."""
    scales: Scaling | None = Field(default=None, examples=["bandwidth"])
    """How the value should move on another GPU than the recorded run's (the mapping below): `course
    compare` and the lesson zip's compare.py judge a run on another card by it. It changes
    nothing the step runs, so declaring it re-runs nothing."""

    @field_validator("unit", mode="before")
    @classmethod
    def _alias(cls, value: Any) -> Any:
        return ALIASES.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> Capture:
        if (self.regex is None) == (self.json_file is None):
            raise ValueError("give exactly one of 'regex' or 'json'")
        if self.json_file is not None and not self.key:
            raise ValueError("'json' needs a 'key' (a dot-separated path into the file)")
        if self.json_file is not None and (
            self.json_file.startswith("/") or ".." in Path(self.json_file).parts
        ):
            raise ValueError(
                f"json: {self.json_file!r} must be a path inside the lab folder (no '/' start, "
                "no '..')"
            )
        if self.regex is not None and self.key is not None:
            raise ValueError("'key' goes with 'json', not with 'regex'")
        if self.regex is not None:
            try:
                pattern = re.compile(self.regex, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
            if pattern.groups < 1:
                raise ValueError(f"regex {self.regex!r} needs a group ( ... ) around the value")
        misfit = self.scales.misfit(self.unit, self.type) if self.scales else None
        if misfit:
            raise ValueError(f"scales: {misfit}")
        return self


class Ready(_Strict):
    """How to tell that a background service is ready: an HTTP URL answering 2xx, or a log line."""

    url: str | None = Field(default=None, examples=["http://127.0.0.1:${PORT}/health"])
    """An http(s) URL, polled until it answers with a 2xx status; `${NAME}` takes the value of
    the step's environment variable NAME. Give `url` or `log`, not both."""
    log: str | None = Field(default=None, examples=[r"listening on http://127\.0\.0\.1:\d+"])
    """A regular expression that a line of the service's output matches once it is ready."""

    @model_validator(mode="after")
    def _one_test(self) -> Ready:
        if (self.url is None) == (self.log is None):
            raise ValueError("give exactly one of 'url' or 'log'")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.log is not None:
            try:
                re.compile(self.log)
            except re.error as exc:
                raise ValueError(f"log pattern {self.log!r} does not compile: {exc}") from None
        return self


class _StepBase(_Strict):
    id: Annotated[str, Field(pattern=STEP_ID, max_length=NAME_LENGTH, examples=["decode-speed"])]
    """The step's name: lowercase letters, digits and '-', at most 64 of them; pages name values
    as `<id>.<value>`."""
    title: str | None = Field(default=None, examples=["Decode speed against context length"])
    """One line saying what the step does (START-HERE.md, the page's terminal and the run's
    progress show it)."""
    needs: Literal["gpu"] | None = Field(default=None, examples=["gpu"])
    """`gpu` when the step cannot run without one; a lab with no such step runs on any machine,
    and its page says so."""
    env: dict[str, str] = Field(default={}, examples=[{"TOKENIZERS_PARALLELISM": "false"}])
    """Extra environment variables for the step's command (beside the run's own and
    `COURSE_STEP`, the step's id)."""
    inputs: list[str] | None = Field(
        default=None, examples=[["decode_speed.py", "models/*/*.json"]]
    )
    """Globs of lab files the step reads: when none of them changed, a later run reuses the
    step's recorded result. Without a list, every lab file counts."""
    files: list[str] = Field(default=[], examples=[["results/latency.json"]])
    """Files the step produces, relative to the lab folder, kept in the record under
    `files/<step>/` (figures can read them)."""
    capture: dict[Annotated[str, Field(pattern=VALUE_NAME)], Capture] = Field(
        default={},
        examples=[{"p50": {"json": "results/latency.json", "key": "p50_ms", "unit": "ms"}}],
    )
    """Named values the step's output or files hold: lowercase names with '_', each a capture
    (below)."""
    uses: list[str] = Field(default=[], examples=[["llama-cpp"]])
    """Builds (`builds:` at the top level) whose programs the step runs: a new release of one
    re-runs the step, and the steps that use one build run together (one reads the files another
    made with the engine)."""
    cpu: str | None = Field(
        default=None,
        examples=["llama-server -m gguf/qwen3-0_6b-tiny-bf16.gguf -c 4096 --port 8231"],
    )
    """The step's command on a machine without a GPU, for START-HERE.md, where the lab's
    `cpu_args` added to the command are not it (a service started on a shrunk model's file, a
    script reading what a shrunk step wrote). The run never uses it, so it re-runs nothing."""
    real_weights: str | None = Field(
        default=None,
        examples=["python3 kld.py --weights Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q8_0.gguf"],
    )
    """The step's command with the model's published weights (downloaded on first use), for
    START-HERE.md, where the recorded run measures random weights of the real shapes: what it
    measures then means more (a real model's outputs), but its numbers are not the page's. The
    run never uses it, so it re-runs nothing."""
    sizes_to_card: bool = Field(default=False, examples=[True])
    """`true` for a GPU step that sizes itself to the card it finds (a share of its memory, or
    leaving out what does not fit): its recorded peak GPU memory is then not what it needs, so
    START-HERE.md leaves it out of the lab's minimum GPU memory and says so. It re-runs
    nothing."""
    scales: Scaling | None = Field(default=None, examples=["exact"])
    """How the step's values move on another GPU, for every capture without a `scales:` of its
    own (a step computed on paper: `exact`). Captures with neither are shown beside yours by
    compare.py, not judged. It re-runs nothing."""

    @model_validator(mode="after")
    def _likes(self) -> _StepBase:
        """A `like:` names a memory value of the same step, which is not itself a `like:`; a
        step's `scales:` fits each capture it applies to."""
        problems = like_problems(self.capture)
        if self.scales is not None and self.scales.like is not None:
            problems.append("scales: a step's `scales:` takes no 'like' (give it to a capture)")
        if self.scales is not None:
            for name, capture in self.capture.items():
                misfit = None if capture.scales else self.scales.misfit(capture.unit, capture.type)
                if misfit:
                    problems.append(f"scales: {misfit} (capture '{name}')")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def scaling(self, name: str) -> Scaling | None:
        """How the capture `name` moves on another GPU: its own `scales:`, else the step's."""
        return self.capture[name].scales or self.scales

    @field_validator("files", "inputs")
    @classmethod
    def _relative(cls, paths: list[str] | None) -> list[str] | None:
        for p in paths or []:
            if p.startswith("/") or ".." in Path(p).parts:
                raise ValueError(
                    f"{p!r} must be a path inside the lab folder (no '/' start, no '..')"
                )
        return paths


class RunStep(_StepBase):
    """A shell command, run in the lab folder, that must end with status 0 before its timeout."""

    run: str = Field(examples=["python3 decode_speed.py --tokens 4096"])
    """The shell command, run by bash in a scratch copy of the lab folder."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, examples=[120])
    """Seconds the command may take before it is ended and the run fails."""


class StartStep(_StepBase):
    """A background service, started and then polled until it is ready or its deadline passes."""

    start: str = Field(examples=["python3 server.py --port 0"])
    """The shell command that starts the service; it must keep running until its stop step."""
    ready: Ready = Field(examples=[{"url": "http://127.0.0.1:8000/health"}])
    """How to tell the service is ready (below); the next step starts only then."""
    deadline: float = Field(default=60.0, gt=0, examples=[20])
    """Seconds the service may take to become ready (a start step's timeout)."""


class StopStep(_StepBase):
    """Ends a service started by an earlier step (its whole process group)."""

    stop: str = Field(examples=["server"])
    """The id of the `start` step whose service to end; its output is recorded then."""


def _step_kind(raw: Any) -> str | None:
    if isinstance(raw, dict):
        kinds = [k for k in ("run", "start", "stop") if k in raw]
        return kinds[0] if len(kinds) == 1 else None
    return getattr(raw, "kind", None)


Step = Annotated[
    Annotated[RunStep, Tag("run")]
    | Annotated[StartStep, Tag("start")]
    | Annotated[StopStep, Tag("stop")],
    Discriminator(
        _step_kind,
        custom_error_type="step_kind",
        custom_error_message="a step needs exactly one of 'run', 'start' or 'stop'",
    ),
]


class Lab(_Strict):
    """A lesson's lab: its engine packages and its steps, in order."""

    lesson: Annotated[str, Field(pattern=STEP_ID, max_length=NAME_LENGTH, examples=["kv-cache"])]
    """The lesson's name, the same as its folder under `lab/` (at most 64 characters)."""
    title: str = Field(examples=["The KV cache"])
    """The lesson's title."""
    engine: list[str] = Field(default=[], examples=[["torch", "transformers"]])
    """Packages whose versions decide the lab's numbers: their installed versions are recorded
    with every run, a change of version makes the steps run again, and `course run --engine`
    swaps them. A run is refused before its first step when a step about to run needs one that
    `python` lacks (a step needs those in its pyproject.toml extra and in `dependencies`; all of
    them, when the extras are not named after the steps)."""
    python: str = Field(default="python3", examples=[".venv/bin/python"])
    """The Python that runs the steps: by default the first `python3` on the PATH `course run`
    starts with (an active virtual environment's); another one named here (a path from the lab
    folder, or a name on the PATH) becomes the steps' `python3` and `python` on this machine.
    Every `engine` package must be installed in it before a step runs; `course run --setup`
    installs into it."""
    setup: Setup = Field(default=Setup(), examples=[{"install_seconds": 180}])
    """Time a learner spends before the first step (below)."""
    resources: Resources | None = Field(default=None, examples=[{"gpu": "H100", "disk_gb": 100}])
    """The machine the lab needs when it runs in the cloud (below); none: CPU only, the cloud's
    default disk."""
    builds: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")], Build] = Field(
        default={},
        examples=[
            {
                "llama-cpp": {
                    "package": "llama-cpp-python",
                    "version": "0.3.16",
                    "command": "bash build_llama.sh",
                }
            }
        ],
    )
    """Native engines the lab builds from source on the run's host, by name (below); a step
    names the ones it runs under `uses`."""
    cpu_args: str | None = Field(default=None, examples=["--device cpu --tiny"])
    """Arguments that let a GPU step's Python script run on a CPU in seconds with shrunk models
    (e.g. `--device cpu --tiny`); START-HERE.md shows each GPU step with them, to try it first."""
    include: list[str] = Field(default=[], examples=[["../common/labkit", "../kv-cache/story.py"]])
    """What this lab uses from outside its folder, as paths from it: a folder of `lab/common/`
    (`../common/labkit`, the lab kit), which keeps its name (`labkit/`), or a file of another
    lesson's lab (`../kv-cache/story.py`), which keeps its file name. Each run copies them into
    the scratch folder, a step's `inputs` match their files by those names (`labkit/*.py`), step
    hashes count them, and the lesson zip carries them, so a learner's copy runs on its own.
    Shared code lives once in the repository."""
    noise: Noise = Field(
        default=Noise(), examples=[{"between_hosts": 2, "values": {"concurrency.tok_s_*": 50}}]
    )
    """How far the lab's timed values move between hosts with nothing changed: all of them, and
    the ones that move more by pattern (below)."""
    steps: list[Step] = Field(min_length=1, examples=[[{"id": "size", "run": "python3 size.py"}]])
    """The steps, run in order: each has exactly one of `run`, `start` or `stop` (below)."""

    @property
    def card(self) -> str | None:
        """The GPU kind the lab asks for (`resources.gpu`), the one its page is written for."""
        return self.resources.gpu if self.resources else None

    @model_validator(mode="after")
    def _consistent(self) -> Lab:
        problems = []
        seen: set[str] = set()
        started: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                problems.append(f"step id '{step.id}' is used twice")
            seen.add(step.id)
            if isinstance(step, StartStep):
                started.add(step.id)
            for name in step.uses:
                if name not in self.builds:
                    hint = suggest(name, set(self.builds))
                    problems.append(
                        f"step '{step.id}': uses: '{name}' is not one of the lab's builds{hint}"
                    )
            if isinstance(step, StopStep) and step.stop not in started:
                hint = suggest(step.stop, started)
                problems.append(
                    f"step '{step.id}': stop: '{step.stop}' is not a service started by an "
                    f"earlier step{hint}"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def step(self, step_id: str) -> RunStep | StartStep | StopStep:
        """The step with this id."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


AnyStep = RunStep | StartStep | StopStep


def step_kind(step: AnyStep) -> str:
    """'run', 'start' or 'stop'."""
    return (
        "run" if isinstance(step, RunStep) else "start" if isinstance(step, StartStep) else "stop"
    )


def step_command(step: AnyStep) -> str:
    """The command a step types (a stop step has none of its own)."""
    if isinstance(step, RunStep):
        return step.run
    if isinstance(step, StartStep):
        return step.start
    return f"# stop {step.stop}"


def suggest(word: str, choices: set[str] | list[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
