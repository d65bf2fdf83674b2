"""What a run will do: for each step, run it, reuse an earlier result, or skip it, and why.

A step's hash covers its definition, the lab files it reads, the engine versions and the GPU
model. A step whose hash matches an earlier successful result is reused. Steps from a service's
start to its stop are one unit: if any of them runs, all of them run. So are the steps that use
one build (`uses:`): they hand each other files the engine made, which only a run of them all
leaves in the scratch folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..errors import RunError
from ..lab.files import expand_inputs
from ..lab.load import LoadedLab
from ..lab.schema import AnyStep, StartStep, StopStep
from ..record.changes import part_changes
from ..record.files import sha256_file
from ..record.models import HashParts, Run

Action = Literal["run", "reuse", "skip"]


@dataclass
class StepPlan:
    """What happens to one step, and why."""

    step: AnyStep
    hash: str
    parts: HashParts
    action: Action = "run"
    reason: str = ""
    source: Run | None = None
    """The run a reused step comes from."""


@dataclass
class Plan:
    """The steps of a run, in order."""

    steps: list[StepPlan] = field(default_factory=list)

    @property
    def to_run(self) -> list[StepPlan]:
        """The steps that will execute."""
        return [p for p in self.steps if p.action == "run"]

    def complete(self) -> bool:
        """Whether no step is skipped: the run will hold every step."""
        return all(p.action != "skip" for p in self.steps)


def digest(data: object) -> str:
    """The sha256 of `data` as JSON with its keys sorted: a step's hash, the same on any host."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def hash_step(
    loaded: LoadedLab,
    step: AnyStep,
    file_hashes: dict[str, str],
    engine: dict[str, str | None],
    gpu: str,
) -> tuple[str, HashParts]:
    """A step's hash, and the parts it is made of."""
    # `scales:` says how a value should move on other GPUs, `cpu:`, `real_weights:` and
    # `sizes_to_card:` what
    # START-HERE.md tells a learner: none changes anything the step runs
    definition = digest(
        step.model_dump(
            mode="json",
            by_alias=True,
            exclude_defaults=True,
            exclude={
                "scales": True,
                "cpu": True,
                "real_weights": True,
                "sizes_to_card": True,
                "capture": {"__all__": {"scales"}},
            },
        )
    )
    if isinstance(step, StopStep) and step.inputs is None:
        names = []  # ending a service reads no file
    elif step.inputs is None:
        names = [n for n in file_hashes if n != loaded.path.name]
    else:
        found = expand_inputs(loaded.folder, step.inputs, list(loaded.included))
        names = sorted({m for ms in found.values() for m in ms})
    builds = loaded.lab.builds
    parts = HashParts(
        definition=definition,
        inputs={n: file_hashes[n] for n in names},
        # a build's release counts only for the steps that run its programs
        engine={k: v for k, v in engine.items() if k not in builds or k in step.uses},
        gpu=gpu,
    )
    return digest(parts.model_dump(mode="json")), parts


def hash_lab_files(loaded: LoadedLab) -> dict[str, str]:
    """SHA-256 of every file a run starts from (the lab's own and the included ones)."""
    return {name: sha256_file(path) for name, path in loaded.sources().items()}


def service_spans(steps: list[AnyStep]) -> list[tuple[int, int]]:
    """(start, end) indices of each service's life, inclusive; a service never stopped lives to the
    end.
    """
    spans = []
    for i, step in enumerate(steps):
        if isinstance(step, StartStep):
            end = len(steps) - 1
            for j in range(i + 1, len(steps)):
                other = steps[j]
                if isinstance(other, StopStep) and other.stop == step.id:
                    end = j
                    break
            spans.append((i, end))
    return spans


def explain_change(parts: HashParts, old: HashParts | None) -> str:
    """Why a step's hash differs from its last recorded result, in a few words."""
    if old is None:
        return "no earlier result"
    return "; ".join(part_changes(parts, old).reasons()) or "hash changed"


