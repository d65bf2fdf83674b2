"""The lab recipe's schema: every problem at once, each naming the file, line, step and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.errors import LabError
from course.lab.load import load_lab
from course.lab.schema import RunStep, StartStep, StopStep


def write_lab(tmp_path: Path, text: str, lesson: str = "demo") -> Path:
    folder = tmp_path / "lab" / lesson
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("print(1)\n")
    path = folder / "lab.yml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(LabError) as info:
        load_lab(path)
    assert str(path.name) in str(info.value)
    return info.value.problems


def test_fixture_lab_loads_with_each_step_kind(project: Path) -> None:
    loaded = load_lab(project / "lab" / "echo-server" / "lab.yml")
    kinds = [type(s) for s in loaded.lab.steps]
    assert kinds == [RunStep, StartStep, RunStep, StopStep, RunStep]
    query = loaded.lab.step("query")
    assert query.capture["count"].json_file == "results/client.json"
    assert query.capture["first"].unit == "ms"
    assert loaded.lab.step("prepare").timeout == 30
    assert loaded.lab.step("words").timeout == 600  # the default


def test_every_problem_is_reported_at_once_with_step_field_and_line(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: demo
title: Demo
steps:
  - id: one
    run: python3 a.py
    timout: 5
  - id: two
    run: echo hi
    capture:
      n: {regex: 'no group here', type: int}
      m: {json: out.json, type: float, unit: parsecs}
  - id: Bad_Id
    start: python3 server.py
  - id: four
    stop: servr
""",
    )
    found = problems(path)
    assert len(found) == 5, found
    assert (
        "line 6: step 'one': timout: unknown key 'timout' (did you mean 'timeout'?); a run step "
        "takes: id, title, needs, env, inputs, files, capture, uses, cpu, real_weights, "
        "sizes_to_card, scales, run, timeout"
    ) in found
    assert any("step 'two': capture.n" in p and "needs a group" in p for p in found)
    assert any("step 'two': capture.m.unit" in p and "'parsecs' is not one of" in p for p in found)
    assert any("step 'Bad_Id': id:" in p and "not a valid name" in p for p in found)
    assert any("step 'Bad_Id': ready: required but missing" in p for p in found)


def test_json_capture_needs_a_key_and_step_needs_a_kind(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: demo
title: Demo
stesp: []
steps:
  - id: one
    capture:
      v: {json: out.json}
  - id: two
    run: echo hi
    capture:
      v: {json: out.json, regex: '(x)'}
""",
    )
    found = problems(path)
    assert (
        "line 3: stesp: unknown key 'stesp' (did you mean 'steps'?); the top level takes: lesson, "
        "title, engine, python, setup, resources, builds, cpu_args, include, noise, steps"
    ) in found
    assert any("step 'one':" in p and "exactly one of 'run', 'start' or 'stop'" in p for p in found)
    assert any("step 'two': capture.v: give exactly one of 'regex' or 'json'" in p for p in found)


def test_cross_step_problems(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: other
title: Demo
steps:
  - id: one
    run: echo hi
    inputs: [a.py, missing/*.json]
  - id: one
    stop: servr
""",
    )
    found = problems(path)
    assert any("step id 'one' is used twice" in p for p in found)
    assert any("stop: 'servr' is not a service started by an earlier step" in p for p in found)


