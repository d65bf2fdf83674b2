"""Captured values: numbers with thousands separators, JSON key paths, and what a miss says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import CourseRun

from course.lab.schema import Capture
from course.record.masking import Redactor, secret_values
from course.record.models import Value
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
