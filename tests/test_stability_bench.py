"""bench/stability.py on the timed fixture lesson: two real runs here, then the diff's
classification, the claims that fail and the widest spread of each step."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support import REPO, make_timed_project, timed, write_timed_run

from course.record.models import Gpu, HostFacts
from course.record.store import Store

BENCH = [sys.executable, str(REPO / "bench" / "stability.py")]


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The timed fixture project after `stability.py --run --markdown`: two fresh runs."""
    root = make_timed_project(tmp_path_factory.mktemp("stability") / "project")
    done = subprocess.run(
        [*BENCH, "--root", str(root), "timed-sum", "--run", "--markdown"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a claim failed on a noisy machine
    return root, done.stdout


def test_two_runs_record_their_timings_with_spread(benched: tuple[Path, str]) -> None:
    root, _ = benched
    runs = Store(root / "build").runs("timed-sum")
    assert len(runs) == 2 and all(r.good for r in runs)
    for run in runs:
        recorded = json.loads((run.folder / "run.json").read_text())["steps"][0]["values"]
        assert recorded["small_ms"]["spread"]["n"] == 15
        assert recorded["large_ms"]["spread"]["n"] == 15
        assert "spread" not in recorded["large_best_ms"]  # a key one level further: the number
        assert recorded["large_best_ms"]["value"] == recorded["large_ms"]["spread"]["min"]
        assert recorded["items"] == {"type": "int", "unit": "none", "value": 200000}


def test_the_markdown_tables_for_a_closing_note(benched: tuple[Path, str]) -> None:
    root, out = benched
    old, new = (r.run_id for r in Store(root / "build").runs("timed-sum"))
    lines = out.splitlines()
    assert lines[:2] == [
        "| lesson | runs | moved beyond spread | within noise | sizes, counts changed "
        "| claims failing |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    row = re.fullmatch(
        rf"\| timed-sum \| {old} → {new} \| (\d+) \| (\d+) \| 0 \| (\d) of 2 \|", lines[2]
    )
    assert row is not None, lines[2]
    assert int(row.group(1)) + int(row.group(2)) <= 3  # the three timings; the count is exact
    assert lines[4:6] == [
        "| lesson | step | widest value | quartiles / median | range / median | repeats |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    assert re.fullmatch(
        r"\| timed-sum \| time \| `(small|large)_ms` \| [\d.,]+ % \| [\d.,]+ % \| 15 \|", lines[6]
    ), lines[6]


def load_bench() -> ModuleType:
    """bench/stability.py as a module, to call in this process (no second interpreter)."""
    spec = importlib.util.spec_from_file_location("stability", REPO / "bench" / "stability.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_text_report_of_two_named_runs(
    benched: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = benched
    old, new = (r.run_id for r in Store(root / "build").runs("timed-sum"))
    bench = load_bench()
    monkeypatch.setattr(
        sys, "argv", ["stability.py", "--root", str(root), "timed-sum", "--runs", old, new]
    )
    with pytest.raises(SystemExit) as status:
        bench.main()
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"timed-sum: {old} → {new}"
    assert re.fullmatch(
        r"  \d values moved beyond their spread, \d within noise, 0 sizes or counts changed, "
        r"\d unchanged(, 1 not judged \(scales: free\))?"
        r"( \(1 with no spread recorded, judged by a 5 % tolerance\))?",
        lines[1],
    ), lines[1]
    assert "  largest spread per step (quartiles, range; relative to the median):" in lines
    assert re.search(r"\n    time: (small|large)_ms [\d.,]+ %, [\d.,]+ % \(n 15\)", out)
    failing = next(line for line in lines if line.startswith("  claims failing: "))
    assert status.value.code == (0 if failing == "  claims failing: 0 of 2" else 1)
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--run"])
    with pytest.raises(SystemExit) as refused:
        bench.main()
    assert refused.value.code == 2
    said = capsys.readouterr().err
    assert "--runs names two runs of one lesson, made before (not with --run)" in said


def test_noise_says_how_far_apart_the_runs_put_each_value_beside_the_declarations(
    tmp_path: Path,
) -> None:
    """Three runs on two GPUs: the small sum 25 %, then 100 % apart (a wait that doubled on one
    host), the large one 4 % apart, every time with quartiles apart; lab.yml gives
    `time.small_*` 50 % and the rest 5 %. A value whose runs overlap in their quartiles needs
    nothing, however far apart its medians."""
    root = make_timed_project(tmp_path / "project")
    lab = root / "lab" / "timed-sum" / "lab.yml"
    noise = "noise:\n  between_hosts: 5\n  values:\n    'time.small_*': 50\n"
    lab.write_text(lab.read_text().replace("steps:\n", noise + "steps:\n", 1))
    points = [("2026-12-01T090000Z-h200", 0.20, 10.0, "GPU-a"),
              ("2026-12-02T090000Z-h200", 0.25, 10.4, "GPU-b"),
              ("2026-12-03T090000Z-h200", 0.40, 10.2, "GPU-b")]  # fmt: skip
    for run_id, small, large, uuid in points:
        values = {
            "small_ms": timed(small, small * 0.9, small * 0.95, small * 1.05, small * 1.1),
            "large_ms": timed(large, large - 0.2, large - 0.1, large + 0.1, large + 0.2),
            # 20 to 40 ms, 100 % apart, but its quartiles always overlap: within noise
            "large_best_ms": timed(small * 100, 1.0, 2.0, 90.0, 100.0),
        }
        write_timed_run(
            root, run_id, values, host=HostFacts(gpu=Gpu(name="NVIDIA H200", uuid=uuid))
        )
    command = [*BENCH, "--root", str(root), "timed-sum", "--noise"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr  # the small sum is further apart than its 50 %
    assert done.stdout.splitlines() == [
        "timed-sum: 3 good runs, 2026-12-01T090000Z-h200 … 2026-12-03T090000Z-h200, on 2 GPUs by "
        "uuid",
        "  noise.values 'time.small_*' 50 %, 1 value: the neediest time.small_ms, 100 % apart "
        "with quartiles apart (2026-12-01T090000Z-h200 and 2026-12-03T090000Z-h200)",
        "  between_hosts 5 %, 2 values: the neediest time.large_ms, 4 % apart with quartiles apart "
        "(2026-12-01T090000Z-h200 and 2026-12-02T090000Z-h200)",
        "  further apart than declared: 1",
        "    time.small_ms 100 % (declared 50 %)",
    ]
    # the first two runs alone: 25 % and 4 %, each within its declaration
    among = ["--among", "2026-12-01T090000Z-h200", "2026-12-02T090000Z-h200", "--markdown"]
    done = subprocess.run([*command, *among], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[2:] == [
        "| timed-sum | 2 | 2 | `time.small_*` | 1 | `time.small_ms` | 25 % | 50 % |",
        "| timed-sum | 2 | 2 | between_hosts | 2 | `time.large_ms` | 4 % | 5 % |",
    ]
    refused = subprocess.run([*BENCH, "--root", str(root), "timed-sum", *among[:3]],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "--among names runs of one lesson, for --noise" in (
        refused.stderr
    )
