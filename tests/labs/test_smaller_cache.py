"""The lab of lesson 2.6 (lab/smaller-cache): every script run for real, the GPU ones on the CPU
with --tiny, and their numbers checked against arithmetic done here from the configs."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

LAB = Path(__file__).resolve().parents[2] / "lab" / "smaller-cache"
KIT = LAB.parent / "common" / "labkit"
MODELS = LAB / "models"
RECORDED = LAB.parents[1] / "build" / "smaller-cache" / "2026-11-30T081310Z-h200"
SPREAD = {"median", "min", "q1", "q3", "max", "n"}
# the tiny runs' depths, standing in for the full runs' 8,192 and 32,767 in lab.yml's key paths
TINY_DEPTHS = {"8192": "64", "32767": "255"}


def run(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one lab script in the copy of the lab, as a learner would."""
    return subprocess.run(
        [sys.executable, *args], check=False, cwd=lab, capture_output=True, text=True, timeout=120
    )


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


def key_path(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[part]
    return data


def median(value: Any) -> Any:
    """A timed value's median (a spread object), or the plain number."""
    if isinstance(value, dict):
        assert set(value) == SPREAD, value
        assert value["min"] <= value["q1"] <= value["median"] <= value["q3"] <= value["max"]
        return value["median"]
    return value


def copy_lab(root: Path) -> Path:
    """The lab folder as a run or the zip lays it out: the kit beside the scripts."""
    lab = root / "smaller-cache"
    ignore = shutil.ignore_patterns("results", "__pycache__")
    shutil.copytree(LAB, lab, ignore=ignore)
    shutil.copytree(KIT, lab / "labkit", ignore=ignore)
    return lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the lab folder with every step run once (the GPU steps tiny, on the CPU)."""
    lab = copy_lab(tmp_path_factory.mktemp("lab"))
    for script in (
        ["configs.py"],
        ["designs.py", "--device", "cpu", "--tiny"],
        ["fp8_cache.py", "--device", "cpu", "--tiny"],
        ["serving.py"],
    ):
        out = run(lab, *script)
        assert out.returncode == 0, f"{script[0]}:\n{out.stdout}\n{out.stderr}"
        (lab / "results" / f"{script[0]}.out").write_text(out.stdout)
    return lab


def published(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((MODELS / name / "config.json").read_text())
    return raw.get("text_config", raw)


def windowed_layers(name: str, cfg: dict[str, Any]) -> int:
    """Layers with a sliding window, as transformers' own config classes read the file."""
    from transformers import Gemma2Config, Gemma3TextConfig, GptOssConfig

    kinds = {"gemma2": Gemma2Config, "gemma3_text": Gemma3TextConfig, "gpt_oss": GptOssConfig}
    model_type = cfg.get("model_type")
    if model_type in kinds:
        fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
        return sum(t == "sliding_attention" for t in kinds[model_type](**fields).layer_types)
    return (
        cfg["num_hidden_layers"]
        if cfg.get("sliding_window") and cfg.get("use_sliding_window", True)
        else 0
    )


def test_configs_size_every_model_from_its_file(lab: Path) -> None:
    models = results(lab, "configs")["models"]
    names = json.loads((MODELS / "releases.json").read_text())
    assert len(models) == len(names) == 12
    for name in names:
        cfg, got = published(name), models[name.lower().replace(".", "_").replace("-", "_")]
        layers = cfg["num_hidden_layers"]
        if "kv_lora_rank" in cfg:
            per_layer = (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2
        else:
            head = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            per_layer = 2 * cfg["num_key_value_heads"] * head * 2
        assert got["bytes_per_token"] == layers * per_layer, name
        local = windowed_layers(name, cfg)
        assert got["window_layers"] == local, name
        for tokens in (32_768, 131_072):
            kept = min(tokens, cfg["sliding_window"]) if local else tokens
            want = ((layers - local) * tokens + local * kept) * per_layer
            assert got["cache_bytes"][str(tokens)] == want, (name, tokens)
    # the sums COURSE.md quotes from the published files
    quoted = {
        "llama_2_7b": 524_288,
        "llama_3_1_8b": 131_072,
        "qwen3_0_6b": 114_688,
        "qwen3_8b": 147_456,
        "qwen3_30b_a3b": 98_304,
        "deepseek_v2": 69_120,
        "deepseek_v3": 70_272,
    }
    assert {k: models[k]["bytes_per_token"] for k in quoted} == quoted
    assert models["gemma_3_27b"]["window_layers"] == 52 and models["gemma_3_27b"]["window"] == 1_024
    assert models["deepseek_v3"]["bytes_per_token_mha"] == 61 * 128 * (192 + 128) * 2


def test_configs_flag_conversations_beyond_the_context(lab: Path) -> None:
    models = results(lab, "configs")["models"]
    beyond = {k: m["beyond_context"]["131072"] for k, m in models.items()}
    assert beyond["llama_2_7b"] and models["llama_2_7b"]["beyond_context"]["32768"]
    assert beyond["qwen3_8b"] and beyond["mistral_7b_v0_1"] and beyond["gemma_2_9b"]
    assert not beyond["gpt_oss_120b"] and not beyond["deepseek_v3"] and not beyond["llama_3_1_8b"]
    out = (lab / "results" / "configs.py.out").read_text()
    assert "max_position_embeddings not in the file: transformers' default 131,072 used" in out
    assert "sliding window of 1,024 tokens on 52 of 62 layers" in out


def test_configs_chart_is_in_release_order(lab: Path) -> None:
    chart = results(lab, "bytes_chart")
    years = [p["year"] for p in chart["points"]]
    assert years == sorted(years) and len(years) == 12
    first = chart["points"][0]
    assert (first["model"], first["release"], first["bytes_per_token"]) == (
        "Llama-2-7B",
        "2023-07",
        524_288,
    )
    mistral = next(p for p in chart["points"] if p["key"] == "mistral_7b_v0_1")
    assert mistral["average_bytes_per_token_32768"] == 32 * 4_096 * 4_096 / 32_768


def test_configs_reads_any_config(tmp_path: Path) -> None:
    lab = copy_lab(tmp_path)
    cfg = json.loads((MODELS / "Qwen3-8B" / "config.json").read_text())
    cfg["num_key_value_heads"] = 1
    path = tmp_path / "OneHead" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    out = run(lab, "configs.py", str(path))
    assert out.returncode == 0, out.stderr
    assert f"OneHead: MQA, {2 * 36 * 1 * 128 * 2:,} bytes per token" in out.stdout


def design_cache(r: dict[str, Any], tokens: int) -> int:
    """One conversation's cache from the design's recorded sizes."""
    if r["attention"] == "MLA":
        return r["layers"] * tokens * (r["kv_lora_rank"] + r["rope_dim"]) * 2
    per_layer = 2 * r["kv_heads"] * r["head_dim"] * 2
    local = r["layers"] // 2 if r["window"] else 0
    return ((r["layers"] - local) * tokens + local * min(tokens, r["window"] or tokens)) * per_layer


def design_weights(r: dict[str, Any]) -> int:
    h, q, d, inter = r["hidden"], r["heads"], r["head_dim"], r["intermediate"]
    if r["attention"] == "MLA":
        rank, rope = r["kv_lora_rank"], r["rope_dim"]
        attention = q * (d + rope) * h + (rank + rope) * h + rank + q * 2 * d * rank + h * q * d
    else:
        attention = (q + 2 * r["kv_heads"]) * d * h + h * q * d
    return 2 * (r["layers"] * (attention + 3 * h * inter + 2 * h) + 2 * r["vocab"] * h + h)


def test_designs_reserve_what_the_formula_says(lab: Path) -> None:
    data = results(lab, "designs")
    assert list(data["designs"]) == ["gqa", "mha", "mla", "mqa", "sliding"]  # sorted keys
    tokens = data["context_tokens"]
    for name, r in data["designs"].items():
        assert r["cache_bytes_reserved"] == r["cache_bytes_formula"] == design_cache(r, tokens), (
            name
        )
        assert r["cache_bytes_tensors"] == r["cache_bytes_reserved"], name
        assert r["weight_bytes"] == design_weights(r), name
        assert r["weight_bytes_read"] == r["weight_bytes"] - 2 * r["vocab"] * r["hidden"], name
    per = {k: r["bytes_per_token"] for k, r in data["designs"].items()}
    assert (
        per["mha"] == 2 * per["gqa"]
        and per["gqa"] == data["designs"]["gqa"]["kv_heads"] * per["mqa"]
    )
    assert per["mla"] < per["gqa"] and per["sliding"] == per["gqa"]
    sliding, gqa = data["designs"]["sliding"], data["designs"]["gqa"]
    assert sliding["cache_bytes_reserved"] < gqa["cache_bytes_reserved"]


def test_designs_decode_the_plain_model_and_time_every_depth(lab: Path) -> None:
    data = results(lab, "designs")
    assert data["depths"] == [0, 64, 255]
    for name, r in data["designs"].items():
        assert r["check"]["tokens"] > r["window"], name  # the ring of the window layers wraps
        assert r["check"]["ours"] < 0.03, name
        assert sorted(r["depths"], key=int) == ["0", "64", "255"]
        for depth, t in r["depths"].items():
            step = r["weight_bytes_read"] + design_cache(r, int(depth) + 1)
            assert t["bytes_per_step"] == step
            bound = data["copy_bandwidth"]
            assert math.isclose(median(t["bound_tok_s"]), median(bound) / step)
            assert math.isclose(t["bound_tok_s"]["min"], bound["min"] / step)
            # every speed is a spread of repeats: tok/s maps 1 / seconds, the slowest to the min
            seconds, tok_s = t["seconds_per_token"], t["tok_s"]
            assert tok_s["n"] == seconds["n"] == 3
            assert math.isclose(median(tok_s), 1 / median(seconds))
            assert math.isclose(tok_s["min"], 1 / seconds["max"])
            assert median(tok_s) > 0  # no bytes bound on the CPU: the tiny model sits in caches
        slowdown = r["slowdown"]
        assert math.isclose(median(slowdown), median(r["depths"]["0"]["tok_s"])
                            / median(r["depths"]["255"]["tok_s"]))  # fmt: skip
        assert r["prompt_tokens"] == 64
        assert r["prefill_work_bytes"] == (None if r["window"] or r["kv_lora_rank"] else 0)
        assert r["fits_24gb_flag"] == "yes" and r["peak_gpu_memory"] == 0  # tiny, on the CPU
    assert data["peak_gpu_memory"] == {"allocated": 0, "reserved": 0, "device": "cpu",
                                       "fits_24gb": None}  # fmt: skip
    out = (lab / "results" / "designs.py.out").read_text()
    assert "eager on the CPU" in out and "step time:" in out
    assert "a prompt of 64 tokens in one pass: 0 B of working space (no GPU to measure)" in out


def test_designs_do_not_depend_on_the_build_order(lab: Path, tmp_path: Path) -> None:
    """Three designs built in another order measure what they measured in the default order:
    each draws its own random numbers and is freed completely before the next is built."""
    other = copy_lab(tmp_path)
    order = ["sliding", "mla", "gqa"]
    out = run(other, "designs.py", "--device", "cpu", "--tiny", "--designs", *order)
    assert out.returncode == 0, out.stderr
    first, again = results(lab, "designs"), results(other, "designs")
    assert first["order"] == ["mha", "gqa", "mqa", "mla", "sliding"] and again["order"] == order
    assert sorted(again["designs"]) == sorted(order)
    assert re.findall(r"^(mha|gqa|mqa|mla|sliding): ", out.stdout, re.MULTILINE) == order
    for name in order:
        a, b = first["designs"][name], again["designs"][name]
        assert a["check"] == b["check"], name  # the same tokens, the same logits, to the bit
        keys = ("cache_bytes_reserved", "weight_bytes_allocated", "work_bytes", "left_bytes",
                "prefill_work_bytes")  # fmt: skip
        for key in keys:
            assert a[key] == b[key], (name, key)
    for run_ in (first, again):  # no GPU to count bytes on: what a CPU can tell is 0
        assert all(r["left_bytes"] == 0 and r["work_bytes"] == 0 for r in run_["designs"].values())


def test_designs_stop_when_a_design_outlives_its_turn(lab: Path) -> None:
    """A reference kept to a design's weights (here a list the builder appends to) is a leak:
    the script stops after that design instead of measuring the next one beside it."""
    code = (
        "import runpy, sys, labkit.decoder as kd\n"
        "kept, build = [], kd.random_weights\n"
        "kd.random_weights = lambda *a, **k: kept.append(build(*a, **k)) or kept[-1]\n"
        "sys.argv = ['designs.py', '--device', 'cpu', '--tiny', '--designs', 'mqa', 'gqa']\n"
        "runpy.run_path('designs.py', run_name='__main__')\n"
    )
    out = run(lab, "-c", code)
    assert out.returncode == 2
    assert (
        "SANITY CHECK FAILED: design mqa: 1 of its objects are still referenced after it was"
        " freed: a list, a dict, a closure or a compiled function keeps them" in out.stderr
    )
    assert "\ngqa: " not in out.stdout


def test_the_check_tells_a_window_from_no_window(lab: Path) -> None:
    """The plain model with and without the window differs: the check would catch a decoder
    that ignored the window, or wrapped its ring wrongly."""
    code = (
        "import torch\n"
        "torch.set_num_threads(1)\n"
        "from designs import design_shapes\n"
        "from labkit.decoder import Decoder, random_weights\n"
        "from labkit.reference import decode_tokens, reference_logits, relative_error\n"
        "gqa, sliding = [d for d in design_shapes(True) if d.name in ('gqa', 'sliding')]\n"
        "w = random_weights(sliding, torch.device('cpu'), seed=1)\n"
        "ids = torch.randint(0, sliding.vocab, (20,))\n"
        "with torch.no_grad():\n"
        "    want = reference_logits(sliding, w, ids, torch.float32)\n"
        "    unwindowed = decode_tokens(Decoder(gqa, w, 64, fuse=False, split_k=False), ids)\n"
        "    windowed = decode_tokens(Decoder(sliding, w, 64, fuse=False, split_k=False), ids)\n"
        "print(relative_error(unwindowed, want), relative_error(windowed, want))\n"
    )
    out = run(lab, "-c", code)
    assert out.returncode == 0, out.stderr
    wrong, right = map(float, out.stdout.split())
    assert right < 0.03 < wrong


def test_designs_refuse_an_impossible_bandwidth(tmp_path: Path) -> None:
    out = run(copy_lab(tmp_path), "designs.py", "--device", "cpu", "--tiny", "--bandwidth", "1e13")
    assert out.returncode == 2
    assert "SANITY CHECK FAILED: a copy bandwidth of 10.00 TB/s" in out.stderr


def test_fp8_cache_halves_the_bytes_and_keeps_the_logits_close(lab: Path) -> None:
    data = results(lab, "fp8")
    layers, kv, head, tokens = (
        data["layers"],
        data["kv_heads"],
        data["head_dim"],
        data["context_tokens"],
    )
    assert data["bytes_per_token_fp8"] == 2 * layers * kv * (head + 4)
    assert data["bytes_per_token_bf16"] == 2 * layers * kv * head * 2
    assert data["cache"]["fp8"]["cache_bytes_reserved"] == tokens * data["bytes_per_token_fp8"]
    assert data["cache"]["bf16"]["cache_bytes_reserved"] == tokens * data["bytes_per_token_bf16"]
    logits = data["logits"]
    assert 0 < logits["rel_error_mean"] <= logits["rel_error_max"] < 0.1
    # every step of every prompt counted: the top token kept or changed, a rate over all steps
    changed = logits["argmax_changed_per_prompt"]
    assert (logits["prompts"], logits["steps_per_prompt"], len(changed)) == (2, 6, 2)
    assert logits["steps"] == 12 == logits["argmax_agree"] + logits["argmax_changed"]
    assert logits["argmax_changed"] == sum(changed)
    assert math.isclose(logits["argmax_change_rate"], sum(changed) / 12)
    per_prompt = logits["argmax_change_rate_prompts"]
    assert (per_prompt["min"], per_prompt["max"], per_prompt["n"]) == (
        min(changed) / 6, max(changed) / 6, 2)  # fmt: skip
    for depth in ("64", "255"):
        fp8 = data["cache"]["fp8"]["depths"][depth]
        bf16 = data["cache"]["bf16"]["depths"][depth]
        assert math.isclose(
            median(fp8["speed_vs_bf16"]), median(fp8["tok_s"]) / median(bf16["tok_s"])
        )
        assert math.isclose(fp8["speed_vs_bf16"]["min"], fp8["tok_s"]["min"] / bf16["tok_s"]["max"])


def vllm_cache(card: str, weights: int, outside: int, activation: int) -> int:
    """vLLM's cache on a card, worked out here from the facts file: its share of the memory
    PyTorch sees, less weights, memory outside PyTorch and the activation peak."""
    facts = tomllib.loads((KIT / "facts.toml").read_text())
    total = facts["cards"][card]["torch_total"]
    share = facts["engines"]["vllm"]["gpu_memory_utilization"]["value"]
    memory = round(total["value"] * {"B": 1, "GiB": 2**30}[total["unit"]])  # bytes, whole
    return math.ceil(share * memory) - weights - outside - activation


def check_serving(designs: dict[str, Any], fp8: dict[str, Any], serving: dict[str, Any]) -> None:
    """Every count of step 4 is vLLM's cache over one conversation's, for both cards."""
    assert serving["rule"].startswith("a share (gpu_memory_utilization) of the whole card")
    measured = [r["prefill_work_bytes"] for r in designs["designs"].values()
                if r["prefill_work_bytes"] is not None]  # fmt: skip
    for name, got in serving["designs"].items():
        r = designs["designs"][name.removesuffix("_fp8")]
        per = (
            fp8["cache"]["fp8"]["cache_bytes_reserved"]
            if name == "gqa_fp8"
            else r["cache_bytes_reserved"]
        )
        prefill = r["prefill_work_bytes"] if r["prefill_work_bytes"] is not None else max(measured)
        activation = max(prefill, r["work_bytes"])
        assert got["activation_bytes"] == activation, name
        for key, card in (("h200", "h200"), ("card_24gb", "rtx-4090")):
            cache = vllm_cache(card, r["weight_bytes_allocated"], designs["outside_bytes"],
                               activation)  # fmt: skip
            assert got[key]["room"] == cache, (name, key)
            assert got[key]["conversations"] == max(cache, 0) // per, (name, key)
            assert got[key]["budget"]["engine"] == "vllm"


def test_serving_counts_conversations_by_vllms_rule(lab: Path) -> None:
    designs, fp8, serving = results(lab, "designs"), results(lab, "fp8"), results(lab, "serving")
    assert list(serving["designs"]) == ["gqa", "gqa_fp8", "mha", "mla", "mqa", "sliding"]
    check_serving(designs, fp8, serving)
    assert (
        serving["designs"]["mqa"]["h200"]["conversations"]
        > serving["designs"]["mha"]["h200"]["conversations"]
    )


def test_serving_counts_the_prompts_working_space(tmp_path: Path) -> None:
    """On an H200's sizes (step 2's recorded results, with the working space of a prompt pass
    added), the prompt's working space and vLLM's share come out of the room, once each."""
    lab = copy_lab(tmp_path)
    files = RECORDED / "files"
    designs = json.loads((files / "designs" / "results" / "designs.json").read_text())
    fp8 = json.loads((files / "fp8-cache" / "results" / "fp8.json").read_text())
    for name, r in designs["designs"].items():
        plain = not (r["window"] or r["kv_lora_rank"])
        r["prefill_work_bytes"] = (900 + 10 * len(name)) * 2**20 if plain else None
        r["prompt_tokens"] = 8_192
    designs["order"] = ["mha", "gqa", "mqa", "mla", "sliding"]
    (lab / "results").mkdir()
    (lab / "results" / "designs.json").write_text(json.dumps(designs))
    (lab / "results" / "fp8.json").write_text(json.dumps(fp8))
    out = run(lab, "serving.py")
    assert out.returncode == 0, out.stderr
    serving = results(lab, "serving")
    check_serving(designs, fp8, serving)
    got = serving["designs"]
    assert got["mla"]["prefill_work_bytes"] == 930 * 2**20  # the largest measured: mha's
    assert (
        got["gqa"]["h200"]["conversations"] == 24 and got["gqa"]["card_24gb"]["conversations"] == 1
    )
    assert (
        "peak (the larger of a prompt of 8,192 tokens in one pass and decoding, step 2);"
        in out.stdout
    )


def test_serving_needs_step_2(tmp_path: Path) -> None:
    out = run(copy_lab(tmp_path), "serving.py")
    assert out.returncode == 2
    assert "results/designs.json is missing: run designs.py (step 2) first" in out.stderr


def test_lab_yml_is_valid_and_its_captures_resolve(lab: Path) -> None:
    """The recipe passes the course's schema, and every capture finds a number (or text)."""
    from course.lab.load import load_lab

    loaded = load_lab(LAB / "lab.yml")
    assert [s.id for s in loaded.lab.steps] == ["configs", "designs", "fp8-cache", "serving"]
    recipe = yaml.safe_load((LAB / "lab.yml").read_text())
    for step in recipe["steps"]:
        assert (LAB / step["run"].split()[1]).exists()
        assert "peak_gpu_memory" in step["capture"], step["id"]
        for name, spec in step["capture"].items():
            key = ".".join(TINY_DEPTHS.get(part, part) for part in spec["key"].split("."))
            value = median(key_path(json.loads((lab / spec["json"]).read_text()), key))
            want = str if spec["type"] == "str" else (int, float)
            assert isinstance(value, want) and not isinstance(value, bool), (step["id"], name)
