"""A run checked against the page's across machines: `course compare` on records, and the zip's
compare.py as a learner runs it, in a lab folder holding the results JSON files, with an
`nvidia-smi` that names the card (the one thing this machine cannot have).

The runs: lesson 2.4's committed H200 record against itself; a copy with one size edited; and a
synthetic RTX 4090 run, made here from the H200 record by the physics of each step (decode
speeds by memory bandwidth, the cache budget by the card's memory), not by compare's own rules.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import COURSE, REPO

from course.lab.load import LoadedLab, load_lab
from course.package import compare_lab
from course.package.bundle import bundle_entries
from course.package.cards import rental_cards
from course.package.expected import (
    compare_files,
    compare_runs,
    expected_for,
    expected_json,
    observed,
)
from course.record.models import Run
from course.record.store import Store

CARDS = rental_cards(REPO)

LESSON = "kv-cache"
BANDWIDTH = 1008 / 4800  # RTX 4090 over H200, from their datasheets
H200_MIB, RTX_MIB = 143_771, 24_564  # as nvidia-smi reports them
PER_TOKEN, CONTEXT = 147_456, 40_960  # Qwen3-8B's cache bytes per token, and its context


@pytest.fixture(scope="module")
def lab() -> LoadedLab:
    return load_lab(REPO / "lab" / LESSON / "lab.yml")


@pytest.fixture(scope="module")
def h200() -> Run:
    """A committed H200 run of lesson 2.4 with its torch steps only: the ones the synthetic 4090
    below models (the page's newest run adds llama.cpp's steps)."""
    return Store(REPO / "build").get(LESSON, "2026-11-30T055215Z-h200")


@pytest.fixture(scope="module")
def expected(lab: LoadedLab, h200: Run) -> dict[str, Any]:
    found = expected_for(lab, h200)
    assert found is not None
    return found


def rtx_4090(values: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The H200's values as a 4090 would give them: decode speeds and the copy bandwidth by the
    bandwidth ratio; the cache budget redone for 24,564 MiB (the same weights, working space and
    memory outside PyTorch, 90 % of the card); every other value as it was."""
    out = {step: dict(found) for step, found in values.items()}
    decode = out["decode-speed"]
    for name in decode:
        if name.startswith(("tok_s_", "bound_", "copy_bandwidth")):
            decode[name] *= BANDWIDTH
    budget = out["cache-budget"]
    more = (RTX_MIB - H200_MIB) * 2**20  # negative: the 4090 has less
    budget["gpu_memory"] = RTX_MIB * 2**20 - (H200_MIB * 2**20 - budget["gpu_memory"])
    budget["room"] += int(0.9 * more)
    budget["tokens"] = budget["room"] // PER_TOKEN
    budget["conversations"] = budget["tokens"] // CONTEXT
    cache = budget["tokens"] * PER_TOKEN
    grown = cache - budget["reserved"]
    budget["reserved"] = cache
    for name in ("allocated", "planned", "peak_gpu_memory", "peak_gpu_memory_reserved"):
        budget[name] += grown
    budget["peak_gpu_memory_paper"] += int(0.9 * more)
    return out


def recorded_values(run: Run) -> dict[str, dict[str, Any]]:
    return {s.id: {n: v.value for n, v in s.values.items()} for s in run.record.steps}


def write_run(
    root: Path, source: Run, run_id: str, values: dict[str, dict[str, Any]], gpu: dict[str, Any]
) -> None:
    """A copy of `source` under root/build as `run_id`, with other values and another GPU."""
    folder = root / "build" / LESSON / run_id
    shutil.copytree(source.folder, folder)
    record = json.loads((folder / "run.json").read_text())
    record["run_id"], record["host"]["gpu"] = run_id, gpu
    for step in record["steps"]:
        for name, value in step["values"].items():
            value["value"] = values[step["id"]][name]
    (folder / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True))


