"""What a run reuses: a capture's `scales:` (how a value moves on another GPU) changes nothing
the step runs, so declaring it leaves every recorded step reusable."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CourseRun

from course.lab.load import load_lab
from course.record.store import Store
from course.run.plan import hash_lab_files, hash_step

LAB = "echo-server"


def test_declaring_scales_reruns_nothing(project: Path, course: CourseRun) -> None:
    assert course("run", LAB).returncode == 0
    path = project / "lab" / LAB / "lab.yml"
    text = path.read_text()
    declared = text.replace("type: int}", "type: int, scales: exact}").replace(
        "unit: ms}", "unit: ms, scales: {kind: compute}}"
    )
    assert declared.count("scales:") == 3
    path.write_text(declared)
    again = course("run", LAB)
    assert again.returncode == 0 and "Nothing to do" in again.stderr, again.stderr
    assert len(Store(project / "build").runs(LAB)) == 1
    # while a change to what the step captures does re-run it
    path.write_text(declared.replace("key: count, type: int", "key: count, type: float"))
    plan = course("run", LAB, "--dry-run")
    assert plan.returncode == 0 and "its definition changed" in plan.stdout, plan.stdout


@pytest.mark.parametrize("lesson", ["kv-cache", "prefill-decode"])
def test_labs_that_declare_scales_still_hash_as_recorded(lesson: str) -> None:
    """Lessons 2.4 and 2.3 declare `scales:`; their committed runs' steps still hash the same."""
    root = Path(__file__).resolve().parents[2]
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    assert any(c.scales for s in lab.lab.steps for c in s.capture.values())
    run = Store(root / "build").newest_good(lesson)
    assert run is not None
    files = hash_lab_files(lab)
    for rec in run.record.steps:
        if rec.kind == "build":  # a native build is not a lab step and has no step hash
            continue
        parts = rec.hash_parts
        digest, now = hash_step(lab, lab.lab.step(rec.id), files, parts.engine, parts.gpu)
        assert now.definition == parts.definition, rec.id
        assert digest == rec.hash, rec.id
