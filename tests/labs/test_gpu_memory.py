"""The lab of lesson 2.5 (lab/gpu-memory): every script run for real, on the CPU with --tiny.

The GPU scripts run on the lab's pretend 256 MiB GPU; the expected numbers are worked out here
from the config files, independently of the lab's own planner.py where it matters.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from math import ceil, floor
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import python_524

from course.lab.load import load_lab
from course.run.capture import capture_values

LAB = Path(__file__).resolve().parents[2] / "lab" / "gpu-memory"
KIT = LAB.parent / "common" / "labkit"
GPU_SCRIPTS = ("paged", "settings", "edge", "concurrency")
MIB, GIB = 2**20, 2**30
PRETEND_TOTAL, PRETEND_CONTEXT = 256 * MIB, 16 * MIB  # the lab's pretend GPU, as its README states
FACTS = tomllib.loads((KIT / "facts.toml").read_text())
# A Python with transformers 5.24.0 (the course's next release): its planner plans in sectors.
PYTHON_524 = Path(os.environ.get("COURSE_PYTHON_524") or python_524() or "/nonexistent/python")


# transformers 5.24's planner, handed memory figures, against planner.py's transcription of it
PLANNER_524 = """
import json, torch
from transformers import Qwen3Config
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.continuous_batching.cache import PagedAttentionMemoryHandler
import planner
for folder in ("Qwen3-8B", "Qwen3-0.6B"):
    cfg = json.load(open(f"models/{folder}/config.json"))
    qc = Qwen3Config(**cfg)
    qc._attn_implementation = "sdpa"
    for available in (2 * 2**30, 7_083_939_225, 119_581_778_534):
        for page, nbytes, batch, requests in ((256, 2, None, 1024), (32, 2, 512, 7),
                                              (256, 1, None, 64)):
            class Given(PagedAttentionMemoryHandler):
                def get_available_memory(self):
                    return available
            settings = ContinuousBatchingConfig(page_size=page, max_memory_percent=0.9,
                max_blocks_per_request=0, max_batch_tokens=batch, max_requests_per_batch=requests)
            block = planner.cache_bytes_per_token(cfg, planner.Engine(cache_bytes=nbytes)) * page
            engine = Given(config=qc, cb_config=settings, dtype=torch.bfloat16,
                bytes_per_sector=block, tokens_per_sector=page, bytes_per_block=block,
                attn_types=["full_attention"], model_supports_logits_to_keep=True)
            eng = planner.Engine(block_size=page, cache_bytes=nbytes, release="5.24",
                max_requests_per_batch=requests, max_batch_tokens=batch)
            ours = planner.plan(cfg, available, eng)
            got = engine.infer_max_batch_tokens_and_num_sectors()
            mine = (ours["max_batch_tokens"], ours["num_blocks"])
            print(folder, available, page, nbytes, got, mine)
"""


def copy_lab(root: Path) -> Path:
    """A fresh copy of the lab folder and of the kit it includes (root/common/labkit), so
    results/ is written outside the repository; the scripts import the kit through ENV."""
    copy = root / "gpu-memory"
    ignore = shutil.ignore_patterns("results", "__pycache__")
    shutil.copytree(LAB, copy, ignore=ignore)
    shutil.copytree(KIT, root / "common" / "labkit", ignore=ignore)
    return copy


def env(lab: Path) -> dict[str, str]:
    """The environment a script runs in: the kit importable as `labkit`, as in a run's copy."""
    return {**os.environ, "PYTHONPATH": str(lab.parent / "common")}


def in_bytes(fact: dict[str, Any]) -> int:
    """A fact of facts.toml in bytes (B, MiB or GiB)."""
    return round(fact["value"] * {"B": 1, "MiB": MIB, "GiB": GIB}[fact["unit"]])


def card_figures(key: str) -> tuple[int, int]:
    """A card's total as PyTorch sees it and its CUDA context (the H200's where not measured)."""
    card = FACTS["cards"][key]
    context = card.get("cuda_context") or FACTS["cards"]["h200"]["cuda_context"]
    return in_bytes(card["torch_total"]), in_bytes(context)


