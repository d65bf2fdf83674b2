"""The lab of lesson 3.1 (lab/paged-attention): every script run for real, on the CPU with --tiny.

The four scripts run once per module, at the same time (two of them wait on the engine's
thread). The expected numbers are worked out here from the shipped config, the course's facts
and the mix's lengths as paper.py wrote them, not read back from the lab's own arithmetic.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from course.lab.load import load_lab
from course.run.capture import capture_values

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab" / "paged-attention"
KIT = ROOT / "lab" / "common" / "labkit"
SCRIPTS = ("paper", "blocks", "speed", "full")
TINY = 16  # --tiny divides every length by 16 (README)
TINY_BLOCKS = {16: 4, 64: 16, 256: 64}  # and uses blocks of 4, 16, 64 (README)
GIB = 2**30


def to_bytes(fact: dict[str, Any]) -> int:
    scale = {"B": 1, "MiB": 2**20, "GiB": GIB}[fact["unit"]]
    return round(fact["value"] * scale)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the lab with the kit beside its scripts, as a run and the zip lay it out."""
    root = tmp_path_factory.mktemp("lab")
    copy = root / "paged-attention"
    shutil.copytree(LAB, copy, ignore=shutil.ignore_patterns("results", "__pycache__", "labkit"))
    shutil.copytree(KIT, root / "common" / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.fixture(scope="module")
def runs(lab: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    procs = {}
    for name in SCRIPTS:
        args = [] if name == "paper" else ["--device", "cpu", "--tiny"]
        procs[name] = subprocess.Popen(
            [sys.executable, f"{name}.py", *args],
            cwd=lab,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=kit_env(lab),
        )
    done = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
    for name, run in done.items():
        assert run.returncode == 0, f"{name}.py failed:\n{run.stdout[-3000:]}"
    return done


def kit_env(lab: Path) -> dict[str, str]:
    """The scripts import the kit by name (a run copies it beside them; here it is found where
    lab.yml's include names it)."""
    return {**os.environ, "PYTHONPATH": str(lab.parent / "common")}


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


def config() -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    return cfg


def fit(lengths: list[int], capacity: int) -> int:
    used = count = 0
    for n in lengths:
        if used + n > capacity:
            break
        used, count = used + n, count + 1
    return count


def test_paper_counts_follow_from_the_facts_and_the_mix(lab: Path, runs: dict[str, Any]) -> None:
    cfg, facts = config(), tomllib.loads((KIT / "facts.toml").read_text())
    data = results(lab, "paper")
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    assert data["bytes_per_token"] == per_token
    lengths = [p + a - 1 for p, a in data["mix"]["lengths"]]
    assert len(lengths) == data["mix"]["requests"] == 1000
    assert all(200 <= p <= 4000 and 50 <= a <= 1000 for p, a in data["mix"]["lengths"])
    weights = data["cards"]["h200"]["lines"]["weights"]
    share = facts["engines"]["transformers"]["max_memory_percent"]["value"]
    h200_context = to_bytes(facts["cards"]["h200"]["cuda_context"])
    for card in ("rtx-4090", "h200"):
        total = to_bytes(facts["cards"][card]["torch_total"])
        cache = int((total - h200_context - weights) * share)  # the 4090 borrows the H200's context
        tokens = cache // per_token
        got = data["cards"][card]
        assert (got["cache_bytes"], got["cache_tokens"]) == (cache, tokens)
        assert got["fits"]["static_full"] == tokens // cfg["max_position_embeddings"]
        assert got["fits"]["static_tight"] == tokens // data["tight_reservation"]
        assert got["fits"]["exact"] == fit(lengths, tokens)
        for block in (16, 64, 256):
            blocks = [math.ceil(n / block) for n in lengths]
            assert got["fits"][f"b{block}"] == fit(blocks, tokens // block)
        assert got["fits"]["static_full"] < got["fits"]["static_tight"] < got["fits"]["b16"]
    assert data["tight_reservation"] == 2 ** math.ceil(math.log2(max(lengths)))
    for block in (16, 64, 256):
        w = data["waste"][f"b{block}"]
        wasted = sum(math.ceil(n / block) * block - n for n in lengths)
        assert w["wasted_tokens"] == wasted
        assert w["predicted_per_request"] == block / 2
        assert abs(wasted / len(lengths) / (block / 2) - 1) < 0.2  # about half a block each


def test_the_engine_holds_exactly_the_blocks_on_paper(lab: Path, runs: dict[str, Any]) -> None:
    data, paper = results(lab, "blocks"), results(lab, "paper")
    assert data["tiny"] is True and data["device"] == "cpu"
    first = paper["mix"]["lengths"][: data["requests"]]
    tokens = [max(2, p // TINY) + max(2, a // TINY) - 1 for p, a in first]
    assert data["tokens"] == sum(tokens)
    assert data["static_full_fit"] == data["cache_tokens"] // (
        config()["max_position_embeddings"] // TINY
    )
    for full, block in TINY_BLOCKS.items():
        run = data["runs"][f"b{full}"]
        assert run["block"] == run["engine"]["block_size"] == block
        assert run["engine"]["num_blocks"] == data["cache_tokens"] // block
        assert [t for t, _ in run["per_request"]] == tokens
        assert [b for _, b in run["per_request"]] == [math.ceil(t / block) for t in tokens]
        assert run["blocks"] == run["paper_blocks"] == sum(math.ceil(t / block) for t in tokens)
        assert run["wasted_tokens"] == run["blocks"] * block - sum(tokens)
        assert 0 < run["peak_requests"] <= data["requests"]
        assert run["peak_blocks"] <= run["engine"]["num_blocks"]
        assert "Paged cache initialized" in run["planner_line"]
    assert data["runs"]["b256"]["wasted_tokens"] > data["runs"]["b16"]["wasted_tokens"]
    assert "wrote results/blocks.json" in runs["blocks"].stdout


def test_speed_writes_every_timing_with_its_spread(lab: Path, runs: dict[str, Any]) -> None:
    data = results(lab, "speed")
    cfg = config()
    kv, hd = cfg["num_key_value_heads"] // 4, 16  # the shrunk config of --tiny
    for full in (1024, 4096, 16384):
        depth = data["depths"][f"d{full}"]
        assert depth["depth"] == full // TINY
        assert depth["cache_bytes"] == 2 * data["requests"] * kv * (full // TINY) * hd * 2
        spreads = [depth["contiguous"], *depth["paged"].values()]
        for s in spreads:
            assert s["n"] == 5
            assert s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]
        for b, s in depth["paged"].items():
            assert depth["slowdown"][b]["median"] == pytest.approx(
                s["median"] / depth["contiguous"]["median"]
            )
    assert data["weights_read_s"]["median"] == pytest.approx(
        data["weights_bytes"] / data["bandwidth"]["median"]
    )


def test_running_out_of_blocks_shows_in_the_engines_log(lab: Path, runs: dict[str, Any]) -> None:
    data = results(lab, "full")
    per_request = math.ceil((data["prompt"] + data["answer"] - 1) / data["block"])
    assert data["blocks_per_request"] == per_request
    assert data["whole_fit"] == data["num_blocks"] // per_request
    assert data["peak_requests"] > data["whole_fit"]
    offloads = [s for s in data["log"] if s.startswith("Offloaded")]
    assert len(offloads) == data["offload_lines"] > 0
    assert data["preempted"] == data["soft_resets_logged"] > 0
    assert data["thrown_slots"] > 0 and data["thrown_slots"] % data["block"] == 0
    assert data["first_offload"] in runs["full"].stdout


def test_lab_yml_captures_resolve(lab: Path, runs: dict[str, Any]) -> None:
    loaded = load_lab(lab / "lab.yml")
    assert [s.id for s in loaded.lab.steps] == list(SCRIPTS)
    for step in loaded.lab.steps:
        assert step.run.split()[1] == f"{step.id}.py"
        values, misses = capture_values(step.capture, runs[step.id].stdout, lab)
        assert not misses, misses
        assert step.id == "paper" or "peak_gpu_memory" in values
    raw = yaml.safe_load((lab / "lab.yml").read_text())
    assert raw["include"] == ["../common/labkit"]
    assert all(s.get("needs") == "gpu" for s in raw["steps"][1:])
