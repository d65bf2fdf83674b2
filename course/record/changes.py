"""What changed in a lab between two hashes of a step, or between two runs, read from the steps'
`hash_parts` (their definition, the files they read, the engine versions, the GPU).

    part_changes(new_parts, old_parts) -> Changes(definition=False, inputs=["train.py"], ...)
    run_changes(previous, record)      -> ["train.py", "step 'train' (its definition)"]

`course run --dry-run` says with it why a step runs again; the run histories say what each run
changed from the one before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .models import HashParts, Record


@dataclass
class Changes:
    """How one step's hash parts differ from an earlier one's."""

    definition: bool = False
    inputs: list[str] = field(default_factory=list)
    """Files read by either, whose content differs (or that one of them did not read)."""
    engine: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    """(package, old version, new version) for each engine package that moved."""
    gpu: tuple[str, str] | None = None

    def __bool__(self) -> bool:
        return bool(self.definition or self.inputs or self.engine or self.gpu)

    def reasons(self) -> list[str]:
        """The changes in a few words each: its definition, the input files that changed
        (`changed: a.py, b.py`), the engine, the GPU."""
        said = ["its definition changed"] if self.definition else []
        if self.inputs:
            extra = len(self.inputs) - 3
            more = f" and {extra} more" if extra > 0 else ""
            said.append(f"changed: {', '.join(self.inputs[:3])}{more}")
        if self.engine:
            said.append("engine " + ", ".join(f"{k} {a} -> {b}" for k, a, b in self.engine))
        if self.gpu:
            said.append(f"GPU {self.gpu[0]} -> {self.gpu[1]}")
        return said


def part_changes(new: HashParts, old: HashParts) -> Changes:
    """How a step's hash parts differ from an earlier record of the same step."""
    names = set(new.inputs) | set(old.inputs)
    return Changes(
        definition=new.definition != old.definition,
        inputs=sorted(n for n in names if new.inputs.get(n) != old.inputs.get(n)),
        engine=[
            (k, old.engine.get(k), new.engine.get(k))
            for k in sorted(set(new.engine) | set(old.engine))
            if old.engine.get(k) != new.engine.get(k)
        ],
        gpu=(old.gpu, new.gpu) if new.gpu != old.gpu else None,
    )


def run_changes(previous: Record, record: Record) -> list[str]:
    """What a run's lab changed from the previous run's, in a few words each: the files that
    changed, the steps whose definition changed, steps added or removed, engine versions, GPU."""
    before = {s.id: s for s in previous.steps}
    after = {s.id: s for s in record.steps}
    files: set[str] = set()
    defined, engine, gpu = [], {}, None
    for step_id, step in after.items():
        old = before.get(step_id)
        if old is None:
            continue
        found = part_changes(step.hash_parts, old.hash_parts)
        files.update(found.inputs)
        if found.definition:
            defined.append(step_id)
        engine.update({k: (a, b) for k, a, b in found.engine})
        gpu = gpu or found.gpu
    said = sorted(files)
    said += [f"step '{s}' (its definition)" for s in defined]
    said += [f"step '{s}' added" for s in after if s not in before]
    said += [f"step '{s}' removed" for s in before if s not in after]
    said += [f"{k} {a or '—'} → {b or '—'}" for k, (a, b) in sorted(engine.items())]
    said += [f"GPU {gpu[0]} → {gpu[1]}"] if gpu else []
    return said
