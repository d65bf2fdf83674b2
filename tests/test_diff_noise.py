"""`course diff` separates change from noise: timed values moved beyond both runs' spread, within
it, or judged by a tolerance when no spread was recorded; sizes and counts always listed; the lab
inputs and host facts that differ; units a person reads; a claims table that reads at 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support import COURSE, REPO, make_timed_project, timed, write_timed_run

from course.diff import compare, pick_runs, render_markdown, summary, to_json
from course.pages.evaluate import rules_of
from course.record.models import Gpu, HostFacts, Value
from course.record.noise import Verdict, classify
from course.record.store import Store

OLD, NEW = "2026-12-01T090000Z-cpu", "2026-12-02T090000Z-cpu"


def plain(value: float, unit: str = "ms", type_: str = "float") -> Value:
    return Value(value=value, type=type_, unit=unit)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of the timed fixture lesson on two hosts, its script changed in between: one
    timing moved beyond its spread, one within it, one beyond its quartiles but within the lab's
    noise between hosts, a count changed, a count that varies by chance, an exact ratio off in
    its last digit, two values without spread."""
    root = make_timed_project(tmp_path_factory.mktemp("noise") / "project")
    lab = root / "lab" / "timed-sum" / "lab.yml"
    text = lab.read_text().replace("steps:\n", "noise: {between_hosts: 5}\nsteps:\n", 1)
    more = (
        "      medium_ms: {json: results.json, key: medium.ms, unit: ms, scales: free}\n"
        "      flips: {json: results.json, key: flips, type: int, scales: free}\n"
        "      ratio: {json: results.json, key: ratio, unit: none, scales: exact}\n"
    )
    lab.write_text(text.replace("    files: [results.json]", more + "    files: [results.json]"))
    host = HostFacts(gpu=Gpu(name="NVIDIA H200", power_limit_w=700.0, sm_clock_max_mhz=1980))
    write_timed_run(
        root,
        OLD,
        {
            "small_ms": timed(0.19, 0.17, 0.18, 0.20, 0.24),
            "large_ms": timed(2.0, 1.9, 1.95, 2.05, 2.4),
            "items": plain(200000, "none", "int"),
            "large_best_ms": plain(1.9),
            "overhead": plain(0.0002794, "s"),
            "medium_ms": timed(1.0, 0.99, 0.995, 1.005, 1.01),
            "flips": plain(17, "none", "int"),
            "ratio": plain(1.3192111076399322, "none"),
        },
        "a" * 64,
        host,
    )
    write_timed_run(
        root,
        NEW,
        {
            "small_ms": timed(0.195, 0.17, 0.185, 0.205, 0.25),  # quartiles overlap: noise
            "large_ms": timed(2.6, 2.5, 2.55, 2.7, 3.0),  # 2.05 < 2.55: moved
            "items": plain(200001, "none", "int"),  # a count: always listed
            "large_best_ms": plain(1.91),  # no spread, +0.5 %: within the tolerance
            "overhead": plain(0.0003512, "s"),  # no spread, +25.7 %: moved
            "medium_ms": timed(1.04, 1.03, 1.035, 1.045, 1.05),  # apart, +4 %: within 5 % hosts
            "flips": plain(12, "none", "int"),  # declared free: varies from run to run
            "ratio": plain(1.3192111076399324, "none"),  # exact, off in the 16th digit
        },
        "b" * 64,
        host.model_copy(update={"gpu": host.gpu.model_copy(update={"power_limit_w": 500.0})}),  # type: ignore[union-attr]
    )
    return root


def rows(table: str) -> list[list[str]]:
    """A rich table's body rows as their cells, padding stripped."""
    body = [line for line in table.splitlines() if line.startswith("│")]
    return [[c.strip() for c in line.split("│")[1:-1]] for line in body]


def diff(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COURSE, "--root", str(root), "diff", "timed-sum", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )


