"""compare.py says nothing false: each line of its table and summary against results a learner's
run really writes (a results file without a value where a GPU reading would be, sizes made on a
CPU without --tiny, a key a step left out, a file not written yet), run as the zip runs it: in a
lab folder, beside compare_report.py, with no nvidia-smi on the PATH."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from support import REPO, run_compare_py

from course.package.cards import rental_cards
from course.package.compare_report import cell, plain
from course.package.expected import EXPECTED, expected_json


def expectation(values: list[dict[str, Any]], needs: str | None = "gpu") -> dict[str, Any]:
    """A page's expected.json for one step `s` (and a second, `t`, that nothing ran)."""
    return {
        "format": 1,
        "title": "Toy",
        "run": "2026-01-01T000000Z-h200",
        "gpu": {"name": "NVIDIA H200", "memory_mib": 143_771},
        "engine": {},
        "cards": rental_cards(REPO),
        "cpu_args": "--device cpu --tiny",
        "steps": [{"id": "s", "needs": needs}, {"id": "t", "needs": needs}],
        "values": [
            {"step": v["name"].split(".")[0], "type": "int", "unit": "B", **v} for v in values
        ],
    }


def run_compare(
    tmp_path: Path, expected: dict[str, Any], results: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """compare.py in a lesson folder laid out as the zip is, with these results files."""
    top = tmp_path / "lesson"
    (top / "lab" / "results").mkdir(parents=True)
    (top / EXPECTED).write_bytes(expected_json(expected))
    for name, data in results.items():
        (top / "lab" / "results" / name).write_text(json.dumps(data), encoding="utf-8")
    return run_compare_py(top, tmp_path)


def row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(name + " "))


SIZE = {"json": "results/s.json", "scales": {"kind": "exact"}}
PEAK = {"json": "results/s.json", "scales": {"kind": "memory", "share": 0}}


def test_a_gpu_reading_a_cpu_run_could_not_take_is_not_measured(tmp_path: Path) -> None:
    """llama_chat.py on a CPU writes `peak_gpu_memory: null`: the step ran, its tokens agree."""
    expected = expectation(
        [
            {"name": "s.tokens", "value": 3084, "unit": "tok", "key": "tokens", **SIZE},
            {"name": "s.peak", "value": 2_433_744_896, "key": "peak", **PEAK},
        ]
    )
    results = {"s.json": {"device": "cuda", "tokens": 3084, "peak": None}}
    done = run_compare(tmp_path, expected, results)
    assert done.returncode == 0, done.stdout + done.stderr
    assert row(done.stdout, "tokens").endswith("agrees")
    assert row(done.stdout, "peak").endswith("not measured [1]")
    assert "[1] Not measured: your results hold no value for it." in done.stdout
    assert "Not run" not in done.stdout and "lacks" not in done.stdout
    assert "Not in your results" not in done.stdout


def test_sizes_made_on_a_cpu_without_tiny_are_judged_to_the_byte(tmp_path: Path) -> None:
    """llama_gguf.py --device cpu (the real shapes) writes the page's sizes: they agree; with
    --tiny they are not the page's, and compare.py says why."""
    expected = expectation(
        [
            {"name": "s.bf16_bytes", "value": 1_200_994_144, "key": "bf16", **SIZE},
            {"name": "s.peak", "value": 1_503_280_640, "key": "peak", **PEAK},
        ]
    )
    full = {"device": "cpu", "tiny": False, "bf16": 1_200_994_144, "peak": 0}
    done = run_compare(tmp_path / "full", expected, {"s.json": full})
    assert done.returncode == 0, done.stdout
    assert row(done.stdout, "bf16_bytes").endswith("agrees")
    assert row(done.stdout, "peak").endswith("not comparable [1]")
    assert "[1] Not comparable: this step ran on the CPU, and a CPU's speed or memory" in (
        done.stdout
    )
    assert "Sizes and counts match the page's to the byte (1 value)." in done.stdout
    assert "sizes differ" not in done.stdout and "on purpose" not in done.stdout
    shrunk = {**full, "tiny": True, "bf16": 721_664}
    done = run_compare(tmp_path / "tiny", expected, {"s.json": shrunk})
    assert done.returncode == 0, done.stdout
    assert row(done.stdout, "bf16_bytes").endswith("not comparable [1]")
    assert "[1] Not comparable: these results come from the lab's CPU mode (--device cpu" in (
        done.stdout
    )