def config(folder: str, tiny: bool = False) -> dict[str, Any]:
    """A shipped config.json, shrunk the way --tiny documents it (2 layers, heads / 4, head 16)."""
    cfg: dict[str, Any] = json.loads((LAB / "models" / folder / "config.json").read_text())
    if tiny:
        cfg.update(
            num_hidden_layers=2,
            hidden_size=cfg["hidden_size"] // 16,
            num_attention_heads=cfg["num_attention_heads"] // 4,
            num_key_value_heads=cfg["num_key_value_heads"] // 4,
            head_dim=16,
            vocab_size=4096,
        )
    return cfg


def per_token(cfg: dict[str, Any], number_bytes: int = 2) -> int:
    return (
        2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * number_bytes
    )


def blocks_for(cfg: dict[str, Any], available: int, m: int, block: int) -> int:
    """Cache blocks for a largest batch of m tokens, from the two activation peaks (SDPA)."""
    page, hidden = cfg["num_key_value_heads"] * cfg["head_dim"], cfg["hidden_size"]
    batch = 7 * 4 + 4 + 8 + 8  # ids and small inputs, output ids, write and read indices per token
    logits = hidden * 2 + cfg["vocab_size"] * 4
    attention = 2 * (hidden + cfg["num_attention_heads"] * cfg["head_dim"] + 2 * page)
    best = []
    for per_m, per_n in ((logits, 0), (attention, 2 * page * 2)):
        pages = floor(
            (available - (per_m + batch) * m - 2 * m * m) / (per_n + per_token(cfg) + 8 + 2 * m)
        )
        best.append(pages // block)
    return min(best)


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_lab(tmp_path_factory.mktemp("lab"))


@pytest.fixture(scope="module")
def runs(lab: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every script once, all at the same time (they write different results files)."""
    commands = {"paper": ["paper.py"]} | {
        s: [f"{s}.py", "--device", "cpu", "--tiny"] for s in GPU_SCRIPTS
    }
    pythons = dict.fromkeys(commands, sys.executable)
    if PYTHON_524.exists():  # step 2 once more, on transformers 5.24.0, in a copy of its own
        (lab.parent / "v524").mkdir(exist_ok=True)
        copy_lab(lab.parent / "v524")
        commands["paged-5.24"] = ["paged.py", "--device", "cpu", "--tiny"]
        commands["planner-5.24"] = ["-c", PLANNER_524]
        pythons["paged-5.24"] = pythons["planner-5.24"] = str(PYTHON_524)
    procs = {
        k: subprocess.Popen(
            [pythons[k], *c],
            cwd=lab.parent / "v524" / "gpu-memory" if k.endswith("5.24") else lab,
            env=env(lab.parent / "v524" / "gpu-memory" if k.endswith("5.24") else lab),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k, c in commands.items()
    }
    done = {}
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        done[key] = subprocess.CompletedProcess(commands[key], proc.returncode, out, err)
    return done


@pytest.fixture(scope="module")
def weights() -> dict[str, int]:
    """Each model's weight bytes, counted from the parameters transformers builds (on no device)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    out = {}
    for key, folder in (("qwen3-8b", "Qwen3-8B"), ("qwen3-0_6b", "Qwen3-0.6B")):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(
                Qwen3Config(**config(folder)), dtype=torch.bfloat16
            )
        out[key] = sum(p.numel() * 2 for p in model.parameters())
    return out


def test_paper_budgets_add_up_to_the_card(
    lab: Path, runs: dict[str, Any], weights: dict[str, int]
) -> None:
    out = runs["paper"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "paper")
    for card_key, facts_key in (("h200", "h200"), ("card_24gb", "rtx-4090")):
        total, context = card_figures(facts_key)
        for key, folder in (("qwen3-8b", "Qwen3-8B"), ("qwen3-0_6b", "Qwen3-0.6B")):
            b, cfg = data["budgets"][card_key][key], config(folder)
            assert b["weights"] == weights[key]
            assert b["total"] == total
            assert b["free"] == total - context - weights[key]
            assert b["available"] == int(b["free"] * 0.9)
            p = b["plan"]
            assert p["cache_bytes_per_token"] == per_token(cfg)
            assert p["num_blocks"] == blocks_for(cfg, b["available"], p["max_batch_tokens"], 256)
            parts = b["context"] + b["weights"] + sum(p["lines"].values()) + b["slack"]
            assert parts == total
            assert sum(data["chart"][card_key][key]) == total
            assert b["conversations"]["full"] == p["num_blocks"] // (40_960 // 256)
            assert b["conversations"]["8k"] == p["num_blocks"] // (8_192 // 256)
    # on the H200 the largest batch keeps its default; on 24 GB the planner shrinks it
    assert data["budgets"]["h200"]["qwen3-8b"]["plan"]["max_batch_tokens"] == 8_192
    assert data["budgets"]["card_24gb"]["qwen3-8b"]["plan"]["max_batch_tokens"] < 8_192
    sweep = data["sweep"]["h200"]["qwen3-8b"]["conversations_full"]
    assert sweep == sorted(sweep) and len(sweep) == len(data["sweep"]["fractions"])
    # every line it prints fits 100 columns
    assert max(len(line) for line in out.stdout.splitlines()) <= 100


def test_paper_reproduces_the_published_vllm_log(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["paper"]
    log = FACTS["crosschecks"]["vllm-a100"]
    # vLLM's rule: the share of the card as PyTorch sees it, less what is paid inside it
    requested = math.ceil(0.9 * in_bytes(FACTS["cards"]["a100-40gb"]["torch_total"]))
    llama = FACTS["models"]["llama-3-8b"]
    hidden, layers, vocab = llama["hidden_size"], llama["num_hidden_layers"], llama["vocab_size"]
    kv = llama["num_key_value_heads"] * llama["head_dim"]
    per_layer = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * llama["intermediate_size"]
    weights = (layers * (per_layer + 2 * hidden) + 2 * vocab * hidden + hidden) * 2
    assert round(weights / GIB, 2) == log["weights"]["value"] == 14.96
    cache = requested - weights - in_bytes(log["non_torch"]) - in_bytes(log["activation_peak"])
    concurrency = cache / ((2 * layers * kv * 2) * 8_192)
    assert round(concurrency, 2) == 11.12 == log["concurrency"]["value"]
    assert "= 11.12x" in out.stdout
    assert 'the log says: "Maximum concurrency for 8192 tokens per request: 11.12x"' in out.stdout
    assert results(lab, "paper")["crosscheck"]["concurrency"] == 11.12
    # vLLM's budget both ways: its working space estimated from the model, and the log's
    tokens, rows = llama["max_position_embeddings"], 256  # the profile batch, the sampled rows
    inter = llama["intermediate_size"]
    space = 2 * tokens * hidden * 2 + tokens * 3 * inter * 2 + rows * vocab * 4
    predicted = results(lab, "paper")["crosscheck"]["predicted"]
    assert predicted["activation_peak"] == space
    assert predicted["cache"] == requested - weights - space  # nothing else estimated inside
    assert predicted["concurrency"] == pytest.approx(predicted["cache"] / GIB)
    assert predicted["concurrency_with_logged"] == pytest.approx(11.12, rel=0.01)
    assert predicted["cache_with_logged"] == cache
    assert f"concurrency {predicted['concurrency']:.2f}x (the log: 11.12x)" in out.stdout


def test_paper_predicts_vllm_on_the_lessons_cards(lab: Path, runs: dict[str, Any]) -> None:
    """vLLM's rule before it starts, on the H200 and the 24 GB card: the default share of the card
    as PyTorch sees it, less the weights and the working space estimated for 8,192 tokens."""
    share = FACTS["engines"]["vllm"]["gpu_memory_utilization"]["value"]
    data = results(lab, "paper")
    for key, card in (("h200", "h200"), ("card_24gb", "rtx-4090")):
        total = in_bytes(FACTS["cards"][card]["torch_total"])
        for model, folder in (("qwen3-8b", "Qwen3-8B"), ("qwen3-0_6b", "Qwen3-0.6B")):
            cfg, got = config(folder), data["vllm"][key][model]
            tokens, hidden, inter = 8_192, cfg["hidden_size"], cfg["intermediate_size"]
            space = 2 * tokens * hidden * 2 + tokens * 3 * inter * 2 + 256 * cfg["vocab_size"] * 4
            weights = data["budgets"][key][model]["weights"]
            cache = math.ceil(share * total) - weights - space
            assert got["share"] == share and got["working_space"]["total"] == space
            assert got["cache"] == cache, (key, model)
            per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * 128 * 2
            blocks = cache // (16 * per_token)
            assert got["conversations"] == {
                k: blocks // (n // 16)
                for k, n in {"8k": 8_192, "32k": 32_768, "full": 40_960}.items()
            }
            context = card_figures(card)[1]
            assert got["starts"] == (total - context >= math.ceil(share * total))
    # the 24 GB card under vLLM's rule: 4 conversations of 8,192 tokens of Qwen3-8B, none at 40,960
    assert data["vllm"]["card_24gb"]["qwen3-8b"]["conversations"]["full"] == 0
    assert (
        "vLLM's rule on this lesson's cards, predicted: its default share 0.92"
        in runs["paper"].stdout
    )


def test_paper_stops_when_the_log_does_not_add_up(tmp_path: Path) -> None:
    lab = copy_lab(tmp_path)
    path = tmp_path / "common" / "labkit" / "facts.toml"
    text = path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("activation_peak = { value = 9.37,"))
    path.write_text(text.replace(line, line.replace("9.37", "9.0")))
    out = subprocess.run(
        [sys.executable, "paper.py"],
        check=False,
        cwd=lab,
        env=env(lab),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "SANITY CHECK FAILED: the log's memory lines do not add up to its KV cache" in out.stderr


def test_planner_transcription_matches_transformers(lab: Path) -> None:
    import torch
    from transformers import Qwen3Config
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching.cache import PagedAttentionMemoryHandler

    sys.path.insert(0, str(lab))
    try:
        import planner
    finally:
        sys.path.remove(str(lab))

    class Given(PagedAttentionMemoryHandler):  # the engine's planner, handed a memory figure
        available = 0

        def get_available_memory(self) -> int:
            return self.available

    for folder in ("Qwen3-8B", "Qwen3-0.6B"):
        cfg = config(folder)
        qc = Qwen3Config(**cfg)
        qc._attn_implementation = "paged|sdpa"
        for available in (2 * GIB, 7_083_939_225, 66_461_892_608, 119_581_778_534):
            for block, dtype in (
                (256, torch.bfloat16),
                (32, torch.bfloat16),
                (256, torch.float8_e4m3fn),
            ):
                Given.available = available
                settings = ContinuousBatchingConfig(
                    block_size=block, max_memory_percent=0.9, max_blocks_per_request=0
                )
                engine = Given(
                    qc, settings, torch.bfloat16, ["full_attention"], cfg["num_hidden_layers"]
                )
                engine.cache_dtype = dtype
                ours = planner.plan(
                    cfg, available, planner.Engine(block_size=block, cache_bytes=dtype.itemsize)
                )
                assert engine.infer_max_batch_tokens_and_num_blocks() == (
                    ours["max_batch_tokens"],
                    ours["num_blocks"],
                )


def test_on_transformers_524_the_sector_planner_is_transcribed_and_step_2_runs(
    lab: Path, runs: dict[str, Any]
) -> None:
    if "paged-5.24" not in runs:
        pytest.skip(f"no Python with transformers 5.24.0 at {PYTHON_524} (COURSE_PYTHON_524)")
    out = runs["planner-5.24"]
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 18
    for line in lines:  # "... (8192, 2537) (8192, 2537)": the engine's answer, then ours
        engine, ours = line.split(" (")[1:]
        assert "(" + engine.strip() == "(" + ours.strip(), line
    out = runs["paged-5.24"]
    assert out.returncode == 0, out.stderr
    assert "transformers 5.24.0" in out.stdout
    data, cfg = results(lab.parent / "v524" / "gpu-memory", "paged"), config("Qwen3-8B", tiny=True)
    planner = data["planner"]
    assert data["release"] == data["paper"]["release"] == "5.24"
    assert planner["num_blocks"] == data["paper"]["num_blocks"] > 0
    # one flat tensor: the planned blocks and two padding ones
    engine_agrees(data, cfg, out.stdout, f"self.num_sectors = {planner['num_blocks']}")


def engine_agrees(data: dict[str, Any], cfg: dict[str, Any], stdout: str, logged: str) -> None:
    """The cache tensors hold the planned blocks and two padding ones, the planner's log line
    says so, and the block manager admits whole blocks per conversation."""
    planner, block = data["planner"], data["block_size"]
    assert planner["cache_tensor_bytes"] == (planner["num_blocks"] + 2) * block * per_token(cfg)
    assert (
        f"Paged cache initialized: self.max_batch_tokens = {planner['max_batch_tokens']}, {logged}"
    ) in stdout
    for label, tokens in data["contexts"].items():
        assert data["conversations"][label] == planner["num_blocks"] // ceil(tokens / block)


def test_paged_engine_matches_the_paper(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["paged"]
    assert out.returncode == 0, out.stderr
    data, cfg = results(lab, "paged"), config("Qwen3-8B", tiny=True)
    planner, block = data["planner"], data["block_size"]
    assert data["total"] == PRETEND_TOTAL and data["usable"] == PRETEND_TOTAL - PRETEND_CONTEXT
    assert planner["available"] == int(data["free_before"] * 0.9)
    assert planner["available_logged_mib"] == planner["available"] // MIB
    assert planner["num_blocks"] == data["paper"]["num_blocks"]
    assert planner["num_blocks"] == blocks_for(
        cfg, planner["available"], planner["max_batch_tokens"], block
    )
    logged = f"self.num_blocks = {planner['num_blocks']}, self.block_size = {block}"
    engine_agrees(data, cfg, out.stdout, logged)
    assert sum(data["chart"]["paper"]) == sum(data["chart"]["measured"]) == data["total"]
    # the prompts fill exactly one largest batch, and every one of them was answered
    assert (
        data["serving"]["requests"] * data["serving"]["prompt_tokens"]
        >= planner["max_batch_tokens"]
    )
    assert (
        data["serving"]["generated_tokens"]
        == data["serving"]["requests"] * data["serving"]["new_tokens"]
    )


def test_settings_move_the_cache(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["settings"]
    assert out.returncode == 0, out.stderr
    data, cfg = results(lab, "settings"), config("Qwen3-8B", tiny=True)
    big, block = data["qwen3-8b"], data["block_size"]
    tokens = [big[f"f{round(f * 100)}"]["cache_tokens"] for f in data["fractions"]]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1]
    for f in data["fractions"]:
        got = big[f"f{round(f * 100)}"]
        assert got["available"] == int(got["free_before"] * f)
        assert got["num_blocks"] == got["paper_num_blocks"]
        assert got["cache_tensor_bytes"] == (got["num_blocks"] + 2) * block * per_token(cfg)
        # the context length does not change the cache, only how many conversations it holds
        for label, length in data["contexts"].items():
            assert got["conversations"][label] == got["num_blocks"] // ceil(length / block)
    fp8 = big["fp8"]
    assert fp8["engine_has_cache_dtype_setting"] is False
    assert fp8["tensor_bytes"] == (fp8["num_blocks"] + 2) * block * per_token(cfg, number_bytes=1)
    assert fp8["num_blocks"] >= big["f90"]["num_blocks"]
    assert 0.005 < fp8["relative_error"] < 0.1  # float8_e4m3fn keeps 3 bits of mantissa
    assert "the engine has no setting for it" in out.stdout
    small = data["qwen3-0_6b"]["f90"]
    assert small["num_blocks"] == small["paper_num_blocks"]
    assert data["model_ratio"] == small["cache_tokens"] / big["f90"]["cache_tokens"]


def test_edge_finds_the_predicted_context(
    lab: Path, runs: dict[str, Any], weights: dict[str, int]
) -> None:
    out = runs["edge"]
    assert out.returncode == 0, out.stderr
    data, cfg = results(lab, "edge"), config("Qwen3-8B", tiny=True)
    assert data["budget"] == int(data["free"] * 0.9)
    assert data["predicted_tokens"] == data["budget"] // per_token(cfg)
    # the pretend allocator rounds each of the 2 x layers tensors up to 2 MiB, as CUDA's does
    per_tensor_tokens = 2 * MIB // (cfg["num_key_value_heads"] * cfg["head_dim"] * 2)
    pieces = data["budget"] // (2 * cfg["num_hidden_layers"]) // (2 * MIB)
    assert data["found_tokens"] == pieces * per_tensor_tokens <= data["predicted_tokens"]
    total, context = card_figures("rtx-4090")
    budget_24 = int((total - context - weights["qwen3-8b"]) * 0.9)
    assert data["card_24gb"]["predicted_tokens"] == budget_24 // per_token(config("Qwen3-8B"))


def test_small_cache_caps_the_concurrency(lab: Path, runs: dict[str, Any]) -> None:
    out = runs["concurrency"]
    assert out.returncode == 0, out.stderr
    data = results(lab, "concurrency")
    need = ceil((data["prompt_tokens"] + data["new_tokens"]) / data["block_size"])
    free, admitted = data["small"]["num_blocks"], 0  # the scheduler keeps 15 % of the blocks free
    while free >= need and (admitted == 0 or free >= 0.15 * data["small"]["num_blocks"]):
        free, admitted = free - need, admitted + 1
    assert data["small"]["predicted_concurrency"] == admitted == 7
    for n, run in data["small"]["runs"].items():
        assert run["peak_concurrency"] == min(admitted, int(n))
    for n, run in data["full"]["runs"].items():
        assert run["peak_concurrency"] == int(n)
        assert run["generated_tokens"] == int(n) * data["new_tokens"]
        tok_s, wall = run["tok_s"], run["wall_s"]
        assert wall["n"] == tok_s["n"] == data["repeats"] == 2
        assert tok_s["min"] <= tok_s["q1"] <= tok_s["median"] <= tok_s["q3"] <= tok_s["max"]
        assert tok_s["median"] == pytest.approx(run["generated_tokens"] / wall["median"])
        assert tok_s["max"] == pytest.approx(run["generated_tokens"] / wall["min"])
    assert "a Python scheduler on the host" in out.stdout


def test_lab_yml_captures_resolve(lab: Path, runs: dict[str, Any]) -> None:
    loaded = load_lab(lab / "lab.yml")
    assert [s.id for s in loaded.lab.steps] == ["paper", *GPU_SCRIPTS]
    assert loaded.lab.include == ["../common/labkit"]
    for step in loaded.lab.steps:
        assert step.run.split()[1] == f"{step.id}.py"
        assert "labkit/*.py" in step.inputs and "labkit/facts.toml" in step.inputs
        values, misses = capture_values(step.capture, runs[step.id].stdout, lab)
        assert not misses, misses
        assert "peak_gpu_memory" in values
    raw = yaml.safe_load((lab / "lab.yml").read_text())
    assert all(s.get("needs") == "gpu" for s in raw["steps"][1:])