def test_diff_lists_moved_values_apart_from_noise_at_80_columns(two_runs: Path) -> None:
    done = diff(two_runs)
    assert done.returncode == 1, done.stderr  # the count changed: a claim on it fails
    out = done.stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    moved = rows(out[out.index("Moved beyond their spread") : out.index("Sizes and counts")])
    assert moved == [
        ["time.large_ms", "2 ms", "2.600 ms", "+30.0 %", "1.950–2.050 →"],
        ["", "", "", "", "2.550–2.700 ms"],
        ["time.overhead", "0.2794 ms", "0.3512 ms", "+25.7 %", "none recorded"],
    ]
    assert "0.0002794" not in out  # seconds below one read in ms
    counts = rows(out[out.index("Sizes and counts") : out.index("Not judged")])
    assert counts == [["time.items", "200,000", "200,001", "+0.0 %"]]
    chance = rows(out[out.index("Not judged") : out.index("Within noise")])
    assert chance == [
        ["time.flips", "17", "12", "-29.4 %"],
        ["time.large_best_ms", "1.900 ms", "1.910 ms", "+0.5 %"],
    ]
    noise = rows(out[out.index("Within noise") : out.index("values moved beyond")])
    assert noise == [
        ["time.medium_ms", "1 ms", "1.040 ms", "+4.0 %", "0.9950–1.005 →"],
        ["", "", "", "", "1.035–1.045 ms"],
        ["", "", "", "", "(hosts ±5 %)"],
        ["time.small_ms", "0.1900 ms", "0.1950 ms", "+2.6 %", "0.1800–0.2000 →"],
        ["", "", "", "", "0.1850–0.2050 ms"],
    ]
    tail = out[out.index("values moved beyond") - 2 :]
    summary = " ".join(tail[: tail.index("Claims")].split())
    assert summary == (
        "2 values moved beyond their spread, 2 within noise, 1 sizes or counts changed, 1 "
        "unchanged, 2 not judged (scales: free); of those within noise, 1 moved beyond their "
        "quartiles by no more than the lab's 5 % between hosts (1 with no spread recorded, "
        "judged by a 5 % tolerance)"
    )
    assert "│ time │ changed: sum_times.py" in out  # the lab input that changed
    host = out[: out.index("Lab inputs")]
    assert "│ gpu.power_limit_w │ 700.0 │ 500.0 │" in host  # a host fact that explains speed
    assert host.count("│ gpu.") == 1  # only what differs
    claims = out[out.index("Claims") :]
    assert "│ FAILS       │ docs/part-1/timed-sum.md:9" in claims
    assert "│ held before │ The large list holds 200,000 numbers." in claims
    assert "1 of 2 claims hold on" in out


def test_diff_json_carries_the_classification(two_runs: Path) -> None:
    data = json.loads(diff(two_runs, "--json").stdout)
    classes = {v["name"]: (v["class"], v["no_spread"]) for v in data["values"]}
    assert classes == {
        "time.large_ms": ("moved", False),
        "time.overhead": ("moved", True),
        "time.items": ("changed", False),
        "time.small_ms": ("noise", False),
        "time.medium_ms": ("noise", False),
        "time.large_best_ms": ("chance", False),
        "time.flips": ("chance", False),
        "time.ratio": ("unchanged", False),
    }
    assert next(v for v in data["values"] if v["name"] == "time.medium_ms")["between_hosts"]
    assert data["between_hosts"] == 0.05
    assert data["counts"] == {
        "moved": 2, "noise": 2, "changed": 1, "chance": 2, "added": 0, "removed": 0,
        "unchanged": 1,
    }  # fmt: skip
    assert data["inputs"] == [{"step": "time", "changes": "changed: sum_times.py"}]
    assert data["tolerance"] == 0.05
    large = next(v for v in data["values"] if v["name"] == "time.large_ms")
    assert large["new"]["spread"] == {"n": 15, "min": 2.5, "q1": 2.55, "q3": 2.7, "max": 3.0}
    # a wider tolerance turns the overhead into noise; the timed values keep their quartiles
    wide = json.loads(diff(two_runs, "--json", "--tolerance", "30").stdout)
    assert {v["name"]: v["class"] for v in wide["values"]}["time.overhead"] == "noise"
    assert wide["counts"]["moved"] == 1


@pytest.mark.parametrize(
    ("old", "new", "exact", "expected"),
    [
        (timed(2.0, 1.9, 1.95, 2.05, 2.4), timed(2.1, 1.9, 2.04, 2.2, 2.5), False, "noise"),
        (timed(2.0, 1.9, 1.95, 2.05, 2.4), timed(2.1, 1.9, 2.06, 2.2, 2.5), False, "moved"),
        (timed(2.0, 2.0, 2.0, 2.0, 2.0, 1), timed(2.001, 2.001, 2.001, 2.001, 2.001, 1), False,
         "moved"),  # one repeat each: no width to hide in
        (plain(2.0), timed(2.09, 1.9, 2.0, 2.2, 2.5), False, "noise"),  # no spread in one run
        (plain(2.0), plain(2.11), False, "moved"),
        (plain(2.0), plain(2.01), True, "changed"),  # lab.yml declares it exact
        (plain(1024.0, "MiB"), plain(1025.0, "MiB"), False, "changed"),  # a size
        (plain(7, "none", "int"), plain(7, "none", "int"), False, "unchanged"),
        (None, plain(1.0), False, "added"),
    ],
)  # fmt: skip
def test_classify(old: Value | None, new: Value | None, exact: bool, expected: str) -> None:
    assert classify(old, new, exact).kind == expected


