"""Captured values: numbers with thousands separators, JSON key paths, and what a miss says."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import COURSE, CourseRun

from course.lab.schema import Capture
from course.record.masking import Redactor, secret_values
from course.record.models import Spread, Value
from course.record.store import Store
from course.run.capture import CaptureMiss, capture_values, parse_number
from course.run.terminal import clean, tail, transcript


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("114,688", "int", 114688),
        ("1_000_000", "int", 1000000),
        ("4\u202f096", "int", 4096),
        ("448.0", "float", 448.0),
        ("1,234.5", "float", 1234.5),
        ("3e3", "int", 3000),
        (" tok ", "str", "tok"),
    ],
)
def test_numbers_are_read_with_their_separators(text: str, kind: str, expected: object) -> None:
    value = parse_number(text, kind)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("text", "kind"), [("4.5", "int"), ("12,34", "int"), ("n/a", "float")])
def test_what_is_not_a_number_is_said(text: str, kind: str) -> None:
    with pytest.raises(CaptureMiss, match="expected"):
        parse_number(text, kind)


def test_capture_values_from_output_and_json(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text(
        json.dumps({"models": {"small": {"sizes": [10, 2.5]}}, "flag": True})
    )
    captures = {
        "per_token": Capture(regex=r"([\d,]+) bytes per token", type="int", unit="B"),
        "second": Capture(json="out.json", key="models.small.sizes.1", unit="MiB"),
        "wrong": Capture(json="out.json", key="models.large.sizes", type="int"),
        "flag": Capture(json="out.json", key="flag", type="int"),
        "nested": Capture(json="out.json", key="models", type="int"),
        "absent": Capture(regex=r"speed (\d+)"),
        "nofile": Capture(json="none.json", key="a"),
    }
    values, misses = capture_values(captures, "Qwen3-0.6B: 114,688 bytes per token\n", tmp_path)
    assert values == {
        "per_token": Value(value=114688, type="int", unit="B"),
        "second": Value(value=2.5, type="float", unit="MiB"),
    }
    assert misses == [
        "capture 'wrong': 'out.json' has no key 'models.large' (looking for 'models.large.sizes')",
        "capture 'flag': 'out.json' key 'flag' holds a boolean, not a int",
        "capture 'nested': 'out.json' key 'models' holds dict, not a value",
        "capture 'absent': the pattern 'speed (\\\\d+)' matched nothing in the output",
        "capture 'nofile': the JSON file 'none.json' was not written",
    ]


def test_terminal_cleaning() -> None:
    raw = "\x1b[32mgreen\x1b[0m\r\nloading 10%\rloading 100%\nab\bc\n\x1b]0;title\x07done"
    assert clean(raw) == "green\nloading 100%\nac\ndone"
    assert transcript("python3 x.py", "hi") == "lab $ python3 x.py\nhi\n"
    assert tail("\n".join(str(i) for i in range(30)) + "\n", 3) == ["27", "28", "29"]


def test_redactor_masks_secret_values_longest_first() -> None:
    env = {"HF_TOKEN": "abc123", "MY_API_KEY": "abc123456", "PATH": "/usr/bin", "SECRET_X": "no"}
    secrets = secret_values(env)
    assert secrets == ["abc123456", "abc123"]  # 'no' is too short to mask safely
    redact = Redactor(secrets)
    assert redact("key=abc123456 token=abc123 path=/usr/bin") == "key=*** token=*** path=/usr/bin"
    assert redact.value(42) == 42


TIMED = {"median": 23.6, "min": 22.8, "q1": 23.1, "q3": 25.9, "max": 30.1, "n": 20}


def test_a_timed_value_is_recorded_as_its_median_with_its_spread(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(json.dumps({"ttft": {"128": TIMED}, "old": 4.5}))
    captures = {
        "ttft": Capture(json="r.json", key="ttft.128", unit="ms"),
        "ttft_best": Capture(json="r.json", key="ttft.128.min", unit="ms"),
        "old": Capture(json="r.json", key="old", unit="ms"),
    }
    values, misses = capture_values(captures, "", tmp_path)
    assert misses == []
    assert values["ttft"] == Value(
        value=23.6,
        type="float",
        unit="ms",
        spread=Spread(n=20, min=22.8, q1=23.1, q3=25.9, max=30.1),
    )
    assert values["ttft_best"] == Value(value=22.8, type="float", unit="ms")  # the number alone
    assert values["old"].spread is None
    # in run.json: the median as the value, the rest beside it; a value without spread as before
    assert values["ttft"].model_dump(exclude_none=True) == {
        "value": 23.6,
        "type": "float",
        "unit": "ms",
        "spread": {"n": 20, "min": 22.8, "q1": 23.1, "q3": 25.9, "max": 30.1},
    }
    assert Value.model_validate({"value": 4.5, "type": "float", "unit": "ms"}).spread is None


@pytest.mark.parametrize(
    ("changes", "capture_type", "expected"),
    [
        (
            {"n": 0},
            "float",
            "holds a timed value that cannot be: n is 0 (expected a whole number, at least 1)",
        ),
        (
            {"n": 2.5},
            "float",
            "holds a timed value that cannot be: n is 2.5 (expected a whole number, at least 1)",
        ),
        (
            {"q1": 24.0},
            "float",
            "holds a timed value that cannot be: expected min <= q1 <= median <= q3 <= max, "
            "found min 22.8, q1 24.0, median 23.6, q3 25.9, max 30.1",
        ),
        (
            {"max": float("inf")},
            "float",
            "holds a timed value that cannot be: max is inf",
        ),
        (
            {"q3": None},
            "float",
            "holds a timed value whose statistics are not all numbers: n 20, min 22.8, "
            "q1 23.1, median 23.6, q3 None, max 30.1",
        ),
        (
            {"q1": "drop"},
            "float",
            "holds a timed value without q1 (a timed value is "
            '{"median": m, "min": a, "q1": b, "q3": c, "max": d, "n": k})',
        ),
        ({}, "int", "holds a timed value (a median): capture it as type float"),
    ],
)
def test_a_timed_value_that_cannot_be_is_refused(
    tmp_path: Path, changes: dict[str, object], capture_type: str, expected: str
) -> None:
    timed = {**TIMED, **changes}
    timed = {k: v for k, v in timed.items() if v != "drop"}
    (tmp_path / "r.json").write_text(json.dumps({"ttft": timed}))
    captures = {"ttft": Capture(json="r.json", key="ttft", type=capture_type, unit="ms")}  # type: ignore[arg-type]
    values, misses = capture_values(captures, "", tmp_path)
    assert values == {}
    assert misses == [f"capture 'ttft': 'r.json' key 'ttft' {expected}"]


def test_a_run_refuses_a_timed_value_naming_the_step_capture_and_file(tmp_path: Path) -> None:
    lab = tmp_path / "lab" / "spread"
    lab.mkdir(parents=True)
    (lab / "lab.yml").write_text(
        "lesson: spread\ntitle: A wrong spread\nsteps:\n  - id: time\n    run: python3 w.py\n"
        "    capture:\n      ttft: {json: out/r.json, key: ttft.128, unit: ms}\n"
    )
    wrong = {**TIMED, "q1": 24.0}
    (lab / "w.py").write_text(
        "import json, os\nos.makedirs('out', exist_ok=True)\n"
        f"json.dump({{'ttft': {{'128': {wrong!r}}}}}, open('out/r.json', 'w'))\n"
    )
    done = subprocess.run(
        [*COURSE, "--root", str(tmp_path), "run", "spread", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert done.returncode == 1
    assert (
        f"error: {lab / 'lab.yml'}: step 'time' failed: capture 'ttft': 'out/r.json' key "
        "'ttft.128' holds a timed value that cannot be: expected min <= q1 <= median <= q3 <= "
        "max, found min 22.8, q1 24.0, median 23.6, q3 25.9, max 30.1" in done.stderr
    )


def test_a_non_finite_capture_fails_its_step_and_the_record_stays_json(
    project: Path, course: CourseRun
) -> None:
    lab = project / "lab" / "echo-server" / "lab.yml"
    lab.write_text(
        lab.read_text()
        + """
  - id: odd
    run: |
      echo "speed: nan"; echo "rate: inf"; echo "fine: 2.5"
      echo '{"t": Infinity, "n": -Infinity}' > odd.json
    capture:
      speed: {regex: 'speed: (\\S+)', type: float, unit: ms}
      rate: {regex: 'rate: (\\S+)', type: int}
      t: {json: odd.json, key: t, type: float}
      n: {json: odd.json, key: n, type: int}
      fine: {regex: 'fine: (\\S+)', type: float}
