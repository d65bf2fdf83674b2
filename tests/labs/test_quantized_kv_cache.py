"""The lab of lesson 3.3 (lab/quantized-kv-cache), without building llama.cpp.

The parsers read transcripts recorded with llama.cpp b11312 on a CPU
(tests/fixtures/llama-quantized-kv-cache/, see its README); the scripts run as real processes
against stand-ins for llama-server, llama-bench and llama-perplexity (llama_standins.py), and the
cache sizes they report are held to the ones the real server reserved for the same file. The
expected bytes are worked out here from the model's shapes and ggml's block sizes.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_standins as standins  # noqa: E402

from course.lab.load import load_lab  # noqa: E402
from course.run.capture import capture_values  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab" / "quantized-kv-cache"
FIX = ROOT / "tests" / "fixtures" / "llama-quantized-kv-cache"
TINY = "gguf/qwen3-8b-tiny-q8_0.gguf"
MIB = 2**20
# bytes of one cached vector of n numbers: f16 2 a number, q8_0 34 per 32, q4_0 18 per 32
ROW = {"f16": lambda n: 2 * n, "q8_0": lambda n: n // 32 * 34, "q4_0": lambda n: n // 32 * 18}


def per_token(layers: int, kv_heads: int, head: int, t: str) -> int:
    return layers * 2 * ROW[t](kv_heads * head)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lab")
    copy = root / "quantized-kv-cache"
    shutil.copytree(LAB, copy, ignore=shutil.ignore_patterns("results", "__pycache__", "gguf"))
    for kit in ("labkit", "llamakit"):
        src = ROOT / "lab" / "common" / kit
        shutil.copytree(src, root / "common" / kit, ignore=shutil.ignore_patterns("__pycache__"))
    standins.install(root / "llama" / "bin")
    return copy


def env(lab: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(lab.parent / "common"),
            "LLAMA_CPP_DIR": str(lab.parent / "llama"), **extra}  # fmt: skip


def run(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=lab, env=env(lab), capture_output=True,
                          text=True, timeout=240, check=False)  # fmt: skip


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


@pytest.fixture(scope="module")
def gguf(lab: Path) -> Path:
    out = run(lab, "-m", "llamakit.make_gguf", "--model", "Qwen3-8B", "--type", "q8_0",
              "--device", "cpu", "--tiny", "--workers", "2")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return lab / TINY


@pytest.fixture(scope="module")
def kit(lab: Path) -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(lab.parent / "common"))
    try:
        yield {n: importlib.import_module(f"llamakit.{n}")
               for n in ("logs", "bench", "perplexity", "gpu")}  # fmt: skip
    finally:
        sys.path.remove(str(lab.parent / "common"))


def config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    return data


def facts_bytes(name: str) -> int:
    table = tomllib.loads((ROOT / "lab" / "common" / "labkit" / "facts.toml").read_text())
    node: Any = table
    for part in name.split("."):
        node = node[part]
    scale = {"B": 1, "MiB": MIB, "GiB": 2**30}[node["unit"]]
    return round(node["value"] * scale)


# --- step 1, on paper ---------------------------------------------------------------------


def test_paper_sizes_follow_from_the_shapes_and_the_blocks(lab: Path) -> None:
    out = run(lab, "paper.py")
    assert out.returncode == 0, out.stdout + out.stderr
    got = results(lab, "paper")
    cfg = config()
    layers, kv, head = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"]
    assert got["numbers_per_token"] == 2 * layers * kv * head == 73_728
    for t, bits in (("f16", 16.0), ("q8_0", 8.5), ("q4_0", 4.5)):
        row = got["types"][t]
        assert row["bytes_per_token"] == per_token(layers, kv, head, t)
        assert row["bits_per_number"] == bits
        assert row["cache"]["40960"] == 40960 * row["bytes_per_token"]
    assert got["types"]["f16"]["cache"]["40960"] == 5760 * MIB
    assert got["types"]["q4_0"]["saved_vs_f16"] == 1 - 18 / 32 / 2
    # conversations of 32,768 tokens beside Q8_0 weights on a 24 GB card (facts.toml's room)
    room = facts_bytes("cards.rtx-4090.torch_total") - facts_bytes("cards.h200.cuda_context")
    assert got["room_24gb"] == room
    h, ff, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    q = cfg["num_attention_heads"] * head
    matrices = 2 * h * vocab + layers * (2 * h * q + 2 * h * kv * head + 3 * h * ff)
    norms = layers * (2 * h + 2 * head) + h
    weights = matrices // 32 * 34 + 4 * norms
    assert got["weights"]["q8_0"]["bytes"] == weights
    for t in ("f16", "q8_0", "q4_0"):
        want = (room - weights) // (32768 * got["types"][t]["bytes_per_token"])
        assert got["types"][t]["conversations_q8_0"] == want
    fits = [got["types"][t]["conversations_q8_0"] for t in ("f16", "q8_0", "q4_0")]
    assert fits[0] < fits[1] < fits[2]
    # a decode step's bytes on paper: the weights it reads and the cache at the timed tokens
    read = got["weights"]["q8_0"]["read"]
    assert read == weights - h * vocab // 32 * 34
    d = got["types"]["q4_0"]["depths"]["32768"]
    assert d["speedup_vs_f16"] == pytest.approx(
        (read + (32768 + 31.5) * 147_456) / (read + (32768 + 31.5) * 41_472)
    )
    assert "q4_0" in out.stdout and all(len(ln) <= 100 for ln in out.stdout.splitlines())


# --- the parsers, on recorded output -----------------------------------------------------


@pytest.mark.parametrize("t", ["f16", "q8_0", "q4_0"])
def test_the_kv_line_of_a_recorded_server_for_each_format(
    kit: dict[str, ModuleType], t: str
) -> None:
    text = (FIX / f"server-tiny-{t}.log").read_text()
    kv = kit["logs"].kv_cache(text)
    want = 40960 * per_token(2, 2, 32, t)  # the shrunk model: 2 layers, 2 heads of 32
    assert (kv["cells"], kv["k_type"], kv["v_type"]) == (40960, t, t)
    assert abs(kv["bytes"] - want) <= 0.005 * MIB + 1  # the log prints MiB with 2 decimals
    assert kit["logs"].rotation(text) == {"k": False, "v": False}  # heads of 32: too short


def test_a_quantized_cache_of_heads_of_128_is_rotated(kit: dict[str, ModuleType]) -> None:
    text = (FIX / "server-head128-q4_0.log").read_text()
    kv = kit["logs"].kv_cache(text)
    assert kv["bytes"] == 40960 * per_token(2, 1, 128, "q4_0")
    assert kit["logs"].rotation(text) == {"k": True, "v": True}


def test_the_peak_memory_lines_fit_a_terminal_and_the_readings_are_kept(
    kit: dict[str, ModuleType],
) -> None:
    gpu = kit["gpu"]
    for peak, verdict in ((13_250_000_000, "fits"), (143_000_000_000, "does NOT fit")):
        got = {"peak_used": peak, "idle_used": 0, "peak_taken": peak, "fits_24gb": peak < 2**34}
        results: dict[str, Any] = {}
        said = gpu.record(results, got, "llama-bench, the deepest cache")
        assert results == {"gpu_memory": got, "peak_gpu_memory": peak}
        first, second = said.splitlines()
        assert first.startswith(
            "peak GPU memory in use (llama-bench, the deepest cache, nvidia-smi)"
        )
        assert second.startswith(f"  {verdict} an RTX 4090 (") and "as PyTorch sees it" in second
        indented = gpu.report(got, "the server and its requests", indent="  ")
        assert all(ln.startswith("  ") for ln in indented.splitlines())
        assert all(len(ln) <= 100 for ln in (said + "\n" + indented).splitlines())
    results = {}
    assert "not measured" in gpu.record(results, gpu.worst([]), "llama-perplexity")
    assert results["peak_gpu_memory"] is None


def test_recorded_bench_rows(kit: dict[str, ModuleType]) -> None:
    bench = kit["bench"]
    for t in ("f16", "q4_0"):
        rows = bench.decode_rows(bench.parse((FIX / f"bench-tiny-{t}.json").read_text()))
        assert sorted(rows) == [0, 256, 1024]
        for row in rows.values():
            assert (row["type_k"], row["type_v"], row["flash_attn"]) == (t, t, 1)
            s = bench.speed(row)
            assert s.n == 2 and s.min == min(row["samples_ts"]) and s.max == max(row["samples_ts"])


def test_recorded_perplexity_output(kit: dict[str, ModuleType]) -> None:
    ppl = kit["perplexity"]
    base = ppl.parse((FIX / "ppl-base.txt").read_text())
    assert (base["chunks"], base["n_ctx"]) == (2, 256)
    assert base["ppl"] == {"value": 153538.1971, "plus_minus": 2170.7153}
    got = {t: ppl.kld((FIX / f"ppl-kld-{t}.txt").read_text()) for t in ("f16", "q8_0", "q4_0")}
    assert got["f16"]["kld_mean"]["value"] == 0.0 and got["f16"]["same_top"]["value"] == 1.0
    assert got["q4_0"]["kld_mean"] == {"value": 0.000132, "plus_minus": 0.000002}
    assert got["q4_0"]["same_top"]["value"] == pytest.approx(0.80709)
    assert 0 < got["q8_0"]["kld_mean"]["value"] < got["q4_0"]["kld_mean"]["value"]
    assert got["q4_0"]["kld_max"]["value"] >= got["q4_0"]["kld_p99"]["value"]
    assert got["q8_0"]["ppl_base"]["value"] == pytest.approx(base["ppl"]["value"], rel=1e-6)
    with pytest.raises(SystemExit, match="--kl-divergence"):
        ppl.kld((FIX / "ppl-base.txt").read_text())
    # the H200's f16-against-f16 run printed the ratio's uncertainty as "-nan"
    nan = "Mean ln(PPL(Q)/PPL(base))     :   0.000000 ±       -nan\nMean    KLD:   nan ±   0.1\n"
    assert ppl.parse(nan) == {"ln_ppl_ratio": {"value": 0.0}}


# --- the scripts against the stand-ins -----------------------------------------------------


@pytest.fixture(scope="module")
def sizes(lab: Path, gguf: Path) -> dict[str, Any]:
    out = run(lab, "cache_sizes.py", "--gguf", TINY, "--device", "cpu", "--tiny")
    assert out.returncode == 0, out.stdout + out.stderr
    return {"stdout": out.stdout, **results(lab, "sizes")}


def test_cache_sizes_are_what_the_real_server_reserved(sizes: dict[str, Any]) -> None:
    real = json.loads((FIX / "sizes.json").read_text())
    for t in ("f16", "q8_0", "q4_0"):
        got = sizes["types"][t]
        assert got["paper"] == 40960 * per_token(2, 2, 32, t) == real["types"][t]["paper"]
        assert abs(got["bytes"] - real["types"][t]["bytes"]) <= 0.005 * MIB + 1
        assert got["rotated"] == {"k": 0, "v": 0}
    assert sizes["types"]["q4_0"]["share_of_f16"] == pytest.approx(18 / 64, abs=1e-3)
    assert sizes["peak_gpu_memory"] is None
    assert all(len(ln) <= 100 for ln in sizes["stdout"].splitlines())


@pytest.fixture(scope="module")
def decode(lab: Path, gguf: Path) -> dict[str, Any]:
    out = run(lab, "decode.py", "--gguf", TINY, "--device", "cpu", "--tiny", "--repetitions", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    return results(lab, "decode")


def test_decode_speeds_beside_the_bytes_read(lab: Path, decode: dict[str, Any]) -> None:
    real = json.loads((FIX / "decode.json").read_text())
    assert decode["weight_bytes"] == real["weight_bytes"]
    for t in ("f16", "q4_0"):  # the bytes on paper depend on the file alone
        for d in ("0", "256", "1024"):
            assert (
                decode["types"][t]["depths"][d]["bytes_read"]
                == real["types"][t]["depths"][d]["bytes_read"]
            )
    q4 = decode["types"]["q4_0"]["depths"]["1024"]
    assert q4["tok_s"]["n"] == 3 and q4["vs_f16"]["median"] > 1  # the stand-in's q4_0 is faster
    assert q4["vs_f16_paper"] == pytest.approx(
        decode["types"]["f16"]["depths"]["1024"]["bytes_read"] / q4["bytes_read"]
    )


@pytest.fixture(scope="module")
def kld(lab: Path, gguf: Path) -> dict[str, Any]:
    out = run(lab, "kld.py", "--gguf", TINY, "--device", "cpu", "--tiny", "--chunks", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    return results(lab, "kld")


def test_kl_divergence_per_cache_against_the_f16_base(lab: Path, kld: dict[str, Any]) -> None:
    runs = kld["runs"]
    assert sorted(runs) == ["f16", "q4_0", "q4_0_norot", "q8_0"]  # sorted keys in the file
    assert runs["f16"]["kld_mean"]["value"] == 0
    assert runs["f16"]["ln_ppl_ratio"] == {"value": 0.0}  # its uncertainty printed as -nan
    means = [runs[n]["kld_mean"]["value"] for n in ("q8_0", "q4_0")]
    assert 0 < means[0] < means[1]
    # the stand-in honours LLAMA_ATTN_ROT_DISABLE, as llama.cpp does: the script must set it
    assert runs["q4_0_norot"]["rotation_off"] and runs["q4_0_norot"]["kld_mean"]["value"] > means[1]
    assert (kld["ctx"], kld["chunks"], kld["scored"]) == (256, 2, 2 * 127)
    assert not (lab / "base.kld").exists()  # removed unless --keep
    assert (lab / "results" / "text.txt").stat().st_size > 5 * 256 * 2


def test_lab_yml_captures_resolve(
    lab: Path, sizes: dict[str, Any], decode: dict[str, Any], kld: dict[str, Any]
) -> None:
    loaded = load_lab(lab / "lab.yml")
    assert [s.id for s in loaded.lab.steps] == ["paper", "gguf", "sizes", "decode", "kld"]
    assert loaded.lab.include == ["../common/labkit", "../common/llamakit"]
    missed = {}
    for step in loaded.lab.steps:
        if step.id in ("sizes", "decode", "kld"):
            values, misses = capture_values(step.capture, "", lab)
            assert values, step.id
            missed[step.id] = sorted(m.split("'")[1] for m in misses)
    # no nvidia-smi here; and the shrunk run's depths are 0, 256 and 1,024, not the GPU's
    assert missed["sizes"] == ["peak_gpu_memory", "server_f16", "server_q4", "server_q8"]
    assert missed["kld"] == ["peak_gpu_memory"]
    gpu_depths = [m for m in missed["decode"] if m != "peak_gpu_memory"]
    assert gpu_depths and all(("_d8k" in m or "_d16k" in m or "_d32k" in m) for m in gpu_depths)