def test_inputs_that_match_nothing_and_lesson_name_are_reported(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: other
title: Demo
steps:
  - id: one
    run: echo hi
    inputs: [a.py, "missing/*.json"]
    files: [../escape.txt]
""",
    )
    found = problems(path)
    assert any("'../escape.txt' must be a path inside the lab folder" in p for p in found)
    # the file-system checks run once the schema holds
    path.write_text(path.read_text().replace("    files: [../escape.txt]\n", ""))
    found = problems(path)
    assert "lesson: 'other' differs from its folder name 'demo'" in found
    assert any("line 6: step 'one': inputs: 'missing/*.json' matches no file" in p for p in found)


def test_bad_yaml_and_missing_file(tmp_path: Path) -> None:
    path = write_lab(tmp_path, "lesson: demo\nsteps: [\n  - id: x\n")
    (found,) = problems(path)
    assert "not valid YAML" in found and found.startswith("line ")
    missing = tmp_path / "nowhere" / "lab.yml"
    with pytest.raises(LabError, match="no such file"):
        load_lab(missing)


def test_unknown_keys_at_every_depth_get_a_suggestion_and_the_allowed_keys(tmp_path: Path) -> None:
    """The guesses a new author made: `ready: {timeout: 10}`, `ready: {deadline: 10}`, and
    misspellings inside a capture, setup and resources."""
    path = write_lab(
        tmp_path,
        """\
lesson: demo
title: Demo
setup: {install_second: 10}
resources: {gpus: H100}
steps:
  - id: serve
    start: python3 a.py
    ready: {url: "http://127.0.0.1:8000/", timeout: 10}
  - id: serve-2
    start: python3 a.py
    ready: {log: ready, deadline: 10}
    timeout: 5
  - id: one
    run: python3 a.py
    capture:
      n: {regex: '(\\d+)', units: ms}
  - id: two
    rnu: python3 a.py
""",
    )
    found = problems(path)
    assert found == [
        "line 3: setup.install_second: unknown key 'install_second' (did you mean "
        "'install_seconds'?); setup takes: install_seconds, download_seconds",
        "line 4: resources.gpus: unknown key 'gpus' (did you mean 'gpu'?); resources takes: gpu, "
        "count, disk_gb",
        "line 8: step 'serve': ready.timeout: unknown key 'timeout' ('timeout' is a key of a run "
        "step); ready takes: url, log",
        "line 11: step 'serve-2': ready.deadline: unknown key 'deadline' ('deadline' is a key of a "
        "start step, one level up); ready takes: url, log",
        "line 12: step 'serve-2': timeout: unknown key 'timeout' ('timeout' is a key of a run "
        "step); a start step takes: id, title, needs, env, inputs, files, capture, uses, cpu, "
        "real_weights, sizes_to_card, scales, start, "
        "ready, deadline",
        "line 16: step 'one': capture.n.units: unknown key 'units' (did you mean 'unit'?); "
        "capture 'n' takes: regex, json, key, type, unit, scales",
        "line 17: step 'two': a step needs exactly one of 'run', 'start' or 'stop' (found 'rnu': "
        "did you mean 'run'?)",
    ]


def test_the_allowed_keys_come_from_the_models() -> None:
    """No hand-kept list: every field of every model is a key the messages know."""
    from course.lab.keys import keys, mapping_at
    from course.lab.schema import Capture, Lab, Ready, Resources, Setup

    assert keys(Capture) == ["regex", "json", "key", "type", "unit", "scales"]
    for loc, model in [
        ((), Lab),
        (("setup",), Setup),
        (("resources",), Resources),
        (("steps", 0, "start", "ready"), Ready),
        (("steps", 2, "run", "capture", "p50"), Capture),
        (("steps", 1, "stop"), StopStep),
    ]:
        found = mapping_at(loc)
        assert found is not None and found.model is model, loc
    assert mapping_at(("steps", 0, "run", "env")) is None  # a mapping of names, not of keys
    assert mapping_at(("nowhere",)) is None


def test_scales_declare_how_a_value_moves_on_another_gpu(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: demo
title: Demo
steps:
  - id: one
    run: python3 a.py
    capture:
      size: {regex: 'size (\\d+)', type: int, unit: B, scales: exact}
      speed: {regex: 'speed (\\d+)', unit: tok/s, scales: bandwidth}
      room: {regex: 'room (\\d+)', type: int, unit: B, scales: {kind: memory, share: 0.9}}
      tokens: {regex: 'tokens (\\d+)', type: int, unit: tok, scales: {kind: memory, like: room}}
      took: {regex: 'took (\\d+)', unit: s}
""",
    )
    captures = load_lab(path).lab.step("one").capture
    assert captures["size"].scales is not None and captures["size"].scales.kind == "exact"
    assert captures["room"].scales is not None and captures["room"].scales.share == 0.9
    assert captures["tokens"].scales is not None and captures["tokens"].scales.like == "room"
    assert captures["took"].scales is None  # optional


def test_bad_scales_are_reported_with_step_field_and_hint(tmp_path: Path) -> None:
    path = write_lab(
        tmp_path,
        """\
lesson: demo
title: Demo
steps:
  - id: one
    run: python3 a.py
    capture:
      a: {regex: 'a (\\d+)', scales: bandwith}
      b: {regex: 'b (\\d+)', unit: s, scales: {kind: bandwidth, share: 0.5}}
      c: {regex: 'c (\\d+)', unit: tok, scales: {kind: memory, share: 0.9}}
      d: {regex: 'd (\\d+)', scales: {kind: memory, shares: 0.9}}
  - id: two
    run: python3 a.py
    capture:
      room: {regex: 'r (\\d+)', unit: B, scales: free}
      e: {regex: 'e (\\d+)', scales: {kind: memory, like: rooms}}
      f: {regex: 'f (\\d+)', scales: {kind: memory, like: room}}
""",
    )
    found = problems(path)
    assert len(found) == 5, found  # the two `like` problems of step two share one line
    assert any(
        p.startswith("line 7: step 'one': capture.a.scales.kind: 'bandwith' is not one of")
        for p in found
    )
    assert any(
        "capture.b.scales: 'share' and 'like' go with kind 'memory' only" in p for p in found
    )
    assert any("capture.c: scales: 'share' needs a unit of bytes, not 'tok'" in p for p in found)
    assert (
        "line 10: step 'one': capture.d.scales.shares: unknown key 'shares' (did you mean 'share'?)"
        "; scales takes: kind, share, like" in found
    )
    assert any(
        "step 'two': capture.e.scales.like: 'rooms' is not a value of this step (did you mean "
        "'room'?)" in p
        for p in found
    )
    assert any(
        "capture.f.scales.like: 'room' must declare `scales: memory` itself" in p for p in found
    )