def test_classify_noise_between_hosts_free_values_and_rounding() -> None:
    old, new = timed(1.0, 0.99, 0.995, 1.005, 1.01), timed(1.04, 1.03, 1.035, 1.045, 1.05)
    assert classify(old, new).kind == "moved"  # quartiles apart, no floor declared
    hosts = classify(old, new, between_hosts=0.05)
    assert (hosts.kind, hosts.between_hosts) == ("noise", True)
    assert classify(old, new, between_hosts=0.03).kind == "moved"  # +4 % is beyond 3 %
    # a host-bound wait that doubles between hosts is 100 % apart whichever host ran first
    short, long = timed(25.0, 24.0, 24.5, 25.5, 26.0), timed(50.0, 49.0, 49.5, 50.5, 51.0)
    for pair in ((short, long), (long, short)):
        assert classify(*pair, between_hosts=1.0).kind == "noise"
        assert classify(*pair, between_hosts=0.9).kind == "moved"
    # without a spread the tolerance judges, by the same measure in either order: 2.0 and 2.105
    # are 5.25 % apart, beyond 5 %, though 2.105 -> 2.0 is a fall of only 4.99 %
    for pair in ((plain(2.0), plain(2.105)), (plain(2.105), plain(2.0))):
        assert classify(*pair, tolerance=0.05).kind == "moved"
        assert classify(*pair, tolerance=0.053).kind == "noise"
    assert classify(old, new, declared_free=True).kind == "moved"  # timed: its spread judges it
    count = plain(17, "none", "int"), plain(12, "none", "int")
    assert classify(*count).kind == "changed"
    assert classify(*count, declared_free=True).kind == "chance"
    assert classify(*count, declared_exact=True, declared_free=True).kind == "changed"
    assert classify(plain(1.0, "none"), plain(1.0 + 1e-15, "none"), True).kind == "unchanged"
    assert classify(plain(1.0, "none"), plain(1.0 + 1e-9, "none"), True).kind == "changed"


def test_classify_converts_units_and_keeps_the_quartiles() -> None:
    old = timed(2.0, 1.9, 1.95, 2.05, 2.4)
    new = Value(value=0.0021, type="float", unit="s", spread=old.spread.model_copy(  # type: ignore[union-attr]
        update={"min": 0.002, "q1": 0.00206, "q3": 0.0022, "max": 0.0025}))  # fmt: skip
    assert classify(old, new) == Verdict("moved", ((1.95, 2.05), (2.06, 2.2)))


BUILT_BEFORE, BUILT_NOW = "2026-11-30T070635Z-h200", "2026-12-02T164054Z-h200"
"""Two committed kv-cache runs whose llama.cpp build differs in all four of its values: release,
commit, duration and date."""