def make_plan(
    loaded: LoadedLab,
    history: list[Run],
    engine: dict[str, str | None],
    gpu: str,
    *,
    force: bool = False,
    only: Sequence[str] = (),
    from_step: str | None = None,
) -> Plan:
    """Decide, for each step, whether it runs, is reused or is skipped: `only` names the steps
    to run (the others reused or skipped), `from_step` the first of those to run."""
    steps = list(loaded.lab.steps)
    ids = [s.id for s in steps]
    check_selection(loaded, only, from_step)
    file_hashes = hash_lab_files(loaded)
    # the newest good run is consulted first, then every other run, newest first
    good = [r for r in history if r.good]
    candidates = (good[-1:] if good else []) + [
        r for r in reversed(history) if not good or r is not good[-1]
    ]
    plan = Plan()
    for step in steps:
        digest, parts = hash_step(loaded, step, file_hashes, engine, gpu)
        sp = StepPlan(step=step, hash=digest, parts=parts)
        previous = None
        for run in candidates:
            for rec in run.record.steps:
                if rec.id == step.id and rec.status in ("ok", "reused"):
                    previous = previous or rec
                    if rec.hash == digest:
                        sp.action, sp.source = "reuse", run
                        sp.reason = f"unchanged since {run.run_id}"
                        break
            if sp.action == "reuse":
                break
        if sp.action == "run":
            sp.reason = explain_change(parts, previous.hash_parts if previous else None)
        plan.steps.append(sp)

    chosen: set[int] | None = None
    if only:
        chosen = {ids.index(step) for step in only}
    elif from_step is not None:
        chosen = set(range(ids.index(from_step), len(steps)))
    if force or chosen is not None:
        for i, sp in enumerate(plan.steps):
            if force and (chosen is None or i in chosen):
                sp.action, sp.source, sp.reason = "run", None, "--force"
            elif chosen is not None and i in chosen:
                sp.action, sp.source, sp.reason = (
                    "run",
                    None,
                    f"--only {' '.join(only)}" if only else f"--from {from_step}",
                )
            elif chosen is not None and sp.action == "run":
                sp.action, sp.reason = "skip", f"not selected, and not reusable ({sp.reason})"

    # Units that run whole, to a fixed point (a unit that runs can pull another in): a service's
    # life, from its start to its stop (a step left out by --only/--from runs too: the service
    # needs it); and the steps that use one build, since one reads what another made with the
    # engine (a converted model), which the scratch folder holds only when they all run.
    units: list[tuple[str, list[int], set[Action]]] = [
        (f"service '{steps[a].id}' runs again", list(range(a, b + 1)), {"reuse", "skip"})
        for a, b in service_spans(steps)
    ]
    for name in sorted({n for s in steps for n in s.uses}):
        users = [i for i, s in enumerate(steps) if name in s.uses]
        reason = f"another step that uses {name} runs, and may read what this one makes"
        units.append((reason, users, {"reuse"}))
    changed = True
    while changed:
        changed = False
        for reason, members, pulled in units:
            if any(plan.steps[i].action == "run" for i in members):
                for i in members:
                    m = plan.steps[i]
                    if m.action in pulled:
                        m.action, m.source, m.reason = "run", None, reason
                        changed = True
    return plan


def check_selection(loaded: LoadedLab, only: Sequence[str], from_step: str | None) -> None:
    """RunError naming lab.yml when --only or --from names a step the lab does not have."""
    ids = [s.id for s in loaded.lab.steps]
    named = [("--only", step) for step in only] + ([("--from", from_step)] if from_step else [])
    for option, value in named:
        if value not in ids:
            raise RunError(
                f"{loaded.display_path()}: {option} {value}: no such step (steps: {', '.join(ids)})"
            )


def gpu_refusal(loaded: LoadedLab, plan: Plan, has_gpu: bool, where: str) -> str | None:
    """Why a run that would execute steps needing a GPU on a host without one is refused before
    anything runs, naming those steps and the ways out; None when nothing stands in the way."""
    needing = [p.step.id for p in plan.to_run if p.step.needs == "gpu"]
    if has_gpu or not needing:
        return None
    lesson = loaded.lab.lesson
    host = "this host" if where == "local" else where
    noun = "step" if len(needing) == 1 else "steps"
    verb = "needs" if len(needing) == 1 else "need"
    ways = [f"Run on a GPU host: course run {lesson} --on ssh://user@host:port"]
    cpu = [s.id for s in loaded.lab.steps if s.needs != "gpu" and not isinstance(s, StopStep)]
    if len(cpu) == 1:
        ways.append(f"or run the step that needs no GPU here: course run {lesson} --only {cpu[0]}")
    elif cpu:
        ways.append(
            f"or run a step that needs no GPU here with --only ({', '.join(cpu)}), e.g. "
            f"course run {lesson} --only {cpu[0]}"
        )
    return (
        f"{loaded.display_path()}: {noun} {', '.join(needing)} {verb} a GPU and {host} has none "
        f"(nvidia-smi finds no GPU). {'; '.join(ways)}"
    )