def project_with(tmp_path: Path, h200: Run) -> Path:
    """A project folder with lesson 2.4's lab and its page's run."""
    root = tmp_path / "project"
    shutil.copytree(
        REPO / "lab" / LESSON,
        root / "lab" / LESSON,
        ignore=shutil.ignore_patterns("results", "__pycache__"),
    )
    shutil.copytree(h200.folder, root / "build" / LESSON / h200.run_id)
    # the course's facts: the table of cards a comparison scales by
    common = root / "lab" / "common"
    shutil.copytree(REPO / "lab" / "common", common, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def course_compare(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COURSE, "--root", str(root), "compare", LESSON, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_page_run_against_itself_agrees_everywhere(h200: Run) -> None:
    done = course_compare(REPO, h200.run_id, "--against", h200.run_id)
    assert done.returncode == 0, done.stderr
    text, status = compare_runs(REPO, LESSON, h200.run_id, h200.run_id)
    assert status == 0 and text == done.stdout
    assert f"page:  run {h200.run_id} on NVIDIA H200 (143,771 MiB)" in text
    verdicts = [line.split()[-1] for line in text.splitlines() if line.startswith("weights_")]
    assert len(verdicts) >= 4 and set(verdicts) == {"agrees"}
    assert "Sizes and counts match the page's to the byte (41 values)." in text
    assert "Scaled to your card (48 values): 48 agree." in text
    assert "Left out" not in text  # every value of the run declares how it moves


def test_an_edited_size_differs_and_fails(tmp_path: Path, h200: Run) -> None:
    root = project_with(tmp_path, h200)
    values = recorded_values(h200)
    values["size"]["bytes_per_token_8b"] += 1
    edited = "2026-12-01T000000Z-h200"
    write_run(root, h200, edited, values, h200.record.host.gpu.model_dump())  # type: ignore[union-attr]
    done = course_compare(root, edited, "--against", h200.run_id)
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("bytes_per_token_8b "))
    assert "147,456" in line and "147,457" in line and "differs by +0% [1]" in line
    assert "1 of 41 values that must match to the byte DIFFER: size.bytes_per_token_8b." in (
        done.stdout
    )
    assert "[1] Sizes and counts follow from the models' config.json" in done.stdout


def test_a_synthetic_4090_run_agrees_once_scaled(tmp_path: Path, h200: Run) -> None:
    root = project_with(tmp_path, h200)
    run_id = "2026-12-01T000000Z-rtx4090"
    gpu = {"name": "NVIDIA GeForce RTX 4090", "memory_mib": RTX_MIB, "count": 1}
    write_run(root, h200, run_id, rtx_4090(recorded_values(h200)), gpu)
    text, status = compare_runs(root, LESSON, run_id, h200.run_id)
    print("\n" + text)  # the table of the closing note: `pytest -s` shows it
    assert status == 0
    assert "yours: run 2026-12-01T000000Z-rtx4090 on NVIDIA GeForce RTX 4090 (24,564 MiB)" in text
    assert "Scaled to your card (48 values): 48 agree." in text
    rows = {line.split()[0]: line for line in text.split("cache-budget")[1].splitlines()[1:20]}
    assert rows["tokens"].split()[-1] == "agrees" and "798,449" in rows["tokens"]
    # a 4090 that decodes 40 % slower than its bandwidth says: off, look at the bandwidth
    slow = rtx_4090(recorded_values(h200))
    slow["decode-speed"]["tok_s_8b_d0"] *= 0.6
    write_run(root, h200, "2026-12-02T000000Z-rtx4090", slow, gpu)
    text, status = compare_runs(root, LESSON, "2026-12-02T000000Z-rtx4090", h200.run_id)
    line = next(x for x in text.splitlines() if x.startswith("tok_s_8b_d0 "))
    assert status == 0 and "off by -40% [" in line
    assert "Decode reads every weight and the cache once per token" in text
    assert "Scaled to your card (48 values): 47 agree, 1 off." in text


def test_a_lab_without_declarations_has_nothing_to_compare_by(tmp_path: Path, h200: Run) -> None:
    root = project_with(tmp_path, h200)
    path = root / "lab" / LESSON / "lab.yml"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(
        "".join(
            line.split(", scales:")[0] + "}\n" if ", scales:" in line else line for line in lines
        )
    )
    done = course_compare(root, h200.run_id)
    assert done.returncode == 1
    assert "declares no `scales:` for any value, so there is nothing to judge" in done.stderr


# --- the learner's side: compare.py in the unzipped lab -----------------------------------------


def set_at(data: Any, key: str, value: Any) -> None:
    *path, last = key.split(".")
    for part in path:
        data = data[part]
    data[last] = value


def learner_lab(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any], values: dict[str, Any]
) -> Path:
    """The zip's layout: expected.json at the top, lab/compare.py, and lab/results/*.json as the
    recorded run kept them, with `values` written where each capture reads."""
    top = tmp_path / "lesson"
    (top / "lab").mkdir(parents=True)
    (top / "expected.json").write_bytes(expected_json(expected))
    for name, data in compare_files().items():
        (top / name).write_bytes(data)
    for step in h200.record.steps:
        for kept in step.files:
            target = top / "lab" / kept.path
            target.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(h200.kept_file(step.id, kept.path).read_text())
            for name, capture in lab.lab.step(step.id).capture.items():
                if capture.json_file == kept.path and capture.key and name in values[step.id]:
                    set_at(data, capture.key, values[step.id][name])
            target.write_text(json.dumps(data))
    return top / "lab"


