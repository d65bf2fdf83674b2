"""The lab of lesson 2.3 (lab/prefill-decode): every script run for real, on the CPU with --tiny.

The expected numbers are worked out here from the config, by formulas written out afresh
(not imported from the lab), so that a wrong count in the lab shows.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab" / "prefill-decode"
KIT = ROOT / "lab" / "common" / "labkit"  # lab.yml's include: brings it in as labkit/
GPU_STEPS = ["limits", "prefill", "decode", "request"]
UNREACHABLE_ON_TINY = {"ridge_tokens", "crossing_tokens", "ridge_predicted_tokens"}
STATS = ("median", "min", "q1", "q3", "max", "n")
# captures of timed values, and of values derived from them: each lands on a spread
TIMED = {
    "limits": {"bandwidth", "peak_tflop_s", "bandwidth_1_token", "ridge_measured",
               "ridge_tokens_measured", "crossing_tokens", "tflop_s_1", "tflop_s_16",
               "tflop_s_128", "tflop_s_256", "tflop_s_1024", "tflop_s_8192", "seconds_1",
               "seconds_8192"},
    "prefill": {*(f"{k}_{n}" for k in ("ttft", "tok_s", "gpu_ttft", "ttft_over_gpu")
                  for n in (128, 512, 2048, 8192, 32768)),
                *(f"of_peak_{n}" for n in (128, 2048, 8192, 32768)),
                *(f"of_peak_gpu_{n}" for n in (128, 2048, 8192, 32768))},
    "decode": {"tpot_short", "tpot_4096", "tpot_long", "tok_s_short", "tok_s_long",
               "of_bound_short", "of_bound_4096", "of_bound_long", "of_peak_short", "slowdown"},
    "request": {"ttft", "tpot", "total", "decode_tok_s", "prefill_share", "decode_share",
                "ttft_of_predicted", "tpot_of_predicted"},
}  # fmt: skip


def run(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one lab script in the copy of the lab, as a learner would."""
    return subprocess.run(
        [sys.executable, *args], check=False, cwd=lab, capture_output=True, text=True, timeout=180
    )


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


def copy_lab(where: Path) -> Path:
    """The lab folder as a learner gets it: its own files plus the lab kit, as labkit/."""
    lab = where / "prefill-decode"
    ignore = shutil.ignore_patterns("results", "__pycache__")
    shutil.copytree(LAB, lab, ignore=ignore)
    shutil.copytree(KIT, lab / "labkit", ignore=ignore)
    return lab


def median(value: Any) -> float:
    """A timed value's median (a results file holds {"median", "min", ...})."""
    assert isinstance(value, dict) and set(value) == set(STATS), value
    assert value["min"] <= value["q1"] <= value["median"] <= value["q3"] <= value["max"]
    assert value["n"] >= 1
    return float(value["median"])


def h200() -> tuple[float, float]:
    """The H200's measured peak (FLOP/s) and bandwidth (B/s), read from the facts file."""
    cards = tomllib.loads((KIT / "facts.toml").read_text())["cards"]["h200"]
    peak, bw = cards["measured_bf16_flops"], cards["measured_bandwidth"]
    assert (peak["unit"], bw["unit"]) == ("TFLOP/s", "GB/s")
    return peak["value"] * 1e12, bw["value"] * 1e9


def counts(cfg: dict[str, Any]) -> dict[str, int]:
    """Parameter counts of a Qwen3 config, written out matrix by matrix."""
    h, i, v, layers = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["vocab_size"],
        cfg["num_hidden_layers"],
    )
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    attention = h * q + h * kv + h * kv + q * h  # q, k, v, o
    mlp = h * i + h * i + i * h  # gate, up, down
    norms = h + h + d + d
    total = (
        layers * (attention + mlp + norms)
        + v * h
        + h
        + (0 if cfg["tie_word_embeddings"] else v * h)
    )
    return {
        "layer": attention + mlp,
        "norms": norms,
        "total": total,
        "head": v * h,
        "multiplied": layers * (attention + mlp) + v * h,
        "pair": 4 * layers * cfg["num_attention_heads"] * d,
        "kv": 2 * layers * cfg["num_key_value_heads"] * d * 2,
        "decode_bytes": 2 * (layers * (attention + mlp + norms) + h + v * h),
    }