@pytest.fixture(scope="module")
def per_value(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of the timed fixture lesson, its lab building llama.cpp and declaring noise by
    pattern, each run with a real build step of kv-cache's records: three timings moved with
    their quartiles apart, by +30 %, +30 % and +8 %."""
    root = make_timed_project(tmp_path_factory.mktemp("per-value") / "project")
    lab = root / "lab" / "timed-sum" / "lab.yml"
    top = (
        "builds:\n"
        "  llama.cpp: {package: llama-cpp-python, version: '0.3.36', command: bash build.sh}\n"
        "noise:\n"
        "  between_hosts: 5\n"
        "  values: {'time.medium_*': 35, 'time.[ml]*': 1, 'time.small_*': 10}\n"
        "steps:\n"
    )
    medium = "      medium_ms: {json: results.json, key: medium.ms, unit: ms}\n"
    text = lab.read_text().replace("steps:\n", top, 1)
    lab.write_text(text.replace("    files: [results.json]", medium + "    files: [results.json]"))
    store = Store(REPO / "build")
    builds = [store.get("kv-cache", r).record.step("build-llama-cpp") for r in (BUILT_BEFORE,
              BUILT_NOW)]  # fmt: skip
    write_timed_run(root, OLD, {
        "small_ms": timed(0.2, 0.19, 0.195, 0.205, 0.21),
        "large_ms": timed(2.0, 1.9, 1.95, 2.05, 2.4),
        "medium_ms": timed(1.0, 0.98, 0.99, 1.01, 1.02),
    }, before=[builds[0]])  # fmt: skip
    write_timed_run(root, NEW, {
        "small_ms": timed(0.216, 0.21, 0.213, 0.219, 0.22),  # apart, +8 %: time.small_* 10 %
        "large_ms": timed(2.6, 2.5, 2.55, 2.7, 3.0),  # apart, +30 %: no pattern, 5 %: moved
        "medium_ms": timed(1.3, 1.28, 1.29, 1.31, 1.32),  # apart, +30 %: time.medium_* 35 %
    }, before=[builds[1]])  # fmt: skip
    return root


def test_a_builds_date_and_duration_are_not_judged_its_release_and_commit_are(
    per_value: Path,
) -> None:
    old, new = pick_runs(Store(per_value / "build"), "timed-sum", OLD, NEW)
    report = compare(old, new, rules=rules_of(per_value, "timed-sum"))
    kinds = {c.name: c.verdict.kind for c in report.values if c.name.startswith("build-")}
    assert kinds == {
        "build-llama-cpp.build_seconds": "chance",  # 121 s -> 294 s: the host's, not a result
        "build-llama-cpp.made": "chance",
        "build-llama-cpp.commit": "changed",  # another commit is a change
        "build-llama-cpp.version": "changed",
    }
    markdown = render_markdown(report)
    assert (
        "| `build-llama-cpp.made` | 2026-11-30T07:08:36Z | 2026-12-02T16:38:49Z |  | a build's "
        "date and time: the host's |"
    ) in markdown
    assert "| +142.1 % | a build's duration: the host's |" in markdown
    assert "2 not judged (scales: free; 2 a build's date or duration)" in summary(report)
    # without the lab, nothing says what the build's values are: the duration moved
    bare = {c.name: c.verdict.kind for c in compare(old, new).values}
    assert bare["build-llama-cpp.build_seconds"] == "moved"
    assert bare["build-llama-cpp.made"] == "changed"


def test_noise_by_pattern_the_first_that_matches_decides(per_value: Path) -> None:
    old, new = pick_runs(Store(per_value / "build"), "timed-sum", OLD, NEW)
    rules = rules_of(per_value, "timed-sum")
    assert rules.values == (("time.medium_*", 0.35), ("time.[ml]*", 0.01), ("time.small_*", 0.1))
    report = compare(old, new, rules=rules)
    found = {c.name: (c.verdict.kind, c.verdict.between_hosts) for c in report.values}
    assert found["time.medium_ms"] == ("noise", True)  # 35 %, not the later 'time.[ml]*' 1 %
    assert found["time.large_ms"] == ("moved", False)  # +30 %: beyond 'time.[ml]*' 1 %
    assert found["time.small_ms"] == ("noise", True)  # +8 %: beyond 5 %, within its 10 %
    markdown = render_markdown(report)
    assert (
        "| `time.medium_ms` | 1 ms | 1.300 ms | +30.0 % | quartiles 0.9900–1.010 → 1.290–1.310 ms"
        " apart, within the lab's ±35 % between hosts for time.medium_* |"
    ) in markdown
    assert "within the lab's ±10 % between hosts for time.small_* |" in markdown
    assert summary(report).endswith(
        "of those within noise, 2 moved beyond their quartiles by no more than the lab's noise "
        "between hosts (2 as its noise.values declares)"
    )
    data = json.loads(to_json(report))
    assert data["noise_values"] == {"time.medium_*": 0.35, "time.[ml]*": 0.01, "time.small_*": 0.1}
    patterns = {v["name"]: v["noise_pattern"] for v in data["values"]}
    assert patterns["time.medium_ms"] == "time.medium_*"
    assert patterns["time.large_ms"] == "time.[ml]*"
    # the same rules in the other order: 'time.m*' comes first and its 1 % decides
    turned = replace(rules, values=(("time.m*", 0.01), ("time.medium_*", 0.35)))
    assert turned.host_noise("time.medium_ms") == (0.01, "time.m*")
    again = {c.name: c.verdict.kind for c in compare(old, new, rules=turned).values}
    assert again["time.medium_ms"] == "moved"
    assert again["time.small_ms"] == "moved"  # no pattern now: between_hosts' 5 %