def compare_py(
    folder: Path, tmp_path: Path, smi: str | None, *args: str
) -> subprocess.CompletedProcess[str]:
    """`python3 compare.py` in a lab folder; `smi` is what nvidia-smi prints (None: no GPU)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if smi is not None:
        fake = bin_dir / "nvidia-smi"
        fake.write_text(f"#!/bin/sh\necho '{smi}'\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-I", "compare.py", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
    )


def test_compare_py_on_the_h200_results_agrees(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any]
) -> None:
    folder = learner_lab(tmp_path, lab, h200, expected, recorded_values(h200))
    done = compare_py(folder, tmp_path, "NVIDIA H200, 143771")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "yours: results in" in done.stdout and "on NVIDIA H200 (143,771 MiB)" in done.stdout
    line = next(x for x in done.stdout.splitlines() if x.startswith("bytes_per_token_06b "))
    assert line.split()[-1] == "agrees"  # read from results/size.json, as the page's was
    assert "Sizes and counts match the page's to the byte (41 values)." in done.stdout
    assert "Scaled to your card (48 values): 48 agree." in done.stdout


def test_compare_py_on_an_edited_size_exits_1(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any]
) -> None:
    values = recorded_values(h200)
    values["size"]["cache_4096_8b"] = 603_979_776 * 2  # fp32 instead of bf16
    folder = learner_lab(tmp_path, lab, h200, expected, values)
    done = compare_py(folder, tmp_path, "NVIDIA H200, 143771")
    assert done.returncode == 1
    assert "DIFFER: size.cache_4096_8b." in done.stdout
    assert "differs by +100% [" in done.stdout


def test_compare_py_on_a_synthetic_4090(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any]
) -> None:
    folder = learner_lab(tmp_path, lab, h200, expected, rtx_4090(recorded_values(h200)))
    done = compare_py(folder, tmp_path, "NVIDIA GeForce RTX 4090, 24564")
    assert done.returncode == 0, done.stdout
    assert "Scaled to your card (48 values): 48 agree." in done.stdout
    assert "RTX 4090: 1,008 GB/s, 165.2 TFLOP/s bf16 dense, 24 GB" in done.stdout
    # the same results without a GPU here: speeds without an expectation, sizes still checked
    alone = compare_py(folder, tmp_path / "none", None)
    assert alone.returncode == 0
    assert "no GPU found here: name the card your results came from (--gpu NAME)" in alone.stdout
    assert "Sizes and counts match the page's to the byte (41 values)." in alone.stdout


def test_compare_py_writes_json_for_the_pages_calculator(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any]
) -> None:
    folder = learner_lab(tmp_path, lab, h200, expected, rtx_4090(recorded_values(h200)))
    done = compare_py(folder, tmp_path, "NVIDIA GeForce RTX 4090, 24564", "--json", "mine.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote mine.json: give it to the calculator on the lesson's page" in done.stdout

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON a browser reads")

    got = json.loads((folder / "mine.json").read_text(), parse_constant=refuse)
    assert (got["kind"], got["format"], got["lesson"]) == ("course-compare", 1, "kv-cache")
    assert got["page_run"] == h200.run_id and got["page_gpu"]["name"] == "NVIDIA H200"
    card = {"name": "NVIDIA GeForce RTX 4090", "memory_mib": 24564, "card": "RTX 4090"}
    assert got["gpu"] == card
    rows = {r["name"]: r for r in got["values"]}
    assert len(rows) == len(expected["values"])
    speed = rows["decode-speed.tok_s_8b_d0"]  # a decode speed moves with the bandwidth
    assert speed["kind"] == "bandwidth" and speed["verdict"] == "agrees"
    assert speed["expected"] == pytest.approx(speed["page"] * 1008 / 4800)
    size = rows["gpu-check.allocated_4096_8b"]
    assert (size["kind"], size["verdict"], size["theirs"]) == ("exact", "agrees", size["page"])
    assert size["unit"] == "B"


def test_compare_py_reports_a_missing_expectation_file(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    for name, data in compare_files().items():
        (tmp_path / name).write_bytes(data)
    done = compare_py(tmp_path / "lab", tmp_path, None)
    assert done.returncode == 2 and "cannot use" in done.stdout and "expected.json" in done.stdout


# --- the pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "card"),
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", None),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("RTX 4090", "RTX 4090"),  # --gpu takes the table's own names
    ],
)
def test_cards_are_found_by_the_name_nvidia_smi_prints(printed: str, card: str | None) -> None:
    found = compare_lab.find_card(printed, CARDS)
    assert (found["name"] if found else None) == card


def test_every_card_names_its_source() -> None:
    for card in CARDS:
        assert "NVIDIA" in card["source"] and "." in card["source"], card["name"]
        assert card["bandwidth_gb_s"] > 0 and card["bf16_tflops"] > 0 and card["memory_gb"] > 0


def toy(values: list[dict[str, Any]], needs: str | None = "gpu") -> dict[str, Any]:
    """A small expectation: one step on an H200."""
    return {
        "format": 1,
        "title": "Toy",
        "run": "2026-01-01T000000Z-h200",
        "gpu": {"name": "NVIDIA H200", "memory_mib": H200_MIB},
        "engine": {},
        "cards": CARDS,
        "cpu_args": "--device cpu --tiny",
        "steps": [{"id": "s", "needs": needs}],
        "values": [{"step": "s", "type": "float", "unit": "none", **v} for v in values],
    }


def judged(expected: dict[str, Any], mine: dict[str, Any], gpu: str | None) -> dict[str, Any]:
    card = compare_lab.Gpu(gpu, None, compare_lab.find_card(gpu, CARDS)) if gpu else None
    seen = {f"s.{k}": compare_lab.Observed(v, device="cuda") for k, v in mine.items()}
    rows = compare_lab.compare(expected, compare_lab.Theirs("test", card, {}, seen))
    return {r.name: (r.verdict, None if r.expected is None else round(r.expected, 3)) for r in rows}


def test_times_move_against_their_resource_and_tolerances_hold() -> None:
    expected = toy(
        [
            {"name": "s.prefill", "value": 1.0, "unit": "s", "scales": {"kind": "compute"}},
            {"name": "s.rate", "value": 100.0, "unit": "tok/s", "scales": {"kind": "compute"}},
            {"name": "s.near", "value": 100.0, "scales": {"kind": "bandwidth"}},
            {"name": "s.far", "value": 100.0, "scales": {"kind": "bandwidth"}},
            {"name": "s.mem", "value": 1000.0, "unit": "MiB", "scales": {"kind": "memory"}},
        ]
    )
    ratio = 312 / 989.5  # an A100's bf16 over an H200's
    out = judged(
        expected,
        {"prefill": 1 / ratio, "rate": 100 * ratio * 1.3, "near": 32.4, "far": 90.0, "mem": 570},
        "NVIDIA A100-SXM4-80GB",
    )
    assert out["s.prefill"] == ("agrees", round(1 / ratio, 3))  # slower card, longer prefill
    assert out["s.rate"] == ("off", round(100 * ratio, 3))  # 30 % over: off, not agrees
    assert out["s.near"] == ("agrees", round(100 * 2039 / 4800, 3))
    assert out["s.far"][0] == "differs"  # more than twice the expectation
    assert out["s.mem"] == ("agrees", round(1000 * 80 * 1024 / H200_MIB, 3))  # the datasheet's GiB


def test_memory_share_and_like_follow_the_card() -> None:
    expected = toy(
        [
            {
                "name": "s.tokens",
                "value": 1000,
                "type": "int",
                "scales": {"kind": "memory", "like": "s.room"},
            },
            {
                "name": "s.room",
                "value": 100 * 2**30,
                "unit": "B",
                "scales": {"kind": "memory", "share": 0.5},
            },
            {
                "name": "s.peak",
                "value": 2**30,
                "unit": "B",
                "scales": {"kind": "memory", "share": 0},
            },
            {"name": "s.label", "value": "bf16", "type": "str", "scales": {"kind": "exact"}},
            {"name": "s.time", "value": 3.0, "scales": {"kind": "free"}},
        ]
    )
    room = 100 * 2**30 + 0.5 * (RTX_MIB - H200_MIB) * 2**20
    mine = {
        "tokens": 1000 * room / (100 * 2**30),
        "room": room,
        "peak": 2**30 * 1.2,
        "label": "bf16",
        "time": 9,
    }
    out = judged(expected, mine, None)
    assert out["s.room"] == ("no expectation", None) and out["s.label"] == ("agrees", None)
    rtx = compare_lab.Gpu("NVIDIA GeForce RTX 4090", RTX_MIB, compare_lab.find_card("4090", CARDS))
    seen = {f"s.{k}": compare_lab.Observed(v, device="cuda") for k, v in mine.items()}
    rows = {
        r.name: r for r in compare_lab.compare(expected, compare_lab.Theirs("t", rtx, {}, seen))
    }
    assert rows["s.room"].verdict == "agrees" and rows["s.room"].expected == pytest.approx(room)
    assert rows["s.tokens"].verdict == "agrees"  # in proportion to the room, computed first
    assert rows["s.peak"].verdict == "off" and rows["s.peak"].note == "memory"
    assert rows["s.time"].verdict == "not judged"
    # the same step run on the CPU: nothing of it is comparable, whatever its values
    cpu = {k: compare_lab.Observed(o.value, device="cpu") for k, o in seen.items()}
    verdicts = {
        r.verdict for r in compare_lab.compare(expected, compare_lab.Theirs("t", rtx, {}, cpu))
    }
    assert verdicts == {"not comparable"}


def test_the_zip_carries_compare_py_and_the_expectation(
    tmp_path: Path, lab: LoadedLab, h200: Run, expected: dict[str, Any]
) -> None:
    pdf = tmp_path / "page.pdf"
    pdf.write_bytes(b"%PDF-1.7\n")
    entries = {e.name: e for e in bundle_entries(lab, h200, pdf, [])}
    assert entries["lab/compare.py"].data == (REPO / "course/package/compare_lab.py").read_bytes()
    assert (
        entries["lab/compare_report.py"].data
        == (REPO / "course/package/compare_report.py").read_bytes()
    )
    shipped = json.loads(entries["expected.json"].data)
    assert shipped == json.loads(json.dumps(expected))
    assert shipped["run"] == h200.run_id and shipped["gpu"]["name"] == "NVIDIA H200"
    assert {v["scales"]["kind"] for v in shipped["values"]} == {
        "exact",
        "bandwidth",
        "memory",
        "free",
    }
    room = next(v for v in shipped["values"] if v["name"] == "cache-budget.tokens")
    assert room["scales"] == {"kind": "memory", "like": "cache-budget.room"}
    assert room["json"] == "results/budget.json" and room["key"] == "gpu.tokens"
    # compare.py never imports the course's package: it runs in a bare lab environment
    for data in compare_files().values():
        assert "import course" not in data.decode() and "from course" not in data.decode()
    start = entries["START-HERE.md"].data.decode()
    assert "## Compare your numbers with the page's" in start and "python3 compare.py" in start
    # observed() on the page's own run gives back the page's values
    mine = observed(h200, expected)
    assert all(
        o.value == v["value"] for o, v in zip(mine.values.values(), expected["values"], strict=True)
    )
