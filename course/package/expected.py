"""What a run should show on another GPU: the lesson zip's expected.json, and `course compare`.

    expected_for(lab, run)                  the page's values with their `scales:` declarations
    compare_runs(root, lesson, run, ...)    a recorded run against the page's, as a table

Both judge through `compare_lab` (the zip's compare.py), so an author's `course compare` and a
learner's `python3 compare.py` give the same verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import CourseError, RecordError
from ..lab.load import LoadedLab, load_lab
from ..pages.choose import lesson_page_runs, page_run
from ..record.models import Run
from ..record.store import Store
from . import compare_lab, compare_report
from .cards import rental_cards

EXPECTED = "expected.json"
"""The expectation's file name, at the zip's top beside START-HERE.md."""
COMPARE = "lab/compare.py"
"""Where the zip carries compare_lab.py."""
COMPARE_REPORT = "lab/compare_report.py"
"""Where the zip carries compare_report.py, which compare.py imports from beside it."""


def declares_scales(lab: LoadedLab) -> bool:
    """Whether any value of the lab says how it moves on another GPU."""
    return any(step.scaling(n) for step in lab.lab.steps for n in step.capture)


def expected_for(lab: LoadedLab, run: Run) -> dict[str, Any]:
    """expected.json: every value of the run, each with how the lab declares it moves on another
    GPU (`free` and `undeclared` where it declares nothing: shown, not judged) and where a
    learner's run writes it (file and key), the run's GPU and engine, the table of cards."""
    recorded = {s.id: s for s in run.record.steps}
    steps, values = [], []
    for step in lab.lab.steps:
        rec = recorded.get(step.id)
        if rec is None:
            continue  # the run predates the step: nothing of the page's to compare with
        steps.append({"id": step.id, "title": step.title, "needs": step.needs})
        for name, capture in step.capture.items():
            if name not in rec.values:
                continue
            value = rec.values[name]
            declared = step.scaling(name)
            scales = declared.model_dump(exclude_none=True) if declared else {"kind": "free"}
            if declared and declared.like:
                scales["like"] = f"{step.id}.{declared.like}"
            where = (
                {"json": capture.json_file, "key": capture.key}
                if capture.json_file
                else {"regex": capture.regex}
            )
            values.append(
                {
                    "name": f"{step.id}.{name}",
                    "step": step.id,
                    "value": value.value,
                    "type": value.type,
                    "unit": value.unit,
                    "scales": scales,
                    **({} if declared else {"undeclared": True}),
                    **where,
                }
            )
    gpu = run.record.host.gpu
    return {
        "format": compare_lab.FORMAT,
        "lesson": lab.lab.lesson,
        "title": lab.lab.title,
        "run": run.run_id,
        "started": run.record.started,
        "gpu": {"name": gpu.name, "memory_mib": gpu.memory_mib} if gpu else None,
        "engine": run.record.engine,
        "cpu_args": lab.lab.cpu_args,
        "cards": rental_cards(lab.folder.parent.parent),
        "steps": steps,
        "values": values,
    }


def expected_json(expected: dict[str, Any]) -> bytes:
    """The file's bytes: sorted keys, two-space indent, so a zip's bytes stay the same."""
    return (json.dumps(expected, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def compare_source() -> bytes:
    """compare_lab.py as the zip carries it (lab/compare.py)."""
    return Path(compare_lab.__file__).read_bytes()


def compare_files() -> dict[str, bytes]:
    """The zip's compare.py and the report module it imports, by their names in the zip."""
    return {COMPARE: compare_source(), COMPARE_REPORT: Path(compare_report.__file__).read_bytes()}


def undeclared(lab: LoadedLab, run: Run) -> list[str]:
    """The run's values for which neither the capture nor its step declares `scales:` (shown,
    not judged)."""
    left = []
    for rec in run.record.steps:
        try:
            step = lab.lab.step(rec.id)
        except KeyError:
            continue
        left += [f"{rec.id}.{n}" for n in rec.values if n in step.capture and not step.scaling(n)]
    return left


def observed(run: Run, expected: dict[str, Any]) -> compare_lab.Theirs:
    """A recorded run as the comparison's other side: its values, GPU and engine versions."""
    gpu = run.record.host.gpu
    found: dict[str, compare_lab.Observed] = {}
    for entry in expected["values"]:
        step_id, name = entry["step"], entry["name"].split(".", 1)[1]
        try:
            step = run.record.step(step_id)
        except RecordError:
            found[entry["name"]] = compare_lab.Observed(None, f"run {run.run_id} has no {step_id}")
            continue
        value = step.values.get(name)
        why = f"step {step_id} is {step.status} in run {run.run_id}"
        found[entry["name"]] = compare_lab.Observed(
            value.value if value else None, "" if value else why, "cuda" if gpu else "cpu"
        )
    theirs_gpu = (
        compare_lab.Gpu(
            gpu.name, gpu.memory_mib, compare_lab.find_card(gpu.name, expected["cards"])
        )
        if gpu
        else None
    )
    return compare_lab.Theirs(f"run {run.run_id}", theirs_gpu, dict(run.record.engine), found)


def page_run_of(root: Path, store: Store, lesson: str) -> Run:
    """The run the lesson's page shows (its pinned run, else the newest good one)."""
    for page in lesson_page_runs(root):
        if page.lesson == lesson:
            return store.get(lesson, page.run_id)
    return page_run(store, lesson)


def compare_runs(
    root: Path, lesson: str, run_id: str, against: str | None = None
) -> tuple[str, int]:
    """`course compare`: the table of a recorded run against the page's run (or `against`), and
    the exit status: 1 when a value that must be exact differs."""
    store = Store(root / "build")
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    page = store.get(lesson, against) if against else page_run_of(root, store, lesson)
    if not declares_scales(lab):
        raise CourseError(
            f"{lab.display_path()} declares no `scales:` for any value, so there is nothing to "
            "judge a run on another GPU by (add `scales: exact | bandwidth | compute | memory | "
            "free` to its captures)"
        )
    expected = expected_for(lab, page)
    theirs = observed(store.get(lesson, run_id), expected)
    rows = compare_lab.compare(expected, theirs)
    text = compare_report.render(expected, theirs, rows, compare_lab.page_gpu(expected))
    left = undeclared(lab, page)
    if left:
        text += (
            f"Shown, not judged, without `scales:` in {lab.display_path()}: {', '.join(left)}.\n"
        )
    return text, 1 if compare_lab.exact_differs(rows) else 0