def prefill_flops(cfg: dict[str, Any], n: int) -> int:
    """Every layer's matrices for every token, the LM head once, attention over n (n + 1) / 2
    pairs.
    """
    c = counts(cfg)
    return (
        2 * cfg["num_hidden_layers"] * c["layer"] * n + 2 * c["head"] + c["pair"] * n * (n + 1) // 2
    )


def layer_shapes(cfg: dict[str, Any]) -> list[tuple[int, int]]:
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    return [(q + 2 * kv, h), (h, q), (2 * i, h), (h, i)]


def flop_per_byte(t: float, shapes: list[tuple[int, int]]) -> float:
    flops = sum(2 * t * n * k for n, k in shapes)
    return flops / sum(2 * (n * k + t * k + t * n) for n, k in shapes)


def solve_tokens(target: float, shapes: list[tuple[int, int]]) -> float:
    """The token count at which flop_per_byte reaches target, by bisection."""
    lo, hi = 1e-6, 1e9
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if flop_per_byte(mid, shapes) < target else (lo, mid)
    return lo


def key_path(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[part]
    return data


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_lab(tmp_path_factory.mktemp("lab"))


@pytest.fixture(scope="module")
def runs(lab: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Step 1, then each GPU step once on the CPU with its tiny model, in the lab's order."""
    done = {"paper": run(lab, "paper.py")}
    for step in GPU_STEPS:
        done[step] = run(lab, f"{step}.py", "--device", "cpu", "--tiny")
    return done


def test_config_is_lesson_24s_published_file() -> None:
    cfg = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]) == (
        36,
        4096,
        12288,
    )
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (32, 8, 128)
    assert cfg["vocab_size"] == 151_936 and cfg["tie_word_embeddings"] is False
    kv_cache_copy = ROOT / "lab" / "kv-cache" / "models" / "Qwen3-8B" / "config.json"
    assert (LAB / "models" / "Qwen3-8B" / "config.json").read_bytes() == kv_cache_copy.read_bytes()


def test_lab_runs_on_the_kit_and_copies_none_of_it() -> None:
    assert yaml.safe_load((LAB / "lab.yml").read_text())["include"] == ["../common/labkit"]
    assert not any((LAB / name).exists() for name in ("decoder.py", "measure.py", "labkit"))
    sources = {p.name: p.read_text() for p in LAB.glob("*.py")}
    for kit_name in (
        "class Decoder",
        "def write_results",
        "def human",
        "def pick_device",
        "class PeakMemory",
        "def graphed(",
        "def copy_bandwidth(",
        "ASSUMED_PEAK",
    ):
        assert all(kit_name not in text for text in sources.values()), kit_name
    assert "from labkit.decoder import Decoder" in sources["engine.py"]
    assert "class Prefill" in sources["engine.py"]  # the lesson's own pass, on the kit's decoder


