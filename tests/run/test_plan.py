"""What a run reuses: a capture's `scales:` (how a value moves on another GPU) changes nothing
the step runs, so declaring it leaves every recorded step reusable."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CourseRun

from course.lab.load import load_lab
from course.record.store import Store
from course.run.plan import digest, hash_lab_files, hash_step

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


@pytest.mark.parametrize("lesson", ["prefill-decode"])
def test_labs_that_declare_scales_still_hash_as_recorded(lesson: str) -> None:
    """Lesson 2.3 declares `scales:` and `noise:`; its committed runs' steps still hash the same
    with the files as they were when recorded (the files themselves may have changed since: that
    re-runs a step, as it should)."""
    root = Path(__file__).resolve().parents[2]
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    assert any(c.scales for s in lab.lab.steps for c in s.capture.values())
    run = Store(root / "build").newest_good(lesson)
    assert run is not None
    assert lab.lab.noise.between_hosts > 0
    files = hash_lab_files(lab)
    for rec in run.record.steps:
        if rec.kind == "build":  # a native build is not a lab step and has no step hash
            continue
        parts = rec.hash_parts
        then = {**files, **parts.inputs}  # each file as the record read it
        _, now = hash_step(lab, lab.lab.step(rec.id), then, parts.engine, parts.gpu)
        # the step still reads every file it read when recorded (a file the kit gained since,
        # such as labkit/logs.py, is read too: that does re-run it)
        assert set(parts.inputs) <= set(now.inputs), rec.id
        assert now.definition == parts.definition, rec.id  # scales: and noise: left out
        same = now.model_copy(update={"inputs": {n: parts.inputs[n] for n in parts.inputs}})
        assert digest(same.model_dump(mode="json")) == rec.hash, rec.id


@pytest.mark.parametrize(
    "lesson", ["kv-cache", "prefill-decode", "gpu-memory", "smaller-cache", "quantized-kv-cache"]
)
def test_what_only_start_here_and_compare_read_reruns_nothing(lesson: str) -> None:
    """A step's `cpu:`, `real_weights:`, `sizes_to_card:` and `scales:` (its own and its
    captures') tell a learner
    and compare.py something; taking them away leaves every step's hash as it is."""
    root = Path(__file__).resolve().parents[2]
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    files = hash_lab_files(lab)
    bare = {}
    for step in lab.lab.steps:
        captures = {n: c.model_copy(update={"scales": None}) for n, c in step.capture.items()}
        plain = step.model_copy(
            update={
                "cpu": None,
                "real_weights": None,
                "sizes_to_card": False,
                "scales": None,
                "capture": captures,
            }  # fmt: skip
        )
        assert hash_step(lab, plain, files, {}, "h200") == hash_step(lab, step, files, {}, "h200")
        bare[step.id] = plain != step
    assert any(bare.values()), "the lab declares none of them: the test proves nothing"


@pytest.mark.parametrize(
    ("lesson", "servers", "script"),
    [
        ("kv-cache", ["llama-server-4096", "llama-server-32768"], "decode_speed.py"),
        ("prefix-caching", ["server-1", "server-4"], "paper.py"),
    ],
)
def test_a_server_that_reads_no_lab_file_is_not_rerun_by_an_edited_script(
    lesson: str, servers: list[str], script: str
) -> None:
    """llama-server reads the GGUF files its unit's steps made (`inputs: []`): a change to a
    script of the lab that no llama.cpp step runs leaves the servers', and so the whole unit's
    and its build's, hashes as they were (it re-ran them all, build included, before)."""
    root = Path(__file__).resolve().parents[2]
    lab = load_lab(root / "lab" / lesson / "lab.yml")
    files = hash_lab_files(lab)
    assert script in files
    edited = {**files, script: "0" * 64}
    for step_id in servers:
        step = lab.lab.step(step_id)
        assert step.inputs == [] and step.uses == ["llama.cpp"]
        assert hash_step(lab, step, edited, {}, "h200") == hash_step(lab, step, files, {}, "h200")
    readers = [
        s
        for s in lab.lab.steps
        if hash_step(lab, s, edited, {}, "h200")[1].inputs
        != hash_step(lab, s, files, {}, "h200")[1].inputs
    ]
    assert readers and all("llama.cpp" not in s.uses for s in readers), [s.id for s in readers]
