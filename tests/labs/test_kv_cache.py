"""The lab of lesson 2.4 (lab/kv-cache): every script run for real, on the CPU with --tiny."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

LAB = Path(__file__).resolve().parents[2] / "lab" / "kv-cache"


def run(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one lab script in the copy of the lab, as a learner would."""
    return subprocess.run(
        [sys.executable, *args], cwd=lab, capture_output=True, text=True, timeout=120
    )


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


def key_path(data: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        data = data[part]
    return data


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the lab folder, so results/ is written outside the repository."""
    copy = tmp_path_factory.mktemp("lab") / "kv-cache"
    shutil.copytree(LAB, copy, ignore=shutil.ignore_patterns("results", "__pycache__"))
    return copy


@pytest.fixture(scope="module")
def tiny_runs(lab: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each GPU script once, on the CPU with its tiny config."""
    scripts = ["gpu_check", "prefix_reuse", "decode_speed", "cache_budget"]
    return {s: run(lab, f"{s}.py", "--device", "cpu", "--tiny") for s in scripts}


def test_size_on_paper_prints_the_published_sums(lab: Path) -> None:
    out = run(lab, "size_on_paper.py")
    assert out.returncode == 0, out.stderr
    assert "Qwen3-0.6B: 114,688 bytes per token" in out.stdout
    assert "Qwen3-8B: 147,456 bytes per token" in out.stdout
    assert re.search(r"4,096 +469,762,048 B +448\.0 MiB", out.stdout)
    size = results(lab, "size")
    assert size["qwen3-0_6b"]["cache_bytes"]["4096"] == 448 * 2**20
    assert size["qwen3-0_6b"]["bytes_per_token_no_gqa"] == 2 * 114_688
    assert size["qwen3-8b"]["bytes_per_token_no_gqa"] == 4 * 147_456
    assert size["qwen3-8b"]["cache_bytes"]["40960"] == 40_960 * 147_456


def test_size_on_paper_reads_any_config(tmp_path: Path) -> None:
    lab = tmp_path / "kv-cache"
    shutil.copytree(LAB, lab, ignore=shutil.ignore_patterns("results", "__pycache__"))
    cfg = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    cfg["num_key_value_heads"] = 32  # the same model without grouped-query attention
    path = tmp_path / "NoGQA" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    out = run(lab, "size_on_paper.py", str(path))
    assert out.returncode == 0, out.stderr
    assert "NoGQA: 589,824 bytes per token" in out.stdout


def test_configs_hold_the_published_values() -> None:
    small = json.loads((LAB / "models" / "Qwen3-0.6B" / "config.json").read_text())
    large = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    assert (small["num_hidden_layers"], small["hidden_size"], small["tie_word_embeddings"]) == (
        28,
        1024,
        True,
    )
    assert (large["num_hidden_layers"], large["hidden_size"], large["tie_word_embeddings"]) == (
        36,
        4096,
        False,
    )
    for cfg in (small, large):
        assert cfg["rope_theta"] == 1_000_000 and cfg["vocab_size"] == 151_936
        assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (151_643, 151_645)


def test_gpu_check_on_the_cpu(lab: Path, tiny_runs: dict[str, Any]) -> None:
    out = tiny_runs["gpu_check"]
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("device: cpu")
    assert "random bf16 weights" in out.stdout
    data = results(lab, "gpu_check")
    for key in ("qwen3-0_6b", "qwen3-8b"):
        assert data[key]["allocated_bytes"] == data[key]["paper_bytes"]
        assert data[key]["paper_bytes"]["2048"] == 2048 * data[key]["bytes_per_token"]


def test_prefix_reuse_stops_where_the_template_drops_the_thinking(
    lab: Path, tiny_runs: dict[str, Any]
) -> None:
    out = tiny_runs["prefix_reuse"]
    assert out.returncode == 0, out.stderr
    assert re.search(r"cache : '<\|im_start\|>' 'assistant' '\\n' \| '<think>'", out.stdout)
    assert re.search(r"turn 2: '<\|im_start\|>' 'assistant' '\\n' \| 'The'", out.stdout)
    data = results(lab, "prefix")
    assert data["tokens_reused"] == data["turn1_tokens"]
    assert data["tokens_reused"] + data["tokens_computed"] == data["turn2_tokens"]
    assert data["logits_rel_diff"] < 0.08
    assert all(t > 0 for t in data["prefill_seconds"].values())


def test_decode_speed_on_the_cpu(lab: Path, tiny_runs: dict[str, Any]) -> None:
    out = tiny_runs["decode_speed"]
    assert out.returncode == 0, out.stderr
    assert "eager on the CPU" in out.stdout and "target: Qwen3-8B" in out.stdout
    data = results(lab, "decode")
    assert 0 < data["copy_bandwidth"] < 6e12
    for key in ("qwen3-0_6b", "qwen3-8b"):
        depths = data[key]["depths"]
        assert sorted(depths, key=int) == ["0", "64", "256", "512", "1024"]
        assert all(0 < d["tok_s"] <= 1.05 * d["bound_tok_s"] for d in depths.values())
        assert data[key]["logits_rel_diff"] < 0.03


def test_decode_speed_refuses_an_impossible_bandwidth(lab: Path) -> None:
    out = run(lab, "decode_speed.py", "--device", "cpu", "--tiny", "--bandwidth", "1e13")
    assert out.returncode == 2
    assert "SANITY CHECK FAILED: a copy bandwidth of 10.00 TB/s" in out.stderr


def test_cache_budget_on_the_cpu(lab: Path, tiny_runs: dict[str, Any]) -> None:
    out = tiny_runs["cache_budget"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "budget")
    gpu = data["gpu"]
    assert data["reserved_bytes"] == gpu["tokens"] * data["kv_bytes_per_token"]
    assert gpu["conversations"] == gpu["tokens"] // data["context_tokens"]
    assert data["planned_bytes"] <= 0.9 * gpu["memory"] + 2**20


def test_lab_yml_captures_resolve(lab: Path, tiny_runs: dict[str, Any]) -> None:
    """Every JSON capture of the steps whose keys do not depend on --tiny finds its value."""
    recipe = yaml.safe_load((LAB / "lab.yml").read_text())
    assert [s["id"] for s in recipe["steps"]] == [
        "size",
        "gpu-check",
        "prefix-reuse",
        "decode-speed",
        "cache-budget",
    ]
    for step in recipe["steps"]:
        assert (LAB / step["run"].split()[1]).exists()
        if step["id"] not in ("size", "prefix-reuse", "cache-budget"):
            continue
        for name, spec in step["capture"].items():
            if "json" in spec:
                value = key_path(json.loads((lab / spec["json"]).read_text()), spec["key"])
                assert isinstance(value, (int, float)), name