NOISE_LAB = """\
lesson: demo
title: Demo
noise:
  between_hosts: 2
  values:
{values}
steps:
  - id: concurrency
    run: python3 a.py
    capture:
      tok_s_1: {{regex: 'one: ([\\d.]+)', unit: tok/s}}
      tok_s_64: {{regex: 'many: ([\\d.]+)', unit: tok/s}}
"""


def test_noise_by_pattern_loads_in_its_order(tmp_path: Path) -> None:
    values = "    'concurrency.tok_s_6?': 50\n    'concurrency.*': 15\n"
    lab = load_lab(write_lab(tmp_path, NOISE_LAB.format(values=values))).lab
    assert list(lab.noise.values.items()) == [("concurrency.tok_s_6?", 50), ("concurrency.*", 15)]


def test_a_noise_pattern_that_matches_no_value_is_refused_by_name(tmp_path: Path) -> None:
    values = "    'concurrency.tok_s_*': 50\n    'concurency.tok_s_6*': 40\n    'decode.*': 9\n"
    found = problems(write_lab(tmp_path, NOISE_LAB.format(values=values)))
    assert found == [
        "line 7: noise.values: 'concurency.tok_s_6*' matches no captured value of the lab (a "
        "value is named step.value) (did you mean 'concurrency.tok_s_64'?)",
        "line 8: noise.values: 'decode.*' matches no captured value of the lab (a value is "
        "named step.value)",
    ]


def test_a_noise_pattern_wholly_behind_an_earlier_one_is_refused(tmp_path: Path) -> None:
    values = (
        "    'concurrency.*': 15\n    'concurrency.tok_s_6?': 50\n    'concurrency.tok_s_1': 9\n"
    )
    found = problems(write_lab(tmp_path, NOISE_LAB.format(values=values)))
    assert found == [
        f"line {n}: noise.values: '{p}' sets the noise of no value: each value it matches is "
        "taken by an earlier pattern ('concurrency.*'; the first match wins): put it before them"
        for n, p in ((7, "concurrency.tok_s_6?"), (8, "concurrency.tok_s_1"))
    ]
    # one value of its own is enough: 'tok_s_*' still sets tok_s_64's noise
    values = "    'concurrency.tok_s_1': 15\n    'concurrency.tok_s_*': 50\n"
    load_lab(write_lab(tmp_path / "own", NOISE_LAB.format(values=values)))


@pytest.mark.parametrize("pct", ["301", "-1", "'half'"])
def test_a_noise_percent_outside_0_to_300_is_refused_naming_its_pattern(
    tmp_path: Path, pct: str
) -> None:
    values = f"    'concurrency.tok_s_1': 5\n    'concurrency.tok_s_*': {pct}\n"
    found = problems(write_lab(tmp_path, NOISE_LAB.format(values=values)))
    shown = pct.strip("'")
    said = repr(shown) if pct.startswith("'") else shown
    assert found == [
        f"line 5: noise.values: 'concurrency.tok_s_*': {said} is not a percent from 0 to 300"
    ]


def test_a_lab_loaded_again_is_read_again_whenever_what_it_checks_changed(tmp_path: Path) -> None:
    """A process asks for a lab many times (a build: about 50); it is given the same object while
    lab.yml and the names of the files its inputs match are unchanged, and read again otherwise."""
    shared = tmp_path / "lab" / "common" / "kit"
    shared.mkdir(parents=True)
    (shared / "one.py").write_text("x = 1\n")
    text = """\
lesson: demo
title: Demo
include: [../common/kit]
steps:
  - id: one
    run: python3 a.py
    inputs: [a.py, "data/*.json", "kit/two.py"]
"""
    path = write_lab(tmp_path, text)
    (path.parent / "data").mkdir()
    (path.parent / "data" / "n.json").write_text("{}")
    (shared / "two.py").write_text("y = 2\n")
    first = load_lab(path)
    assert load_lab(path) is first  # nothing changed
    (path.parent / "data" / "n.json").write_text('{"n": 1}')  # a file's content: not validated
    assert load_lab(path) is first
    (path.parent / "data" / "n.json").unlink()  # an input glob now matches nothing
    assert any("'data/*.json' matches no file" in p for p in problems(path))
    (path.parent / "data" / "m.json").write_text("{}")
    again = load_lab(path)
    assert again is not first and again.lab == first.lab
    (shared / "two.py").unlink()  # a file the include brought
    assert any("'kit/two.py' matches no file" in p for p in problems(path))
    (shared / "two.py").write_text("y = 2\n")
    path.write_text(text.replace("title: Demo", "title: Dome"))  # lab.yml, its size unchanged
    assert load_lab(path).lab.title == "Dome"
    (tmp_path / "lab" / "common" / "kit").rename(tmp_path / "lab" / "common" / "gone")
    assert any("include" in p and "../common/kit" in p for p in problems(path))
    (tmp_path / "lab" / "common" / "gone").rename(tmp_path / "lab" / "common" / "kit")
    assert load_lab(path).lab.title == "Dome"
    (path.parent / "loop").symlink_to(".")  # a loop: refused, never taken from before
    assert any("a folder that holds it: a loop" in p for p in problems(path))