"""
    )
    done = course("run", "echo-server", "--only", "odd")
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert (
        "step 'odd' failed: capture 'speed': the value is nan, not a finite number; "
        "capture 'rate': expected an integer, found 'inf'; "
        "capture 't': the value is inf, not a finite number; "
        "capture 'n': 'odd.json' key 'n' holds -inf, not an integer"
    ) in said, said
    (run,) = Store(project / "build").runs("echo-server")
    constants: list[str] = []  # strict JSON: no NaN, no Infinity
    for path in run.folder.rglob("*.json"):
        json.loads(path.read_text(), parse_constant=constants.append)
    assert constants == []
    assert run.record.failure is not None and "the value is nan" in run.record.failure.message


def test_run_json_refuses_what_json_cannot_hold(tmp_path: Path) -> None:
    from course.errors import RecordError
    from course.record.files import dump_json, read_record

    with pytest.raises(RecordError, match=r"^steps\.0\.values\.x\.value = inf is not a finite"):
        dump_json({"steps": [{"values": {"x": {"value": float("inf")}}}]})
    (tmp_path / "run.json").write_text('{"format": 1, "x": NaN}')
    with pytest.raises(RecordError, match=r"run.json: not valid JSON: NaN is not valid JSON"):
        read_record(tmp_path)
