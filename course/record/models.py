"""The record's shapes: run.json as typed models (host, GPU, engine, steps, values with units), and
`Run`.

A run lives in `build/<lesson>/<run-id>/`: `run.json`, one transcript per step under `steps/`, the
files steps kept under `files/<step>/`. The record is plain JSON and text, readable without this
package (RECORD.md describes it).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ..errors import RecordError

FORMAT = 1
PROMPT = "lab $ "
"""What a transcript shows before each command, as a terminal would."""
StepStatus = Literal["ok", "reused", "failed", "skipped", "not-run"]
RunStatus = Literal["running", "ok", "partial", "failed"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Spread(_Model):
    """How a timed value varied over its repeats: `n` repeats kept after warm-up, their extremes
    and quartiles, in the value's unit (the value itself is their median)."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable, as a Quantity holding it

    n: int = Field(ge=1)
    min: float
    q1: float
    q3: float
    max: float

    @model_validator(mode="after")
    def _ordered(self) -> Spread:
        numbers = {"min": self.min, "q1": self.q1, "q3": self.q3, "max": self.max}
        odd = [name for name, x in numbers.items() if not math.isfinite(x)]
        if odd:
            raise ValueError(f"{', '.join(odd)} not finite")
        if not self.min <= self.q1 <= self.q3 <= self.max:
            raise ValueError(
                f"expected min <= q1 <= q3 <= max, found {self.min} {self.q1} {self.q3} {self.max}"
            )
        return self

    def around(self, median: float) -> str | None:
        """What is wrong with this spread around `median`, if anything (it must lie between the
        quartiles, and be finite)."""
        if not math.isfinite(median):
            return f"its median {median} is not finite"
        if not self.q1 <= median <= self.q3:
            return f"its median {median} is not between q1 {self.q1} and q3 {self.q3}"
        return None


class Value(_Model):
    """A captured value with its type and unit; a timed value also carries its spread."""

    value: int | float | str
    type: Literal["int", "float", "str"]
    unit: str
    spread: Spread | None = None

    @model_serializer(mode="wrap")
    def _spread_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """run.json writes `spread` only for a timed value (records stay as they were)."""
        data: dict[str, Any] = handler(self)
        if self.spread is None:
            data.pop("spread", None)
        return data

    @model_validator(mode="after")
    def _spread_fits(self) -> Value:
        if self.spread is not None:
            wrong = "a text value has no spread" if isinstance(self.value, str) else None
            wrong = wrong or self.spread.around(float(self.value))
            if wrong:
                raise ValueError(wrong)
        return self


class KeptFile(_Model):
    """A file a step produced, kept in the record under `files/<step>/<path>`."""

    path: str
    bytes: int
    sha256: str


class HashParts(_Model):
    """What a step's hash is made of, so a re-run can say what changed."""

    definition: str
    inputs: dict[str, str]
    engine: dict[str, str | None]
    gpu: str


class Gpu(_Model):
    """The first GPU of the host, as nvidia-smi reports it; what can explain its speed (clocks,
    power, PCIe link, NUMA node) as read when the run started."""

    name: str
    memory_mib: int | None = None
    driver: str | None = None
    cuda: str | None = None
    count: int = 1
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    applications_clock_mhz: int | None = None
    """The SM clock applications run at (`nvidia-smi -ac`), below the maximum when set so."""
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_draw_w: float | None = None
    persistence: bool | None = None
    pcie: str | None = None
    """The link as `gen 5 x16` (and `of gen 5 x16` when it runs below its maximum)."""
    bus_id: str | None = None
    uuid: str | None = None
    """The GPU's own identity (`GPU-...`): two runs with another one ran on another card, even
    where the machine's name and the bus id are the same (a virtual machine's)."""
    numa_node: int | None = None
    """The host NUMA node the GPU hangs off (None: unknown, or a host with one node)."""


class Setup(_Model):
    """What `--setup` installed before the steps, and how long it took."""

    seconds: float
    requirements: list[str] = []
    installer: str | None = None


class HostFacts(_Model):
    """The machine a run happened on."""

    gpu: Gpu | None = None
    cpu: str | None = None
    cpu_model: str | None = None
    cpu_signature: str | None = None
    """`family 6 model 207 stepping 2`: tells CPU generations apart where the model name does not
    (a virtual machine's `Intel(R) Xeon(R) Processor`)."""
    cpu_cores: int | None = None
    """Logical cores of the host."""
    cpu_usable: int | None = None
    """The cores the run's processes may use (their affinity: a container's share)."""
    numa_nodes: int | None = None
    os: str | None = None
    python: str | None = None
    machine: str | None = None
    setup: Setup | None = None


def build_step_id(name: str) -> str:
    """The record's step id of a build: `build-llama-cpp` for llama.cpp."""
    return "build-" + name.replace(".", "-")