def test_paper_counts_every_matrix(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["paper"]
    assert out.returncode == 0, out.stderr
    cfg = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    c, data = counts(cfg), results(lab, "paper")
    assert data["parameters"]["total"] == c["total"]
    assert re.search(
        rf"  total +{c['total']:,}\n  = {2 * c['total']:,} B \(15\.26 GiB\)", out.stdout
    )
    assert data["flops_per_token"] == 2 * c["multiplied"]
    assert data["attention_flops_per_pair"] == c["pair"]
    assert data["decode_weight_bytes"] == c["decode_bytes"]
    peak, bw = h200()
    assert data["assumed"]["peak_flop_s"] == peak and data["assumed"]["bandwidth"] == bw
    assert "an H200's, as step 2 of this lab measured them on 2026-11-30." in out.stdout
    for n in (128, 4096, 32768):
        row = data["prefill"][str(n)]
        assert row["flops"] == prefill_flops(cfg, n)
        moved = c["decode_bytes"] + n * c["kv"]
        assert row["seconds"] == pytest.approx(max(row["flops"] / peak, moved / bw))
    assert (
        data["prefill"]["128"]["bound"] == "memory"
        and data["prefill"]["4096"]["bound"] == "arithmetic"
    )
    for depth in (0, 32768):
        row = data["decode"][str(depth)]
        assert row["bytes"] == c["decode_bytes"] + depth * c["kv"]
        assert row["seconds"] == pytest.approx(row["bytes"] / bw)
    assert data["ridge_flop_per_byte"] == pytest.approx(peak / bw)
    assert data["ridge_tokens"] == pytest.approx(
        solve_tokens(peak / bw, layer_shapes(cfg)), rel=1e-9
    )
    steps = [(c["decode_bytes"] + (4096 + j) * c["kv"]) / bw for j in range(255)]
    assert data["request"]["tpot"] == pytest.approx(statistics.mean(steps))
    ttft = data["prefill"]["4096"]["seconds"]
    assert data["request"]["prefill_share"] == pytest.approx(ttft / (ttft + sum(steps)))


def test_paper_takes_other_figures_and_needs_no_torch(tmp_path: Path) -> None:
    lab = copy_lab(tmp_path)
    blocked = (
        "import runpy, sys; sys.modules['torch'] = None; sys.argv = ['paper.py', '--peak',"
        " '1e15', '--bandwidth', '2e12']; runpy.run_path('paper.py', run_name='__main__')"
    )
    out = run(lab, "-c", blocked)
    assert out.returncode == 0, out.stderr
    assert "Ridge point: 1,000 TFLOP/s / 2.00 TB/s = 500.0 FLOP per byte." in out.stdout
    assert results(lab, "paper")["assumed"]["source"] == "given"


def test_limits_on_the_cpu(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["limits"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "limits")
    cfg, shapes = data["config"], layer_shapes(data["config"])
    assert cfg["num_hidden_layers"] == 2 and data["device"] == "cpu" and data["tiny"] is True
    assert data["tokens"] == [2**i for i in range(9)]
    for t, row in data["sweep"].items():
        flops = sum(2 * int(t) * n * k for n, k in shapes)
        assert row["flops"] == flops
        assert row["bytes_per_flop"] == pytest.approx(1 / flop_per_byte(int(t), shapes))
        seconds = row["seconds"]
        assert median(seconds) > 0 and seconds["n"] == 3
        # a rate's fastest sample is the time's fastest: min and max swap through 1 / seconds
        assert median(row["flop_s"]) == pytest.approx(flops / seconds["median"])
        assert row["flop_s"]["max"] == pytest.approx(flops / seconds["min"])
        assert row["flop_s"]["q1"] == pytest.approx(flops / seconds["q3"])
    rates = {int(t): median(r["flop_s"]) for t, r in data["sweep"].items()}
    peak, bw = median(data["peak_flop_s"]), median(data["bandwidth"])
    assert peak == max(rates.values()) and data["bandwidth"]["n"] == 5
    assert data["knee_tokens"] == min(t for t, r in rates.items() if r >= 0.8 * peak)
    ridge = data["ridge_flop_per_byte"]
    assert median(ridge) == pytest.approx(peak / bw)
    assert ridge["min"] == pytest.approx(data["peak_flop_s"]["min"] / data["bandwidth"]["max"])
    if data["ridge_tokens"] is not None:
        assert flop_per_byte(median(data["ridge_tokens"]), shapes) == pytest.approx(median(ridge))
    assert data["peak_gpu_memory"] == {
        "allocated": 0, "reserved": 0, "device": "cpu", "fits_24gb": True
    }  # fmt: skip
    assert "peak GPU memory: none, this run used the CPU" in out.stdout


def test_prefill_on_the_cpu(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["prefill"]
    assert out.returncode == 0, out.stderr
    data, limits = results(lab, "prefill"), results(lab, "limits")
    peak = median(limits["peak_flop_s"])
    assert data["peak_flop_s"] == peak and data["chunk"] == 64
    check = data["check"]
    assert check["logits_rel_diff"] < 2 * check["engine_logits_rel_diff"] + 0.01
    assert sorted(data["lengths"], key=int) == ["16", "32", "64", "128", "256"]
    for n, row in data["lengths"].items():
        assert row["flops"] == prefill_flops(data["config"], int(n))
        assert row["chunks"] == math.ceil(int(n) / 64)
        ttft, gpu = row["ttft"], row["gpu_ttft"]
        assert ttft["n"] == gpu["n"] == row["repeats"] == 3
        assert median(row["fraction_of_peak"]) == pytest.approx(row["flops"] / median(ttft) / peak)
        assert median(row["gpu_percent_of_peak"]) == pytest.approx(
            100 * row["flops"] / median(gpu) / peak
        )
        assert median(row["tok_s"]) == pytest.approx(int(n) / ttft["median"])
        assert row["tok_s"]["min"] == pytest.approx(int(n) / ttft["max"])
        assert median(row["ttft_over_gpu"]) == pytest.approx(ttft["median"] / gpu["median"])
        assert row["host_bound"] is False  # on the CPU both clocks are the host's
    assert data["host_bound_lengths"] == [] and data["gpu_timing"] == "the host's clock (no GPU)"
    assert "pass: activations in chunks of 64 tokens (shorter prompts in one piece)" in out.stdout
    assert "host-bound" not in out.stdout
    assert "chunks of the activations:\n  16 tokens 1, 32 tokens 1, 64 tokens 1, 128 tokens 2," in (
        out.stdout
    )


def test_prefill_warms_every_length_alike_and_prints_no_target(
    lab: Path, runs: dict[str, Any]
) -> None:
    """Each length ran once before any was timed and again before its own runs, so the first
    length timed does not carry the first calls' costs; the target stays in the results only."""
    out = runs["prefill"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "prefill")
    assert data["warmup"] == {"every_length_first": True, "calls": 1, "seconds": 0.0}
    rows = data["lengths"].values()
    assert all(r["warmup_calls"] == 2 and r["first_call_seconds"] > 0 for r in rows)
    assert {r["repeats"] for r in rows} == {3}  # on the CPU every length is timed alike too
    target = data["target"]
    assert (
        target["tokens"] == 128 and target["measured"] == data["lengths"]["128"]["fraction_of_peak"]
    )
    assert "target" not in out.stdout and "reached" not in out.stdout
    assert "every length ran once before any was timed" in out.stdout


def test_decode_refuses_a_bandwidth_it_beats(lab: Path, runs: dict[str, Any]) -> None:
    assert runs["limits"].returncode == 0
    out = run(
        lab,
        "decode.py",
        "--device",
        "cpu",
        "--tiny",
        "--depths",
        "0",
        "--peak",
        "1e12",
        "--bandwidth",
        "1e3",
    )
    assert out.returncode == 2
    assert re.search(
        r"SANITY CHECK FAILED: at depth 0 a step took .*, less than reading its bytes"
        r" allows \([\d,.]+ s\)",
        out.stderr,
    )


def test_gpu_steps_need_the_limits_first(tmp_path: Path) -> None:
    out = run(copy_lab(tmp_path), "decode.py", "--device", "cpu", "--tiny")
    assert out.returncode == 2
    assert "SANITY CHECK FAILED: results/limits.json is missing: run limits.py first" in out.stderr


def test_decode_on_the_cpu(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["decode"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "decode")
    c = counts(data["config"])
    assert data["weight_bytes"] == c["decode_bytes"] and data["kv_bytes_per_token"] == c["kv"]
    assert data["check_logits_rel_diff"] < 0.05
    assert sorted(data["depths"], key=int) == ["0", "64", "256"]
    for depth, row in data["depths"].items():
        assert row["bytes"] == c["decode_bytes"] + int(depth) * c["kv"]
        assert row["bound_tpot"] == pytest.approx(row["bytes"] / data["bandwidth"])
        assert row["tpot"]["n"] == 2
        assert median(row["fraction_of_bound"]) == pytest.approx(
            row["bound_tpot"] / median(row["tpot"])
        )
        assert row["fraction_of_bound"]["max"] == pytest.approx(
            row["bound_tpot"] / row["tpot"]["min"]
        )
    assert data["short"]["depth"] == 0 and data["long"]["depth"] == 256
    assert median(data["slowdown"]) == pytest.approx(
        median(data["long"]["tpot"]) / median(data["short"]["tpot"])
    )
    assert data["slowdown_predicted"] == pytest.approx(1 + 256 * c["kv"] / c["decode_bytes"])
    assert data["splits"] == dict.fromkeys(("qkv", "o", "gate_up", "down", "head"), 1)
    assert data["split_kinds"] == 0 and data["steps_per_sample"] == 3


def test_request_on_the_cpu(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["request"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "request")
    got, ask, cfg = data["measured"], data["predicted"], data["config"]
    assert (data["prompt_tokens"], data["output_tokens"], data["requests"]) == (192, 24, 3)
    shown, arrivals = got["example"], got["arrivals"]
    assert shown["arrivals"] == arrivals
    assert len(arrivals) == 24 and arrivals == sorted(arrivals) and arrivals[0] == shown["ttft"]
    assert shown["tpot"] == pytest.approx((arrivals[-1] - arrivals[0]) / 23)
    assert shown["total"] == got["total"]["median"]  # the request drawn is the median one
    for key in ("ttft", "tpot", "total", "prefill_share", "decode_tok_s"):
        assert got[key]["n"] == 3 and median(got[key]) > 0
    assert got["ttft"]["min"] <= shown["ttft"] <= got["ttft"]["max"]
    assert median(data["ttft_percent_of_predicted_speed"]) == pytest.approx(
        100 * ask["ttft"] / median(got["ttft"])
    )
    c, peak, bw = counts(cfg), data["peak_flop_s"], data["bandwidth"]
    first = max(prefill_flops(cfg, 192) / peak, (c["decode_bytes"] + 192 * c["kv"]) / bw)
    steps = [
        max(
            (2 * c["multiplied"] + c["pair"] * (d + 1)) / peak,
            (c["decode_bytes"] + d * c["kv"]) / bw,
        )
        for d in range(192, 192 + 23)
    ]
    assert ask["ttft"] == pytest.approx(first) and ask["tpot"] == pytest.approx(
        statistics.mean(steps)
    )
    assert re.search(
        r"time to first token +[\d.,]+ (us|ms|s) +[\d.]+% +[\d.,]+ (us|ms|s)", out.stdout
    )


def test_lab_yml_captures_resolve(lab: Path, runs: dict[str, Any]) -> None:
    """Every capture finds a number. Step 1 runs full size here; a GPU step's key that names a
    prompt length, a depth or a token count must name one the full run measures, and resolves
    with the tiny run's first one in its place."""
    recipe = yaml.safe_load((LAB / "lab.yml").read_text())
    assert [s["id"] for s in recipe["steps"]] == ["paper", *GPU_STEPS]
    assert all(s.get("needs") == "gpu" for s in recipe["steps"][1:])
    full = {
        "lengths": {128, 512, 2048, 8192, 32768},
        "depths": {0, 4096, 32768},
        "sweep": {2**i for i in range(14)},
    }
    sizes = json.loads(
        run(lab, "-c", "import json, pdlab; print(json.dumps([pdlab.PREFILL_LENGTHS,"
            " pdlab.DECODE_DEPTHS]))").stdout
    )  # fmt: skip
    assert set(sizes[0]) == full["lengths"] and set(sizes[1]) == full["depths"]
    for step in recipe["steps"]:
        assert (LAB / step["run"].split()[1]).exists()
        assert "peak_gpu_memory" in step["capture"] or step["id"] == "paper"
        assert TIMED.get(step["id"], set()) <= set(step["capture"]), step["id"]
        for name, spec in step["capture"].items():
            data = json.loads((lab / spec["json"]).read_text())
            parts = spec["key"].split(".")
            if step["id"] != "paper" and len(parts) == 3 and parts[1].isdigit():
                assert int(parts[1]) in full[parts[0]], name
                parts[1] = next(iter(data[parts[0]]))
            value = key_path(data, ".".join(parts))
            if value is None and spec["key"] in UNREACHABLE_ON_TINY:
                continue  # the tiny layer may never reach the CPU's ridge: no such token count
            if name in TIMED.get(step["id"], ()):
                value = median(value)  # a timed value carries its spread
            assert isinstance(value, (int, float)) and not isinstance(value, bool), name
