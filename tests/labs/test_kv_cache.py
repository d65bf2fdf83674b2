"""The lab of lesson 2.4 (lab/kv-cache): every script run for real, on the CPU with --tiny.

The GPU scripts run twice: with the random weights built from the lab's configs, and with
--weights, loading a tiny Qwen3 saved in a Hugging Face cache made here (offline), through the
same from_pretrained path a learner's download takes. All runs start together, two at a time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "lab" / "kv-cache"
KIT = REPO / "lab" / "common" / "labkit"
LLAMAKIT = REPO / "lab" / "common" / "llamakit"
GPU_SCRIPTS = {
    "gpu_check": "gpu_check",
    "prefix_reuse": "prefix",
    "decode_speed": "decode",
    "cache_budget": "budget",
}
STEP_OF = {
    "gpu_check": "gpu-check",
    "prefix_reuse": "prefix-reuse",
    "decode_speed": "decode-speed",
    "cache_budget": "cache-budget",
}
GIB = 2**30

# The tiny model saved as real weights: shapes unlike any shipped config, so its numbers show
# which model was loaded; Qwen's whole vocabulary, because prefix_reuse tokenizes with it.
HUB_REPO, REVISION = "test-org/Qwen3-tiny", "0123456789abcdef0123456789abcdef01234567"
HUB_CONFIG = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 151_936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 40_960,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}
MAKE_MODEL = """
import json, sys
from pathlib import Path
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
home, repo, revision, cfg = Path(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
org, name = repo.split("/")
folder = home / "hub" / f"models--{org}--{name}"
torch.manual_seed(0)
model = Qwen3ForCausalLM(Qwen3Config(**cfg)).to(torch.bfloat16)
model.save_pretrained(folder / "snapshots" / revision)
(folder / "refs").mkdir()
(folder / "refs" / "main").write_text(revision)
"""


# --- the formulas, written here independently of the lab ----------------------------------


def kv_per_token(cfg: dict[str, Any], nbytes: int = 2) -> int:
    """2 (key and value) x layers x key-value heads x head size x bytes per number."""
    heads = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    head = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * heads * head * nbytes


def qwen3_weight_bytes(cfg: dict[str, Any]) -> int:
    """Every parameter of a Qwen3 model, in bf16."""
    h, d, layers = cfg["hidden_size"], cfg["head_dim"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    attention = h * q + 2 * h * kv + q * h + 2 * d  # q, k, v, o and the q and k norms
    mlp = 3 * h * cfg["intermediate_size"]
    tables = cfg["vocab_size"] * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return 2 * (layers * (attention + mlp + 2 * h) + tables + h)


def tiny(name: str) -> dict[str, Any]:
    """The lab's --tiny shrinking of a shipped config, as its README describes it."""
    cfg = json.loads((LAB / "models" / name / "config.json").read_text())
    return {
        **cfg,
        "num_hidden_layers": 2,
        "hidden_size": cfg["hidden_size"] // 16,
        "intermediate_size": cfg["intermediate_size"] // 16,
        "num_attention_heads": cfg["num_attention_heads"] // 4,
        "num_key_value_heads": cfg["num_key_value_heads"] // 4,
        "head_dim": 16,
    }


# --- running the lab ------------------------------------------------------------------------


def copy_lab(dest: Path) -> Path:
    """A fresh copy of the lab folder with the lab kit and the llama.cpp kit beside its scripts as
    `labkit/` and `llamakit/` (what `include:` does), so results/ is written outside the
    repository."""
    skip = shutil.ignore_patterns("results", "__pycache__")
    shutil.copytree(LAB, dest, ignore=skip)
    shutil.copytree(KIT, dest / "labkit", ignore=skip)
    shutil.copytree(LLAMAKIT, dest / "llamakit", ignore=skip)
    return dest


def run(
    lab: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one lab script in a copy of the lab, as a learner would (one thread: runs overlap)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    full.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **(env or {}))
    return subprocess.run(
        [sys.executable, *args],
        cwd=lab,
        capture_output=True,
        text=True,
        timeout=180,
        env=full,
        check=False,
    )


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


def key_path(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[part]
    return data


class Runs:
    """Every GPU script's run on the CPU: random weights in one lab copy, --weights in another."""

    def __init__(self, root: Path) -> None:
        self.random_lab, self.weights_lab = copy_lab(root / "random"), copy_lab(root / "weights")
        self.hf_home = root / "hf-home"
        self.hub_env = {"HF_HOME": str(self.hf_home), "HF_HUB_OFFLINE": "1"}
        self.random: dict[str, Future[subprocess.CompletedProcess[str]]] = {}
        self.weights: dict[str, Future[subprocess.CompletedProcess[str]]] = {}

    def start(self, pool: ThreadPoolExecutor) -> None:
        made = pool.submit(
            run,
            self.random_lab,
            "-c",
            MAKE_MODEL,
            str(self.hf_home),
            HUB_REPO,
            REVISION,
            json.dumps(HUB_CONFIG),
        )
        for script in GPU_SCRIPTS:
            self.random[script] = pool.submit(
                run, self.random_lab, f"{script}.py", "--device", "cpu", "--tiny"
            )
        self.random["bandwidth"] = pool.submit(
            run,
            self.random_lab,
            "decode_speed.py",
            "--device",
            "cpu",
            "--tiny",
            "--bandwidth",
            "1e13",
        )

        def with_weights(script: str) -> subprocess.CompletedProcess[str]:
            done = made.result()
            assert done.returncode == 0, done.stderr
            return run(
                self.weights_lab,
                f"{script}.py",
                "--weights",
                HUB_REPO,
                "--device",
                "cpu",
                "--tiny",
                env=self.hub_env,
            )

        for script in GPU_SCRIPTS:
            self.weights[script] = pool.submit(with_weights, script)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    started = Runs(tmp_path_factory.mktemp("kv-cache"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        started.start(pool)
        yield started


def ran(future: Future[subprocess.CompletedProcess[str]]) -> subprocess.CompletedProcess[str]:
    out = future.result()
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "WARNING" not in out.stdout, out.stdout  # e.g. a model still referenced after freeing
    return out


# --- step 1: size on paper --------------------------------------------------------------------


def test_size_on_paper_prints_the_published_sums(tmp_path: Path) -> None:
    lab = copy_lab(tmp_path / "lab")
    out = run(lab, "size_on_paper.py")
    assert out.returncode == 0, out.stderr
    for name in ("Qwen3-0.6B", "Qwen3-8B"):
        per_token = kv_per_token(json.loads((LAB / "models" / name / "config.json").read_text()))
        assert f"{name}: {per_token:,} bytes per token" in out.stdout
    assert re.search(r"4,096 +469,762,048 B +448\.0 MiB", out.stdout)
    # the fields a learner looks for in config.json, by name
    for field in ("num_hidden_layers", "num_key_value_heads", "head_dim", "torch_dtype"):
        assert re.search(rf"^ +{field} +\S", out.stdout, re.MULTILINE), field
    size = results(lab, "size")
    assert size["qwen3-0_6b"]["cache_bytes"]["4096"] == 448 * 2**20
    assert size["qwen3-0_6b"]["bytes_per_token_no_gqa"] == 2 * 114_688
    assert size["qwen3-8b"]["bytes_per_token_no_gqa"] == 4 * 147_456
    assert size["qwen3-8b"]["cache_bytes"]["40960"] == 40_960 * 147_456
    assert size["peak_gpu_memory"]["allocated"] == size["peak_gpu_memory"]["reserved"] == 0


def sized(
    tmp_path: Path, folder: str, cfg: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """size_on_paper.py on one config written under tmp_path/<folder>/config.json."""
    lab = copy_lab(tmp_path / "lab")
    path = tmp_path / folder / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cfg))
    out = run(lab, "size_on_paper.py", str(path))
    assert out.returncode == 0, out.stderr
    return out, lab


def test_size_of_a_multi_head_config_without_kv_heads(tmp_path: Path) -> None:
    # Llama-2-7B's shapes, in the Hugging Face cache layout (the name comes from the folder)
    cfg = {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_size": 4096,
        "torch_dtype": "float16",
        "max_position_embeddings": 4096,
    }
    out, lab = sized(tmp_path, "hub/models--meta-llama--Llama-2-7b-hf/snapshots/abc", cfg)
    per_token = 2 * 32 * 32 * (4096 // 32) * 2
    assert f"Llama-2-7b-hf: {per_token:,} bytes per token" in out.stdout
    assert re.search(r"num_key_value_heads +\(absent: multi-head attention", out.stdout)
    data = results(lab, "size-llama-2-7b-hf")["llama-2-7b-hf"]
    assert data["bytes_per_token"] == data["bytes_per_token_no_gqa"] == per_token
    assert data["cache_bytes"] == {"1000": 1000 * per_token, "4096": 4096 * per_token}


def test_size_of_a_config_without_head_dim_reads_its_dtype(tmp_path: Path) -> None:
    # Mistral-7B-v0.1's shapes, with 4-byte numbers and a name of its own in _name_or_path
    cfg = {
        "_name_or_path": "mistralai/Mistral-7B-v0.1",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "dtype": "float32",
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
    }
    out, lab = sized(tmp_path, "some-folder", cfg)
    per_token = 2 * 32 * 8 * (4096 // 32) * 4
    assert f"Mistral-7B-v0.1: {per_token:,} bytes per token" in out.stdout
    assert re.search(r"head_dim +\(absent: hidden_size / num_attention_heads -> 128\)", out.stdout)
    assert re.search(r" dtype +float32 -> 4 bytes per number", out.stdout)
    assert "sliding_window 4,096" in out.stdout
    data = results(lab, "size-mistral-7b-v0_1")["mistral-7b-v0_1"]
    assert data["bytes_per_token"] == per_token and data["bytes_per_number"] == 4
    assert data["bytes_per_token_no_gqa"] == 4 * per_token


def test_size_of_a_latent_attention_config(tmp_path: Path) -> None:
    # DeepSeek-V3's attention fields
    cfg = {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 163840,
    }
    out, lab = sized(tmp_path, "DeepSeek-V3", cfg)
    per_token = 61 * (512 + 64) * 2
    full = 61 * 128 * ((128 + 64) + 128) * 2  # every head its own key and value
    assert f"DeepSeek-V3: {per_token:,} bytes per token" in out.stdout
    assert "latent attention (MLA)" in out.stdout
    assert f"{full:,} bytes per token" in out.stdout
    data = results(lab, "size-deepseek-v3")["deepseek-v3"]
    assert data["attention"] == "latent (MLA)"
    assert data["bytes_per_token"] == per_token and data["bytes_per_token_no_latent"] == full
    assert data["cache_bytes"]["163840"] == 163_840 * per_token


def test_a_config_of_your_own_leaves_the_labs_results_alone(tmp_path: Path) -> None:
    lab = copy_lab(tmp_path / "lab")
    assert run(lab, "size_on_paper.py").returncode == 0
    before = (lab / "results" / "size.json").read_bytes()
    out = run(lab, "size_on_paper.py", str(LAB / "models" / "Qwen3-0.6B"))  # a folder works too
    assert out.returncode == 0, out.stderr
    assert "wrote results/size-qwen3-0_6b.json" in out.stdout
    assert (lab / "results" / "size.json").read_bytes() == before
    mine = results(lab, "size-qwen3-0_6b")
    assert mine["qwen3-0_6b"] == json.loads(before)["qwen3-0_6b"]


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
    # what the README and the page quote: Qwen3-8B's weights, 15.26 GiB
    assert round(qwen3_weight_bytes(large) / GIB, 2) == 15.26


# --- the GPU scripts on the CPU, random weights ----------------------------------------------


def test_gpu_check_on_the_cpu(runs: Runs) -> None:
    out = ran(runs.random["gpu_check"])
    assert out.stdout.startswith("device: cpu")
    assert "random bf16 weights" in out.stdout
    data = results(runs.random_lab, "gpu_check")
    for key, name in (("qwen3-0_6b", "Qwen3-0.6B"), ("qwen3-8b", "Qwen3-8B")):
        cfg = tiny(name) | {"vocab_size": 4096}
        assert data[key]["weight_bytes"] == qwen3_weight_bytes(cfg)
        assert data[key]["allocated_bytes"] == data[key]["paper_bytes"]
        assert data[key]["paper_bytes"]["2048"] == 2048 * kv_per_token(cfg)
    # each model's peak on paper: weights, its largest cache, and attention's keys and values
    # repeated for every query head over that cache; the step's is the larger, Qwen3-8B's
    papers = []
    for key, name in (("qwen3-0_6b", "Qwen3-0.6B"), ("qwen3-8b", "Qwen3-8B")):
        cfg = tiny(name) | {"vocab_size": 4096}
        repeated = 2 * 2048 * cfg["num_attention_heads"] * cfg["head_dim"] * 2
        papers.append(qwen3_weight_bytes(cfg) + 2048 * kv_per_token(cfg) + repeated)
        assert data[key]["peak_gpu_memory"] == {"allocated": 0, "reserved": 0, "paper": papers[-1]}
    paper = papers[-1]
    assert data["peak_gpu_memory"]["paper"] == paper == max(papers)
    assert f"peak GPU memory of this step, on paper: {paper:,} B" in out.stdout


def test_prefix_reuse_stops_where_the_template_drops_the_thinking(runs: Runs) -> None:
    out = ran(runs.random["prefix_reuse"])
    assert re.search(r"cache : '<\|im_start\|>' 'assistant' '\\n' \| '<think>'", out.stdout)
    assert re.search(r"turn 2: '<\|im_start\|>' 'assistant' '\\n' \| 'The'", out.stdout)
    data = results(runs.random_lab, "prefix")
    assert data["tokens_reused"] == data["turn1_tokens"]
    assert data["tokens_reused"] + data["tokens_computed"] == data["turn2_tokens"]
    assert data["logits_rel_diff"] < 0.08
    for t in data["prefill_seconds"].values():  # wall times with their spread, 2 runs on the CPU
        assert t["n"] == 2 and 0 < t["min"] <= t["median"] <= t["max"]
    speedup = data["speedup"]  # the ratio of two timings pairs their extremes
    scratch, reuse = (
        data["prefill_seconds"]["turn2_scratch"],
        data["prefill_seconds"]["turn2_reuse"],
    )
    assert speedup["median"] == pytest.approx(scratch["median"] / reuse["median"])
    assert speedup["min"] == pytest.approx(scratch["min"] / reuse["max"])
    cfg = tiny("Qwen3-8B")  # prefix_reuse keeps Qwen's whole vocabulary
    longest = max(data["cached_tokens"], data["turn2_tokens"])
    paper = (
        qwen3_weight_bytes(cfg)
        + 3 * longest * kv_per_token(cfg)
        + 3 * longest * cfg["intermediate_size"] * 2
    )
    assert data["peak_gpu_memory"]["paper"] == paper


def test_decode_speed_on_the_cpu(runs: Runs) -> None:
    out = ran(runs.random["decode_speed"])
    assert "eager on the CPU" in out.stdout and "target:" not in out.stdout
    assert set(results(runs.random_lab, "decode")["target"]) == {"fraction_of_bound", "reached"}
    assert "against transformers' layers in float32 (one at a time)" in out.stdout
    data = results(runs.random_lab, "decode")
    bandwidth = data["copy_bandwidth"]["median"]  # measured: a spread of repeats
    assert 0 < data["copy_bandwidth"]["min"] <= bandwidth <= data["copy_bandwidth"]["max"] < 6e12
    assert data["copy_bandwidth_gb_s"]["median"] == pytest.approx(bandwidth / 1e9)
    papers = [2 * 2**22]  # the copy test's source and destination
    for key, name in (("qwen3-0_6b", "Qwen3-0.6B"), ("qwen3-8b", "Qwen3-8B")):
        depths = data[key]["depths"]
        assert sorted(depths, key=int) == ["0", "64", "256", "512", "1024"]
        # a decode step reads every weight but the embedding table (one row of it)
        cfg = tiny(name) | {"vocab_size": 4096}
        table = 0 if cfg["tie_word_embeddings"] else 4096 * cfg["hidden_size"] * 2
        assert data[key]["weight_bytes"] == qwen3_weight_bytes(cfg) - table
        for depth, d in depths.items():  # the bound: bandwidth / bytes read per token
            read = data[key]["weight_bytes"] + int(depth) * data[key]["kv_bytes_per_token"]
            assert d["bound_tok_s"]["median"] == pytest.approx(bandwidth / read)
            # every timed value with its spread: 3 repeats on the CPU, tok/s = 1 / seconds
            tok_s, seconds = d["tok_s"], d["seconds_per_token"]
            assert tok_s["n"] == seconds["n"] == 3
            assert 0 < tok_s["min"] <= tok_s["q1"] <= tok_s["median"] <= tok_s["q3"] <= tok_s["max"]
            assert tok_s["min"] == pytest.approx(1 / seconds["max"])
            assert d["percent"]["median"] == pytest.approx(
                100 * tok_s["median"] / d["bound_tok_s"]["median"]
            )
        assert data[key]["eager_tok_s"]["n"] == 3
        assert data[key]["logits_rel_diff"] < 0.03
        assert data[key]["engine_logits_rel_diff"] < 0.03
        # weights, and the decoder's cache of 1,025 positions
        paper = qwen3_weight_bytes(cfg) + 1025 * kv_per_token(cfg)
        assert data[key]["peak_gpu_memory"]["paper"] == paper
        papers.append(paper)
    assert data["peak_gpu_memory"]["paper"] == max(papers)


def test_decode_speed_refuses_an_impossible_bandwidth(runs: Runs) -> None:
    out = runs.random["bandwidth"].result()
    assert out.returncode == 2
    assert "SANITY CHECK FAILED: a copy bandwidth of 10.00 TB/s" in out.stderr


def test_cache_budget_on_the_cpu_sizes_itself_to_the_card(runs: Runs) -> None:
    out = ran(runs.random["cache_budget"])
    assert "this step sizes itself" in out.stdout
    data = results(runs.random_lab, "budget")
    gpu, card = data["gpu"], data["card_24gb"]
    facts = tomllib.loads((KIT / "facts.toml").read_text())
    share = facts["engines"]["vllm"]["gpu_memory_utilization"]["value"]
    block = facts["engines"]["vllm"]["block_size"]["value"]
    assert (data["engine"], data["share"], data["block_size"]) == ("vllm", share, block)
    assert data["reserved_bytes"] == gpu["tokens"] * data["kv_bytes_per_token"]
    assert gpu["tokens"] % block == 0
    assert gpu["conversations"] == gpu["tokens"] // data["context_tokens"]
    # the pretend GPU of --tiny, 256 MiB: vLLM's share of it, everything paid inside
    requested = -(-share * 256 * 2**20 // 1)
    assert gpu["lines"]["requested"] == requested
    assert gpu["room"] == requested - data["weight_bytes"] - data["work_bytes"]
    assert data["planned_bytes"] <= share * gpu["memory"] + 2**20
    assert data["sized_to_card"] is True and data["peak_gpu_memory"]["fits_24gb"] is None
    assert data["peak_gpu_memory"]["paper"] == gpu["peak_bytes"] == requested
    # a real 24 GB card, as PyTorch sees it (facts), by the same rule; its CUDA context outside
    unit = {"B": 1, "MiB": 2**20, "GiB": GIB}
    rtx, h200 = facts["cards"]["rtx-4090"]["torch_total"], facts["cards"]["h200"]["cuda_context"]
    total, context = (round(f["value"] * unit[f["unit"]]) for f in (rtx, h200))
    requested = -(-share * total // 1)
    room = requested - data["weight_bytes"] - data["work_bytes"] - context
    assert card["memory"] == total and card["room"] == room
    assert card["tokens"] == room // (block * data["kv_bytes_per_token"]) * block
    assert card["cache_bytes"] == card["tokens"] * data["kv_bytes_per_token"]
    assert card["peak_bytes"] == requested - context
    assert f"vLLM would reserve a cache of {card['cache_bytes']:,} B" in out.stdout


def test_every_gpu_step_records_its_peak_gpu_memory(runs: Runs) -> None:
    recipe = {s["id"]: s for s in yaml.safe_load((LAB / "lab.yml").read_text())["steps"]}
    for script, name in GPU_SCRIPTS.items():
        ran(runs.random[script])
        peak = results(runs.random_lab, name)["peak_gpu_memory"]
        assert peak["allocated"] == peak["reserved"] == 0  # the CPU uses no GPU memory
        assert peak["paper"] > 0 and peak["device"] == "cpu"
        capture = recipe[STEP_OF[script]]["capture"]
        for value, field in (
            ("peak_gpu_memory", "allocated"),
            ("peak_gpu_memory_reserved", "reserved"),
            ("peak_gpu_memory_paper", "paper"),
        ):
            declared = dict(capture[value])
            assert "scales" in declared  # how it moves on another GPU (course compare)
            del declared["scales"]
            assert declared == {
                "json": f"results/{name}.json",
                "key": f"peak_gpu_memory.{field}",
                "type": "int",
                "unit": "B",
            }


# --- the real-weights path: --weights through huggingface_hub, offline -----------------------


def test_every_gpu_script_loads_weights_from_the_hugging_face_cache(runs: Runs) -> None:
    per_token, weights = kv_per_token(HUB_CONFIG), qwen3_weight_bytes(HUB_CONFIG)
    outs = {script: ran(runs.weights[script]) for script in GPU_SCRIPTS}
    for script, out in outs.items():
        assert f"real weights from {HUB_REPO}" in out.stdout, script
        assert "random bf16 weights" not in out.stdout, script
    check = results(runs.weights_lab, "gpu_check")
    assert set(check) == {"device", "tiny", "peak_gpu_memory", "qwen3-tiny"}  # that one model
    assert check["qwen3-tiny"]["weight_bytes"] == weights
    assert check["qwen3-tiny"]["paper_bytes"]["2048"] == 2048 * per_token
    prefix = results(runs.weights_lab, "prefix")
    assert prefix["weights"] == f"real weights from {HUB_REPO}"
    assert prefix["tokens_reused"] == prefix["turn1_tokens"] and prefix["logits_rel_diff"] < 0.08
    decode = results(runs.weights_lab, "decode")["qwen3-tiny"]
    assert decode["kv_bytes_per_token"] == per_token
    assert decode["logits_rel_diff"] < 0.03
    assert decode["peak_gpu_memory"]["paper"] == weights + 1025 * per_token
    budget = results(runs.weights_lab, "budget")
    assert budget["weight_bytes"] == weights and budget["kv_bytes_per_token"] == per_token


# --- the recipe, the README and the install instructions -------------------------------------


def test_lab_yml_keeps_every_value_the_page_uses(runs: Runs) -> None:
    recipe = yaml.safe_load((LAB / "lab.yml").read_text())
    steps = {s["id"]: s for s in recipe["steps"]}
    torch_steps = ["size", "gpu-check", "prefix-reuse", "decode-speed", "cache-budget"]
    assert list(steps)[:5] == torch_steps  # then llama.cpp's steps, which use its build
    assert all(s.get("uses") == ["llama.cpp"] for s in list(steps.values())[5:] if "stop" not in s)
    page = "".join(
        (REPO / "docs" / "part-2" / f"kv-cache.{ext}").read_text() for ext in ("md", "yml")
    )
    used = set(
        re.findall(r"\b(size|gpu-check|prefix-reuse|decode-speed|cache-budget)\.([a-z0-9_]+)", page)
    )
    assert len(used) > 40
    for step, value in used:
        assert value in steps[step]["capture"], f"{step}.{value}"
    # every JSON capture of the steps whose keys do not depend on --tiny finds its number
    ran(runs.random["prefix_reuse"])
    ran(runs.random["cache_budget"])
    assert run(runs.random_lab, "size_on_paper.py").returncode == 0
    for step_id in ("size", "prefix-reuse", "cache-budget"):
        for name, spec in steps[step_id]["capture"].items():
            if "json" in spec:
                value = key_path(
                    json.loads((runs.random_lab / spec["json"]).read_text()), spec["key"]
                )
                if isinstance(value, dict):  # a timed value: its median is the capture's value
                    assert set(value) == {"median", "min", "q1", "q3", "max", "n"}, name
                    value = value["median"]
                assert isinstance(value, (int, float)) and not isinstance(value, bool), name
    for step in steps.values():  # every script a step runs is in the lab
        if "run" in step:
            assert (LAB / step["run"].split()[1]).exists(), step["id"]


def test_install_instructions_match_the_pyproject() -> None:
    project = tomllib.loads((LAB / "pyproject.toml").read_text())["project"]
    readme = (LAB / "README.md").read_text()
    extras = project["optional-dependencies"]
    assert set(re.findall(r"\.\[([a-z-]+)\]", readme)) == set(extras)
    assert set(extras["all"]) == {
        dep for name, deps in extras.items() if name != "all" for dep in deps
    }
    assert project["requires-python"] == ">=3.11"
    assert "Python 3.11" in readme and not re.search(r"Python 3\.(?!11)\d+", readme)
    assert "64 GB" not in readme and "80 GB" not in readme
    for script in ["size_on_paper", *GPU_SCRIPTS]:
        assert f"`{script}.py`" in readme
    assert "START-HERE.md" in readme  # where the measured peak of each step is given


# --- compare.py on this CPU run: nothing it says is false ------------------------------------


def test_compare_py_on_a_cpu_run_says_nothing_false(runs: Runs, tmp_path: Path) -> None:
    """The zip's compare.py, over what the CPU runs above wrote (step 1 at full size, the GPU
    steps with --tiny) and llama_kvlog.py over two llama-server logs recorded on a CPU."""
    from support import run_compare_py

    from course.lab.load import load_lab
    from course.package.expected import expected_for, expected_json
    from course.record.store import Store

    for script in ("gpu_check", "prefix_reuse", "decode_speed", "cache_budget"):
        ran(runs.random[script])
    lab = runs.random_lab
    assert run(lab, "size_on_paper.py").returncode == 0
    logs = [
        REPO / "tests" / "fixtures" / "llama" / f"server-qwen3-0_6b-{n}.log" for n in (4096, 32768)
    ]
    kv = run(lab, "llama_kvlog.py", *map(str, logs), "--model", "Qwen3-0.6B")
    assert kv.returncode == 0, kv.stderr
    page_run = Store(REPO / "build").get("kv-cache", "2026-11-30T091956Z-h200")
    expected = expected_for(load_lab(LAB / "lab.yml"), page_run)
    top = tmp_path / "lesson"
    shutil.copytree(lab / "results", top / "lab" / "results")
    (top / "expected.json").write_bytes(expected_json(expected))
    done = run_compare_py(top, tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    def verdict(name: str) -> str:
        return next(x for x in out.splitlines() if x.startswith(name + " ")).split("  ")[-1]

    # step 1 and the caches llama-server made are the page's, to the byte
    for name in ("bytes_per_token_06b", "cache_full_8b", "kv_4096", "kv_32768_paper"):
        assert verdict(name) == "agrees", name
    # the GPU steps ran shrunk: not comparable, and said why; a missing GPU reading is not missing
    assert verdict("allocated_4096_06b").startswith("not comparable [")
    assert "these results come from the lab's CPU mode (--device cpu --tiny)" in out
    assert "lacks" not in out and "older lab" not in out
    # the llama.cpp steps this run did not reach are listed as not run, and only those
    not_run = next(x for x in out.splitlines() if x.startswith("Not run yet"))
    assert "llama-bench" in not_run and "llama-chat" in not_run
    assert "llama-kv" not in not_run and "size" not in not_run.split(":")[1]