class StepRecord(_Model):
    """One step of a run."""

    id: str
    kind: Literal["run", "start", "stop", "build"]
    title: str | None = None
    command: str
    needs: str | None = None
    status: StepStatus
    exit_code: int | None = None
    seconds: float | None = None
    started: str | None = None
    values: dict[str, Value] = {}
    files: list[KeptFile] = []
    transcript: str | None = None
    hash: str
    hash_parts: HashParts
    reused_from: str | None = None
    error: str | None = None

    def reused(self, run_id: str) -> StepRecord:
        """This step as a later run records it when it reuses it from run `run_id` (or from the
        run this one was itself reused from)."""
        return self.model_copy(
            deep=True, update={"status": "reused", "reused_from": self.reused_from or run_id}
        )


class Failure(_Model):
    """Why a run stopped."""

    step: str | None
    message: str


class Record(_Model):
    """The whole of run.json."""

    format: int = FORMAT
    lesson: str
    title: str
    run_id: str
    status: RunStatus
    started: str
    ended: str | None = None
    seconds: float | None = None
    lab_file: str
    host: HostFacts
    engine: dict[str, str | None]
    options: dict[str, Any] = {}
    note: str | None = None
    """What the author said of the run (`course run --note "vocab 8192"`)."""
    steps: list[StepRecord] = Field(default_factory=list)
    failure: Failure | None = None

    def step(self, step_id: str) -> StepRecord:
        """The step with this id; RecordError naming the run otherwise."""
        for s in self.steps:
            if s.id == step_id:
                return s
        known = ", ".join(s.id for s in self.steps)
        raise RecordError(
            f"run {self.run_id} of '{self.lesson}' has no step '{step_id}' (steps: {known})"
        )


class Run:
    """A finished run on disk: its record and its folder."""

    def __init__(self, record: Record, folder: Path) -> None:
        self.record = record
        self.folder = folder

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.record.run_id

    @property
    def good(self) -> bool:
        """Whether every step succeeded (ran or was reused)."""
        return self.record.status == "ok"

    @property
    def gpu_name(self) -> str:
        """The GPU the run had, as PyTorch named it (`NVIDIA H200`), or `none`."""
        gpu = self.record.host.gpu
        return gpu.name if gpu else "none"

    def on_card(self, kind: str) -> bool:
        """Whether the run's GPU is of this kind, named as lab.yml's `resources.gpu` and SkyPilot
        name it (`H200`, `A100-80GB`, `L4`)."""
        return card_matches(kind, self.gpu_name)

    def value(self, step_id: str, name: str) -> Value:
        """A captured value; RecordError naming the run, the step and the known values otherwise."""
        step = self.record.step(step_id)
        if name not in step.values:
            known = ", ".join(sorted(step.values)) or "none"
            raise RecordError(
                f"run {self.run_id}: step '{step_id}' captured no value '{name}' (its values: "
                f"{known})"
            )
        return step.values[name]

    def transcript(self, step_id: str) -> str:
        """A step's transcript as recorded."""
        step = self.record.step(step_id)
        if step.transcript is None:
            raise RecordError(
                f"run {self.run_id}: step '{step_id}' has no transcript ({step.status})"
            )
        return self.inside(step.transcript).read_text(encoding="utf-8")

    def kept_file(self, step_id: str, path: str) -> Path:
        """Where a file a step kept lies in the record."""
        return self.inside(f"files/{step_id}/{path}")

    def inside(self, rel: str) -> Path:
        """A path the record names, inside the run's folder (links followed); RecordError for one
        that leads out of it (a damaged or altered record must not make anyone read elsewhere)."""
        path = (self.folder / rel).resolve()
        if not path.is_relative_to(self.folder.resolve()):
            raise RecordError(
                f"run {self.run_id}: the path {rel!r} it names leads outside {self.folder}"
            )
        return path

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, {self.record.status})"


_RUN_ID = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z-[a-z0-9-]+$")


def is_run_id(text: str) -> bool:
    """Whether a string has the shape of a run id."""
    return bool(_RUN_ID.match(text))


def run_order(run_id: str) -> tuple[str, list[tuple[int, str]]]:
    """A run id's place in time order: its time, then what follows it with numbers compared as
    numbers, so that runs of one second sort in order however they were numbered (`-h200-2`
    before `-h200-10`, as older runners wrote them; `-h200-02` now)."""
    when, _, rest = run_id.partition("Z-")
    parts = re.split(r"(\d+)", rest)
    return when, [(int(p), "") if p.isdigit() else (-1, p) for p in parts]


def card_matches(kind: str, gpu_name: str) -> bool:
    """Whether a GPU kind (`H100`, `A100-80GB`, `RTX4090`) names this GPU (`NVIDIA H100 80GB HBM3`,
    `NVIDIA A100-SXM4-80GB`, `NVIDIA GeForce RTX 4090`): every word of the kind is a word of the
    name, or two of its words written together, case and separators aside (`L4` is not `L40S`)."""
    words = _words(gpu_name)
    joined = {a + b for a, b in zip(words, words[1:], strict=False)}
    wanted = _words(kind)
    return bool(wanted) and all(w in words or w in joined for w in wanted)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_.\s]+", name.lower()) if w]