def test_a_missing_key_a_missing_file_and_a_printed_value_each_say_what_they_are(
    tmp_path: Path,
) -> None:
    expected = expectation(
        [
            {"name": "s.here", "value": 7, "key": "here", **SIZE},
            {"name": "s.gone", "value": 8, "key": "depths.2048", **SIZE},
            {"name": "s.printed", "value": 448, "regex": "size = ([\\d.]+) MiB", "scales": SIZE},
            {"name": "t.later", "value": 9, "json": "results/t.json", "key": "x", "scales": {}},
        ]
    )
    expected["values"][2]["scales"] = {"kind": "exact"}
    expected["values"][3]["scales"] = {"kind": "exact"}
    done = run_compare(tmp_path, expected, {"s.json": {"device": "cuda", "here": 7}})
    out = done.stdout
    assert done.returncode == 0, out
    assert row(out, "gone").endswith("missing [1]")
    assert "[1] results/s.json has no `depths.2048` (a part the step left out on this machine," in (
        out
    )
    assert row(out, "printed").endswith("not read [2]")
    assert "[2] Not read: the step prints this value and no results file holds it" in out
    assert row(out, "later").endswith("not run [3]")
    assert "[3] results/t.json is not there: run the step first" in out
    assert "Not in your results: s.gone." in out
    assert "Not run yet (no results file): t." in out


def test_numbers_are_written_with_units_and_no_exponent(tmp_path: Path) -> None:
    expected = expectation(
        [
            {
                "name": "s.diff",
                "value": 2.098e-05,
                "type": "float",
                "unit": "none",
                "key": "diff",
                "json": "results/s.json",
                "scales": {"kind": "free"},
            },
            {
                "name": "s.prefill",
                "value": 0.0412,
                "type": "float",
                "unit": "s",
                "key": "prefill",
                "json": "results/s.json",
                "scales": {"kind": "free"},
            },
            {
                "name": "s.tick",
                "value": 3.1e-6,
                "type": "float",
                "unit": "s",
                "key": "tick",
                "json": "results/s.json",
                "scales": {"kind": "free"},
            },
        ]
    )
    # a timed value written with its spread: compare.py reads its median
    spread = {"median": 0.0398, "min": 0.039, "q1": 0.0395, "q3": 0.04, "max": 0.041, "n": 5}
    results = {"s.json": {"device": "cuda", "diff": 1.5e-05, "prefill": spread, "tick": 2.9e-6}}
    done = run_compare(tmp_path, expected, results)
    out = done.stdout
    assert "e-0" not in out and "e+0" not in out, out
    assert row(out, "diff").split()[1:4] == ["none", "0.00002098", "0.000015"]
    assert row(out, "prefill").split()[1:4] == ["ms", "41.2", "39.8"]
    assert row(out, "tick").split()[1:4] == ["µs", "3.1", "2.9"]
    assert plain(123_456.7) == "123,457" and plain(4231.2) == "4231" and plain(0) == "0"
    assert cell(0.9, "int") == "0.9" and cell(5_830_065_766, "int") == "5,830,065,766"


def test_a_lab_without_gpu_steps_says_nothing_of_gpus(tmp_path: Path) -> None:
    expected = expectation(
        [
            {"name": "s.vocab", "value": 8192, "unit": "tok", "key": "vocab", **SIZE},
            {
                "name": "s.rate",
                "value": 2.5e5,
                "type": "float",
                "unit": "tok/s",
                "json": "results/s.json",
                "key": "rate",
                "scales": {"kind": "free"},
                "undeclared": True,
            },
        ],
        needs=None,
    )
    expected["gpu"] = None
    done = run_compare(tmp_path, expected, {"s.json": {"vocab": 8192, "rate": 1.9e5}})
    out = done.stdout
    assert done.returncode == 0, out
    for word in ("GPU", "nvidia-smi", "datasheet", "card"):
        assert word not in out, (word, out)
    assert row(out, "rate").endswith("not judged [1]")
    assert "[1] Not judged: the lab does not say how this value moves from one machine" in out
    assert "Sizes and counts match the page's to the byte (1 value)." in out
