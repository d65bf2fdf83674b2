"""The llama.cpp steps of lesson 2.4's lab, without building llama.cpp.

The parsers (the lab's own and the llama.cpp kit's, lab/common/llamakit/, which the lab includes)
read real transcripts recorded with llama.cpp b11312 (0c1e57098, the one that llama-cpp-python
0.3.36 vendors) on a CPU, in tests/fixtures/llama/ (see its README.md); the scripts run as real
processes against stand-ins for llama-server and llama-bench. The full path
(fetch, CPU build, GGUF files, server, chat, bench) is `bash tests/labs/llama_slow_test.sh`.
"""

from __future__ import annotations

import copy
import http.server
import importlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab" / "kv-cache"
LLAMAKIT = ROOT / "lab" / "common" / "llamakit"
FIX = ROOT / "tests" / "fixtures" / "llama"
MIB = 2**20


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LAB / "models" / name / "config.json").read_text())
    return data


def per_token(cfg: dict[str, Any]) -> int:
    """Keys and values of one token, 2 bytes a number, straight from config.json."""
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the lab with both kits beside its scripts (what lab.yml's `include:` does), so
    results/ and __pycache__ land outside the repository."""
    dest = tmp_path_factory.mktemp("lab") / "kv-cache"
    shutil.copytree(LAB, dest, ignore=shutil.ignore_patterns("results", "__pycache__", "gguf"))
    for kit in (ROOT / "lab" / "common" / "labkit", LLAMAKIT):
        shutil.copytree(kit, dest / kit.name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture(scope="module")
def mods(lab: Path) -> Iterator[dict[str, ModuleType]]:
    """The lab's llama.cpp modules and the kit's they use, imported from the copy (the kit's by
    their names in it: `logs`, `gguf`, `tools`, `bench`)."""
    sys.path.insert(0, str(lab))
    names = ["kvlab", "story", "llama_chat", "llama_bench", "llama_kvlog", "llama_gguf"]
    kit = ["logs", "gguf", "tools", "bench"]
    try:
        yield {n: importlib.import_module(n) for n in names} | {
            n: importlib.import_module(f"llamakit.{n}") for n in kit
        }
    finally:
        sys.path.remove(str(lab))
        for n in [*names, "llamakit", *(f"llamakit.{n}" for n in kit)]:
            sys.modules.pop(n, None)


def run(
    lab: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=lab,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


# --- the server log's KV-cache line -----------------------------------------------------------


@pytest.mark.parametrize("cells", [4096, 32768])
def test_kv_line_of_a_recorded_server_log(mods: dict[str, ModuleType], cells: int) -> None:
    cfg = config("Qwen3-0.6B")
    kv = mods["llama_kvlog"].read_log(FIX / f"server-qwen3-0_6b-{cells}.log", cfg)
    assert kv["cells"] == cells
    assert kv["layers"] == cfg["num_hidden_layers"]
    assert kv["bytes"] == cells * per_token(cfg)  # 448 MiB and 3,584 MiB
    assert kv["k_bytes"] == kv["v_bytes"] == kv["bytes"] // 2
    assert (kv["k_type"], kv["v_type"]) == ("f16", "f16")
    assert kv["bytes_per_cell"] == per_token(cfg)
    assert kv["buffers"] == [{"buffer": "CPU", "bytes": kv["bytes"]}]
    assert kv["predicted_bytes"] == kv["bytes"] and kv["bytes_per_token_paper"] == per_token(cfg)


def test_kv_line_variants(mods: dict[str, ModuleType]) -> None:
    parse = mods["logs"].kv_lines
    gpu = (
        "0.01.2 I llama_kv_cache:      CUDA0 KV buffer size =  4608.00 MiB\n"
        "0.01.3 I llama_kv_cache: size = 4608.00 MiB ( 32768 cells,  36 layers,  1/1 seqs), "
        "K (q8_0): 2448.00 MiB, V (f16): 2160.00 MiB\n"
    )
    (kv,) = parse(gpu)
    assert (kv["cells"], kv["layers"], kv["seqs"], kv["streams"]) == (32768, 36, 1, 1)
    assert (kv["k_type"], kv["v_type"]) == ("q8_0", "f16")
    assert mods["logs"].buffers(gpu) == {"KV": {"CUDA0": 4608 * MIB}}
    assert parse("llama_kv_cache: size = 1.00 MiB (4096 cells)") == []  # not the whole line


def test_a_log_without_the_kv_line_says_which_flag_prints_it(mods: dict[str, ModuleType]) -> None:
    text = (FIX / "server-qwen3-0_6b-4096.log").read_text()
    default = "\n".join(ln for ln in text.splitlines() if " I llama_kv_cache" not in ln)
    with pytest.raises(SystemExit, match="-lv 4"):
        mods["logs"].kv_cache(default)


def test_kvlog_script_writes_both_sizes(lab: Path) -> None:
    logs = [str(FIX / f"server-qwen3-0_6b-{c}.log") for c in (4096, 32768)]
    out = run(lab, "llama_kvlog.py", *logs, "--model", "Qwen3-0.6B")
    assert out.returncode == 0, out.stderr
    data = json.loads((lab / "results" / "llama_kv.json").read_text())
    cfg = config("Qwen3-0.6B")
    for cells in (4096, 32768):
        assert data["cells"][str(cells)]["bytes"] == cells * per_token(cfg)
        assert data["cells"][str(cells)]["predicted_bytes"] == cells * per_token(cfg)
    assert re.search(r"4,096 +f16, f16 +448\.0 MiB +448\.0 MiB", out.stdout)
    # the same logs against the wrong model's shapes must fail the check
    bad = run(lab, "llama_kvlog.py", *logs, "--model", "Qwen3-8B")
    assert bad.returncode == 2 and "SANITY CHECK FAILED" in bad.stderr


# --- the chat's timings ---------------------------------------------------------------------


def answers() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / "chat-qwen3-0_6b.json").read_text())
    return data


def test_chat_summary_of_recorded_answers(mods: dict[str, ModuleType]) -> None:
    a = answers()
    got = mods["llama_chat"].summarize(a["turn1"], a["turn2"], a["turn2_scratch"], gpu=True)
    u1, u2 = a["turn1"]["usage"], a["turn2"]["usage"]
    # turn 2 reuses exactly turn 1's prompt: the reply the server wrote differs from step 3's
    assert (
        got["tokens_reused"] == u1["prompt_tokens"] == u2["prompt_tokens_details"]["cached_tokens"]
    )
    assert got["tokens_computed"] == u2["prompt_tokens"] - u1["prompt_tokens"]
    assert got["turn2_tokens"] == u2["prompt_tokens"]
    assert got["prefill_seconds"]["turn2_reuse"] == a["turn2"]["timings"]["prompt_ms"] / 1000
    assert (
        got["speedup"]
        == a["turn2_scratch"]["timings"]["prompt_ms"] / a["turn2"]["timings"]["prompt_ms"]
    )
    assert got["reply_tokens"] == a["turn1"]["usage"]["completion_tokens"]


@pytest.mark.parametrize(
    "where, change, message",
    [
        ("turn1", {"cache_n": 500, "prompt_n": 615}, "earlier run"),  # same total, 500 found cached
        ("turn2", {"cache_n": 3, "prompt_n": 1164}, "turn 2 reused"),  # the cache was not used
        ("turn2_scratch", {"cache_n": 100, "prompt_n": 1067}, "from scratch"),
        ("turn2", {"prompt_ms": 1e9}, "longer than all"),
    ],
)
def test_chat_summary_catches_nonsense(
    mods: dict[str, ModuleType],
    capsys: pytest.CaptureFixture[str],
    where: str,
    change: dict[str, float],
    message: str,
) -> None:
    a = copy.deepcopy(answers())
    a[where]["timings"].update(change)
    for turn in a.values():
        turn.pop("usage")  # let the timings checks speak, not the usage cross-check
    with pytest.raises(SystemExit):
        mods["llama_chat"].summarize(a["turn1"], a["turn2"], a["turn2_scratch"], gpu=True)
    assert message in capsys.readouterr().err


def test_chat_template_renders_step_3s_prompt(mods: dict[str, ModuleType]) -> None:
    """The GGUF's template renders the chat as step 3 does (ChatML, old <think> block dropped)."""
    import jinja2

    story = mods["story"]
    reply = story.reply_text({"wettest": {"day": 3, "mm": 12.5, "crew": "Chen"}, "days": 9})
    msgs = [
        {"role": "system", "content": story.SYSTEM},
        {"role": "user", "content": "Log.\n\nQ?"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": story.FOLLOW_UP},
    ]
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    text = env.from_string(mods["llama_gguf"].CHAT_TEMPLATE).render(
        messages=msgs, add_generation_prompt=True
    )
    answer = reply.split("</think>")[-1].lstrip("\n")
    assert text == (
        f"<|im_start|>system\n{story.SYSTEM}<|im_end|>\n<|im_start|>user\nLog.\n\nQ?<|im_end|>\n"
        f"<|im_start|>assistant\n{answer}<|im_end|>\n<|im_start|>user\n{story.FOLLOW_UP}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # the latest assistant turn keeps its reasoning
    last = env.from_string(mods["llama_gguf"].CHAT_TEMPLATE).render(messages=msgs[:3])
    assert last.endswith(
        "<|im_start|>assistant\n<think>\n" + reply.split("<think>\n")[1] + "<|im_end|>\n"
    )


class FakeServer(http.server.BaseHTTPRequestHandler):
    """A stand-in llama-server: words are tokens, one slot keeps the last prompt and reply."""

    cached: ClassVar[list[str]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self.answer({"status": "ok"})
        else:
            self.answer(
                {
                    "build_info": "b0-fake",
                    "model_path": "fake.gguf",
                    "total_slots": 1,
                    "default_generation_settings": {"n_ctx": 4096},
                }
            )

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        if self.path == "/tokenize":
            self.answer({"tokens": body["content"].split()})
            return
        if self.path == "/completion":
            type(self).cached = body["prompt"].split()
            self.answer({"content": "x"})
            return
        prompt = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"]).split() + [
            "<assistant>"
        ]
        common = 0
        if body.get("cache_prompt", True):
            while (
                common < min(len(prompt), len(self.cached))
                and prompt[common] == self.cached[common]
            ):
                common += 1
        n_new = len(prompt) - common
        reply = ["blah"] * body["max_tokens"]
        type(self).cached = prompt + reply
        self.answer(
            {
                "choices": [{"message": {"role": "assistant", "content": " ".join(reply)}}],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "prompt_tokens_details": {"cached_tokens": common},
                },
                "timings": {
                    "cache_n": common,
                    "prompt_n": n_new,
                    "prompt_ms": 0.1 * n_new + 1,
                    "prompt_per_second": 1e4,
                    "predicted_n": len(reply),
                    "predicted_ms": 10.0,
                    "predicted_per_second": 100.0 * len(reply),
                },
            }
        )


@pytest.fixture
def fake_server() -> Iterator[int]:
    FakeServer.cached, FakeServer.requests = [], []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield int(httpd.server_address[1])
    httpd.shutdown()


def test_chat_script_against_a_stand_in_server(
    lab: Path, fake_server: int, mods: dict[str, ModuleType]
) -> None:
    out = run(
        lab,
        "llama_chat.py",
        "--port",
        str(fake_server),
        "--device",
        "cpu",
        "--tiny",
        "--max-tokens",
        "8",
        "--model",
        "models/fake.gguf",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads((lab / "results" / "llama_chat.json").read_text())
    chats = [r for r in FakeServer.requests if r["path"] == "/v1/chat/completions"]
    # --tiny: two chats, each turn 1, turn 2 reusing the cache, turn 2 from scratch
    assert [c["cache_prompt"] for c in chats] == [True, True, False] * 2
    assert [c["messages"][0]["content"].split(".")[0] for c in chats[::3]] == ["Run 1", "Run 2"]
    turn1, turn2 = chats[0]["messages"], chats[1]["messages"]
    assert turn2[: len(turn1)] == turn1 and turn2[-1]["content"] == mods["story"].FOLLOW_UP
    assert turn2[2]["role"] == "assistant" and turn2[2]["content"].startswith(
        "<think>"
    )  # step 3's reply

    def words(msgs):
        return len(" ".join(f"<{m['role']}> {m['content']}" for m in msgs).split()) + 1

    # the stand-in caches turn 1 plus its own reply; turn 2 shares turn 1's words up to the reply
    assert data["turn1_tokens"] == words(turn1)
    assert data["turn2_tokens"] == words(turn2)
    assert data["tokens_reused"] == words(turn1)
    assert data["tokens_computed"] == words(turn2) - words(turn1)
    assert data["reply_tokens"] == 8
    # every prefill time with its spread over the two chats (the stand-in's times: 0.1 ms a token)
    reuse, scratch = (
        data["prefill_seconds"]["turn2_reuse"],
        data["prefill_seconds"]["turn2_scratch"],
    )
    assert data["repeats"] == reuse["n"] == scratch["n"] == 2
    assert scratch["median"] == pytest.approx((0.1 * words(turn2) + 1) / 1e3)
    assert data["speedup"]["median"] == pytest.approx(scratch["median"] / reuse["median"])
    assert 500 <= data["document_tokens"] <= 700  # --tiny: a document of about 600 "tokens"
    assert data["peak_gpu_memory"] is None  # no nvidia-smi here
    wrong = run(lab, "llama_chat.py", "--port", str(fake_server), "--model", "qwen3-8b-bf16.gguf")
    assert wrong.returncode == 2 and "serves 'fake.gguf'" in wrong.stderr


# --- llama-bench ----------------------------------------------------------------------------


def bench_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((FIX / "bench-qwen3-0_6b-q8_0.json").read_text())
    return rows


def q8_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Qwen3-0.6B's shapes from config.json; its Q8_0 tensors' bytes as llama-bench reported."""
    cfg = config("Qwen3-0.6B")
    size = int(rows[0]["model_size"])
    return {
        "read_bytes_per_token": size,
        "tensor_bytes": size,
        "layers": cfg["num_hidden_layers"],
        "kv_heads": cfg["num_key_value_heads"],
        "head_dim_k": cfg["head_dim"],
        "head_dim_v": cfg["head_dim"],
    }


def test_bench_parse_and_bound(
    mods: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    bench = mods["llama_bench"]
    text = "some log line\n" + (FIX / "bench-qwen3-0_6b-q8_0.json").read_text()
    rows = mods["bench"].parse(text)
    assert [r["n_depth"] for r in rows] == [0, 128, 512]
    bw = 4.25e12
    got = bench.score(rows, q8_summary(rows), bw, gpu=False)
    kv = per_token(config("Qwen3-0.6B"))
    for r in rows:
        d = got["depths"][str(r["n_depth"])]
        read = r["model_size"] + (r["n_depth"] + (r["n_gen"] - 1) / 2) * kv
        # llama-bench's repetitions give the spread; its own mean and deviation are kept
        tok_s = d["tok_s"].as_dict()
        assert (tok_s["min"], tok_s["max"], tok_s["n"]) == (
            min(r["samples_ts"]),
            max(r["samples_ts"]),
            len(r["samples_ts"]),
        )
        assert (d["avg_tok_s"], d["stddev_tok_s"], d["repetitions"]) == (
            r["avg_ts"],
            r["stddev_ts"],
            len(r["samples_ts"]),
        )
        assert d["bound_tok_s"] == pytest.approx(bw / read)
        assert d["percent"].median == pytest.approx(100 * tok_s["median"] * read / bw)
    assert len(rows[0]["samples_ts"]) == 2  # two repeats: the median is their mean
    first, last = (sum(r["samples_ts"]) / 2 for r in (rows[0], rows[-1]))
    assert got["slowdown"].median == pytest.approx(first / last)
    # on a GPU, a speed above the bytes bound stops the script
    with pytest.raises(SystemExit):
        bench.score(rows, q8_summary(rows), 1e6, gpu=True)
    assert "beats the bytes bound" in capsys.readouterr().err
    # and a file whose tensors do not add up to llama-bench's model size is caught
    wrong = dict(q8_summary(rows), tensor_bytes=rows[0]["model_size"] // 2)
    with pytest.raises(SystemExit):
        bench.score(rows, wrong, bw, gpu=False)
    assert "llama-bench says" in capsys.readouterr().err


# --- GGUF files -----------------------------------------------------------------------------


def write_gguf(
    path: Path, meta: dict[str, Any], tensors: list[tuple[str, list[int], int]], align: int = 32
) -> None:
    """A GGUF v3 file (written here, independently of the lab's reader) with zero data, sparse."""

    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text.encode())) + text.encode()

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta) + 1)
    for key, value in {**meta, "general.alignment": align}.items():
        if isinstance(value, str):
            out += s(key) + struct.pack("<I", 8) + s(value)
        elif isinstance(value, list):
            out += s(key) + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(s(v) for v in value)
        else:
            out += s(key) + struct.pack("<II", 4, value)
    sizes = {0: (1, 4), 30: (1, 2), 8: (32, 34), 12: (256, 144)}  # F32, BF16, Q8_0, Q4_K
    offset, infos = 0, b""
    for name, dims, kind in tensors:
        n = 1
        for d in dims:
            n *= d
        block, nbytes = sizes[kind]
        infos += (
            s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        )
        infos += struct.pack("<IQ", kind, offset)
        offset += -(-(n // block * nbytes) // align) * align
    out += infos
    out += b"\0" * (-len(out) % align)
    with open(path, "wb") as f:
        f.write(out)
        f.truncate(len(out) + offset)  # zeros that take no disk: only the header is read


def test_gguf_reader(tmp_path: Path, mods: dict[str, ModuleType]) -> None:
    meta = {
        "general.architecture": "qwen3",
        "qwen3.block_count": 2,
        "qwen3.attention.head_count": 4,
        "qwen3.attention.head_count_kv": 2,
        "qwen3.attention.key_length": 16,
        "qwen3.attention.value_length": 16,
        "qwen3.embedding_length": 256,
        "qwen3.context_length": 40960,
        "tokenizer.ggml.tokens": ["a", "b", "<|im_end|>"],
    }
    tensors = [
        ("token_embd.weight", [256, 1000], 12),
        ("blk.0.attn_q.weight", [256, 64], 8),
        ("blk.0.attn_norm.weight", [256], 0),
        ("output.weight", [256, 1000], 30),
    ]
    path = tmp_path / "t.gguf"
    write_gguf(path, meta, tensors)
    common = mods["gguf"]
    g = common.read_gguf(path)
    assert g["metadata"]["tokenizer.ggml.tokens"] == 3  # arrays: their length
    sizes = {n: t["bytes"] for n, t in g["tensors"].items()}
    assert sizes == {
        "token_embd.weight": 1000 * 144,
        "blk.0.attn_q.weight": 64 * 8 * 34,
        "blk.0.attn_norm.weight": 256 * 4,
        "output.weight": 256_000 * 2,
    }
    s = common.summary(path)
    assert s["tensor_bytes"] == sum(sizes.values())
    assert s["weights"] == 256_000 + 256 * 64 + 256 + 256_000
    assert (
        s["read_bytes_per_token"] == sum(sizes.values()) - sizes["token_embd.weight"]
    )  # one row of it
    assert not s["tied_embeddings"]
    assert common.kv_bytes_per_token(s) == 2 * 2 * 2 * 16 * 2
    # without an output matrix the embedding table is the output and is read whole
    write_gguf(path, meta, tensors[:3])
    tied = common.summary(path)
    assert tied["tied_embeddings"] and tied["read_bytes_per_token"] == tied["tensor_bytes"]
    path.write_bytes(b"GGML" + path.read_bytes()[4:])
    with pytest.raises(ValueError, match="not a GGUF"):
        common.read_gguf(path)


def test_bench_script_with_a_stand_in_llama_bench(lab: Path, tmp_path: Path) -> None:
    """llama_bench.py end to end: a stand-in llama-bench prints the recorded JSON."""
    rows = bench_rows()
    # a GGUF file whose tensors add up to the recorded model's: Q8_0 matrices and F32 norms
    f32 = 262_144
    q8_numbers = (rows[0]["model_size"] - f32) // 34 * 32
    cfg = config("Qwen3-0.6B")
    meta = {
        "general.architecture": "qwen3",
        "qwen3.block_count": cfg["num_hidden_layers"],
        "qwen3.attention.head_count": cfg["num_attention_heads"],
        "qwen3.attention.head_count_kv": cfg["num_key_value_heads"],
        "qwen3.attention.key_length": 128,
        "qwen3.attention.value_length": 128,
        "qwen3.embedding_length": cfg["hidden_size"],
    }
    gguf = tmp_path / "gguf"
    gguf.mkdir()
    write_gguf(
        gguf / "qwen3-0_6b-q8_0.gguf",
        meta,
        [
            ("token_embd.weight", [1024, q8_numbers // 1024], 8),
            ("output_norm.weight", [f32 // 4], 0),
        ],
    )
    bin_dir = tmp_path / "llama" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "llama-bench"
    fake.write_text(
        f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'version: 9 (build 9, commit fake)' >&2; "
        f'exit 0; fi\necho "$@" > {tmp_path}/args\ncat {FIX / "bench-qwen3-0_6b-q8_0.json"}\n'
    )
    fake.chmod(0o755)
    out = run(
        lab,
        "llama_bench.py",
        "--device",
        "cpu",
        "--llama",
        str(tmp_path / "llama"),
        "--gguf",
        str(gguf),
        "--bench",
        "qwen3-0_6b:q8_0",
        "--bandwidth",
        "4250",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    args = (tmp_path / "args").read_text().split()
    assert args[args.index("-ngl") + 1] == "0" and args[args.index("-d") + 1] == "0,128,512"
    data = json.loads((lab / "results" / "llama_bench.json").read_text())
    model = data["models"]["qwen3-0_6b-q8_0"]
    assert model["tensor_bytes"] == rows[0]["model_size"]
    assert model["kv_bytes_per_token"] == per_token(cfg)
    d512 = model["depths"]["512"]
    assert d512["bound_tok_s"] == pytest.approx(
        4.25e12 / (rows[0]["model_size"] + (512 + 7.5) * per_token(cfg))
    )
    assert data["copy_bandwidth"] == 4.25e12 and data["peak_gpu_memory"] is None
    assert "version: 9" in out.stdout
    # the llama.cpp build, from --version (a package such as llama-cpp-python carries one)
    assert data["llama_cpp"]["build_number"] == 9
    assert data["llama_cpp"]["build_commit"] == "fake"


@pytest.mark.parametrize(
    ("line", "number", "commit"),
    [
        ("version: 0.5.0-dev (build 11312, commit 0c1e57098)", 11312, "0c1e57098"),  # recorded
        ("version: 6132 (a1b2c3d4)", 6132, "a1b2c3d4"),  # the older form
        ("version unknown", None, None),
    ],
)
def test_the_llama_cpp_build_is_read_from_its_version_line(
    mods: dict[str, ModuleType], line: str, number: int | None, commit: str | None
) -> None:
    built = mods["tools"].build_of(line)
    assert (built["build_number"], built["build_commit"], built["version"]) == (
        number,
        commit,
        line,
    )


def test_build_script_refuses_an_unknown_mode(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", str(LLAMAKIT / "llama_build.sh"), "x.tar.xz", str(tmp_path), "rocm"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "cuda or cpu" in out.stderr


def test_tools_are_found_in_a_build_folder_or_not_at_all(
    tmp_path: Path, mods: dict[str, ModuleType]
) -> None:
    common = mods["tools"]
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert common.tool("llama-server", tmp_path) == str(exe)
    # the source's converter, where llama_build.sh links the source (llama_gguf.py runs it)
    assert common.source_dir(tmp_path) is None and common.source_dir(None) is None
    tree = tmp_path / "src" / "llama.cpp"
    tree.mkdir(parents=True)
    (tree / "convert_hf_to_gguf.py").write_text("# the converter\n")
    assert common.source_dir(tmp_path) == tree
    env_path = os.environ.get("PATH", "")
    try:
        os.environ["PATH"] = str(tmp_path / "nothing")
        with pytest.raises(SystemExit, match="llama_build.sh"):
            common.tool("llama-quantize", tmp_path)
    finally:
        os.environ["PATH"] = env_path
