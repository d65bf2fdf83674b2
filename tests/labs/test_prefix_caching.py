"""The lab of lesson 3.2 (lab/prefix-caching), without building llama.cpp.

The GGUF writer runs for real (--tiny) and its file is read back; the parsers read transcripts
recorded with llama.cpp b11312 on a CPU (tests/fixtures/llama-prefix-caching/, see its README);
the client scripts run as real processes against a stand-in llama-server (llama_standins.py)
that tokenizes with Qwen's vocabulary and keeps slots as llama.cpp's server does, and their
token counts are held to the ones the real server gave the same scripts. Expected counts are
worked out here, with the test's own tokenizer, not read back from the lab's arithmetic.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
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
LAB = ROOT / "lab" / "prefix-caching"
FIX = ROOT / "tests" / "fixtures" / "llama-prefix-caching"
TINY = "gguf/qwen3-8b-tiny-q8_0.gguf"
MIB = 2**20


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the lab with both kits beside it, where lab.yml's include names them."""
    root = tmp_path_factory.mktemp("lab")
    copy = root / "prefix-caching"
    shutil.copytree(LAB, copy, ignore=shutil.ignore_patterns("results", "__pycache__", "gguf"))
    for kit in ("labkit", "llamakit"):
        src = ROOT / "lab" / "common" / kit
        shutil.copytree(src, root / "common" / kit, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def env(lab: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(lab.parent / "common")}


def run(lab: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=lab, env=env(lab), capture_output=True,
                          text=True, timeout=240, check=False)  # fmt: skip


def results(lab: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((lab / "results" / f"{name}.json").read_text())
    return data


@pytest.fixture(scope="module")
def gguf(lab: Path) -> dict[str, Any]:
    """The shrunk model's file, written by the lab's own step in its CPU form."""
    out = run(lab, "-m", "llamakit.make_gguf", "--model", "Qwen3-8B", "--type", "q8_0",
              "--device", "cpu", "--tiny", "--workers", "2")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return {"stdout": out.stdout, **results(lab, "gguf")}


@pytest.fixture(scope="module")
def enc() -> Any:
    return standins.qwen_encoder()


@pytest.fixture(scope="module")
def prompts(lab: Path) -> Iterator[ModuleType]:
    sys.path.insert(0, str(lab))
    try:
        yield importlib.import_module("prompts")
    finally:
        sys.path.remove(str(lab))
        sys.modules.pop("prompts", None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(lab: Path, slots: int, ctx: int) -> tuple[subprocess.Popen[str], int]:
    """The stand-in llama-server, started as llama-server is, serving the shrunk model."""
    port = free_port()
    cmd = [sys.executable, str(Path(standins.__file__)), "server", "-m", TINY, "-fa", "on",
           "-np", str(slots), "-c", str(ctx), "--cache-ram", "0", "-lv", "4", "--host",
           "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=lab, env=env(lab), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc, port
        except OSError:
            assert proc.poll() is None, "the stand-in llama-server ended"
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the stand-in llama-server did not answer")


@pytest.fixture(scope="module")
def one_slot(lab: Path, gguf: dict[str, Any]) -> Iterator[int]:
    proc, port = start(lab, 1, 2048)
    yield port
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def four_slots(lab: Path, gguf: dict[str, Any]) -> Iterator[int]:
    proc, port = start(lab, 4, 8192)
    yield port
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def paper(lab: Path) -> dict[str, Any]:
    out = run(lab, "paper.py", "--tiny")
    assert out.returncode == 0, out.stdout + out.stderr
    return results(lab, "paper")


def lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LAB / "models" / "Qwen3-8B" / "config.json").read_text())
    return data


# --- the GGUF file ------------------------------------------------------------------------


def test_the_random_gguf_has_the_shapes_and_the_converters_vocabulary(
    lab: Path, gguf: dict[str, Any]
) -> None:
    meta = standins.header(str(lab / TINY))
    h, ff, layers, vocab = 128, 384, 2, 151_936  # --tiny's shapes (the lab's README)
    q, kv, head = 4 * 32, 2 * 32, 32
    matrices = 2 * h * vocab + layers * (2 * h * q + 2 * h * kv + 3 * h * ff)
    norms = layers * (2 * h + 2 * head) + h
    assert meta["tensor_bytes"] == matrices // 32 * 34 + 4 * norms == gguf["tensor_bytes"]
    assert gguf["weights"] == matrices + norms
    assert (meta["qwen3.block_count"], meta["qwen3.attention.head_count_kv"]) == (2, 2)
    assert meta["tokenizer.ggml.pre"] == "qwen2" and meta["general.file_type"] == 7
    # the vocabulary is the one llama.cpp's own converter writes, token for token
    sys.path.insert(0, str(lab.parent / "common"))
    try:
        read = importlib.import_module("llamakit.gguf").read_gguf
    finally:
        sys.path.remove(str(lab.parent / "common"))
    arrays = ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]
    got = read(lab / TINY, arrays=arrays)
    ref = json.loads((FIX / "converter-vocabulary.json").read_text())

    def sha(x: Any) -> str:
        return hashlib.sha256(json.dumps(x, ensure_ascii=False).encode()).hexdigest()

    assert sha(got["metadata"]["tokenizer.ggml.tokens"]) == ref["tokens"]["sha256"]
    assert sha(got["metadata"]["tokenizer.ggml.token_type"]) == ref["token_type"]["sha256"]
    for key, value in ref["metadata"].items():
        assert got["metadata"][key] == value, key
    for key, kind in ref["kinds"].items():
        if key in got["kinds"]:
            assert got["kinds"][key] == kind, key
    # every merge joins two tokens into a third, and each token of two or more bytes has one
    tokens = set(got["metadata"]["tokenizer.ggml.tokens"])
    merges = got["metadata"]["tokenizer.ggml.merges"]
    assert len(merges) == 151_387 < ref["merges"]["count"]
    for m in merges[::997]:
        a, b = m.split(" ")
        assert a in tokens and b in tokens and a + b in tokens


def test_the_real_server_tokenizes_the_file_as_qwen_does(enc: Any, prompts: ModuleType) -> None:
    """llama.cpp, serving the file make_gguf wrote, split the prompt as Qwen's tokenizer does,
    and its chat template renders the chat as the lab's prompts.render."""
    chat = [prompts.messages(prompts.manual(3, "09Z"), prompts.QUESTIONS[2])][0]
    text = prompts.render(chat)
    recorded = json.loads((FIX / "tokenize.json").read_text())["tokens"]
    assert recorded == enc.encode(text, allowed_special="all")
    assert json.loads((FIX / "apply-template.json").read_text())["prompt"] == text


# --- the parsers, on recorded output -----------------------------------------------------


@pytest.fixture(scope="module")
def kit(lab: Path) -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(lab.parent / "common"))
    try:
        yield {n: importlib.import_module(f"llamakit.{n}") for n in ("logs", "server")}
    finally:
        sys.path.remove(str(lab.parent / "common"))


def test_the_kv_cache_lines_of_recorded_logs(kit: dict[str, ModuleType]) -> None:
    logs = kit["logs"]
    one = logs.kv_cache((FIX / "server-1.log").read_text())
    four = logs.kv_cache((FIX / "server-4.log").read_text())
    per_token = 2 * 2 * 2 * 32 * 2  # the shrunk model: 2 layers, 2 heads of 32, f16
    assert (one["cells"], one["streams"], one["bytes"]) == (2048, 1, 2048 * per_token)
    # four slots without a unified cache: each its own 2,048 cells, four streams
    assert (four["cells"], four["seqs"], four["streams"]) == (2048, 4, 4)
    assert four["total_cells"] == 8192 and four["bytes"] == 8192 * per_token
    assert four["bytes_per_cell"] == per_token
    assert logs.slots((FIX / "server-4.log").read_text()) == {
        "slots": 4, "ctx_per_slot": 2048, "unified": False}  # fmt: skip
    bufs = logs.buffers((FIX / "server-1.log").read_text())
    assert bufs["KV"] == {"CPU": 2048 * per_token}
    assert set(bufs) == {"model", "KV", "compute", "output"}
    assert logs.rotation((FIX / "server-1.log").read_text()) == {"k": False, "v": False}


def test_the_start_steps_captures_read_a_real_log(lab: Path) -> None:
    loaded = load_lab(lab / "lab.yml")
    step = {s.id: s for s in loaded.lab.steps}["server-4"]
    values, misses = capture_values(step.capture, (FIX / "server-4.log").read_text(), lab)
    assert values["kv_mib"].value == 4.0
    # the GPU's buffers are named CUDA0; a CPU log has none
    assert sorted(m.split("'")[1] for m in misses) == ["compute_mib", "weights_mib"]
    gpu = "load_tensors:        CUDA0 model buffer size =  8148.56 MiB\n" + (
        "sched_reserve:      CUDA0 compute buffer size =   304.75 MiB\n"
        "llama_kv_cache: size = 5184.00 MiB (  9216 cells,  36 layers,  4/4 seqs), "
        "K (f16): 2592.00 MiB, V (f16): 2592.00 MiB\n"
    )
    values, misses = capture_values(step.capture, gpu, lab)
    assert not misses and values["weights_mib"].value == 8148.56


class Replay(threading.Thread):
    """A socket that answers one HTTP request with a recorded server-sent stream."""

    def __init__(self, body: bytes) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.body = body

    def run(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Connection: close\r\n\r\n" + self.body)  # fmt: skip
        self.sock.close()


@pytest.mark.parametrize("name", ["completion-stream.txt", "completion-stream-reuse.txt"])
def test_a_recorded_stream_gives_its_timings_and_tokens(
    kit: dict[str, ModuleType], name: str
) -> None:
    body = (FIX / name).read_bytes()
    chunks = [json.loads(ln[5:]) for ln in body.decode().splitlines() if ln.startswith("data:")]
    replay = Replay(body)
    replay.start()
    got = kit["server"].Server(port=replay.port, timeout=10).complete("prompt", 4, True)
    replay.join(5)
    last = chunks[-1]
    assert got.cache_n == last["timings"]["cache_n"] and got.prompt_n == last["timings"]["prompt_n"]
    assert got.prompt_tokens == last["tokens_evaluated"]
    assert got.tokens == [t for c in chunks[:-1] for t in c["tokens"]]
    assert got.slot == last["id_slot"] and 0 < got.ttft <= got.seconds
    if name.endswith("reuse.txt"):  # the same manual, another question: the manual came cached
        assert got.cache_n > 0.9 * got.prompt_tokens


# --- step 1, on paper ---------------------------------------------------------------------


def test_paper_counts_follow_from_the_tokens(
    paper: dict[str, Any], enc: Any, prompts: ModuleType
) -> None:
    def tokens(text: str) -> list[int]:
        return list(enc.encode(text, allowed_special="all"))

    assert paper["tiny"] is True and sorted(paper["lengths"]) == ["1k", "2k", "4k", "8k"]
    for got in paper["lengths"].values():
        length = got["target"]  # --tiny: an eighth of 1,000 to 8,000
        sections = got["sections"]
        assert len(tokens(prompts.manual(sections, "00A"))) >= length
        assert len(tokens(prompts.manual(sections - 1, "00A"))) < length or sections == 1
        system = prompts.manual(sections, prompts.label(1, 0))
        ids = [tokens(prompts.render(prompts.messages(system, q))) for q in prompts.QUESTIONS[:4]]
        shared = [lcp(a, b) for a, b in zip(ids, ids[1:], strict=False)]
        assert got["later_llama_computed"] == sum(
            len(b) - s for b, s in zip(ids[1:], shared, strict=True)
        )
        assert got["later_block_computed"] == sum(
            len(b) - s // 16 * 16 for b, s in zip(ids[1:], shared, strict=True)
        )
        assert (
            got["later_block_computed"] - got["later_llama_computed"] == got["block_lost"] < 3 * 16
        )
    cases = paper["edits"]["cases"]
    assert cases["same"]["llama_reused"] == cases["same"]["tokens"] - 1  # the last is computed
    assert 0 < cases["date"]["first_difference"] < 10 and cases["date"]["block_reused"] == 0
    assert (
        cases["early"]["first_difference"]
        < cases["middle"]["first_difference"]
        < cases["late"]["first_difference"]
    )
    for c in cases.values():
        assert c["block_reused"] == min(c["first_difference"], c["tokens"] - 1) // 16 * 16
    mem = paper["memory"]
    cfg = config()
    assert (
        mem["bytes_per_token"]
        == 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    )
    assert mem["q8_0_4"]["cache"] == 4 * 9216 * mem["bytes_per_token"] == 5184 * MIB
    assert mem["bf16_4"]["left"] < mem["q8_0_4"]["left"] and mem["q8_0_4"]["left"] > 8 * 2**30


# --- the client scripts against the stand-in server ----------------------------------------


def counts(rows: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    return [(r["tokens"], r["cache_n"], r["prompt_n"]) for r in rows]


@pytest.fixture(scope="module")
def reuse(lab: Path, one_slot: int) -> dict[str, Any]:
    out = run(
        lab, "reuse.py", "--port", str(one_slot), "--device", "cpu", "--tiny", "--rounds", "2"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {"stdout": out.stdout, **results(lab, "reuse")}


def test_reuse_counts_what_the_real_server_counted(
    reuse: dict[str, Any], paper: dict[str, Any]
) -> None:
    real = json.loads((FIX / "reuse.json").read_text())
    assert sorted(reuse["lengths"]) == sorted(real["lengths"])
    for length, got in reuse["lengths"].items():
        want = real["lengths"][length]
        # requests 2 to 4 of a round: every token count as llama.cpp gave it, cache on and off
        assert counts(got["requests_on"])[1:] == counts(want["requests_on"])[1:]
        assert counts(got["requests_off"]) == counts(want["requests_off"])
        # ... and as step 1 counted them on paper with Qwen's tokenizer
        assert got["later_computed_on"] == paper["lengths"][length]["later_llama_computed"]
        assert got["later_block_computed"] == paper["lengths"][length]["later_block_computed"]
        assert got["later_computed_off"] == got["later_tokens"] > got["later_computed_on"]
        # each time with its spread: 3 later requests a round, 2 rounds
        assert got["ttft_on_later"]["n"] == got["ttft_off_later"]["n"] == 6
        assert got["speedup"]["min"] <= got["speedup"]["median"] <= got["speedup"]["max"]
    assert reuse["peak_gpu_memory"] is None  # no nvidia-smi here
    assert "reuse cut the wait" in reuse["stdout"]


def test_limits_stop_where_the_real_server_stopped(
    lab: Path, one_slot: int, paper: dict[str, Any]
) -> None:
    out = run(
        lab, "limits.py", "--port", str(one_slot), "--device", "cpu", "--tiny", "--rounds", "2"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    got, real = (
        results(lab, "limits")["cases"],
        json.loads((FIX / "limits.json").read_text())["cases"],
    )
    for name, case in got.items():
        assert (case["cache_n"], case["prompt_n"]) == (
            real[name]["cache_n"],
            real[name]["prompt_n"],
        )
        assert case["ttft"]["n"] == 2
    for name in ("early", "middle", "late", "date", "same"):  # measured as counted on paper
        assert got[name]["cache_n"] == paper["edits"]["cases"][name]["llama_reused"]
        assert got[name]["block_reused"] == paper["edits"]["cases"][name]["block_reused"]


@pytest.mark.parametrize(("slots", "name"), [(1, "slots_1"), (4, "slots_4")])
def test_a_burst_computes_the_manual_once_per_slot(
    lab: Path, slots: int, name: str, request: pytest.FixtureRequest
) -> None:
    port = request.getfixturevalue("one_slot" if slots == 1 else "four_slots")
    out = run(lab, "slots.py", "--port", str(port), "--device", "cpu", "--tiny", "--rounds", "1",
              "--name", name)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    got, real = results(lab, name), json.loads((FIX / f"{name}.json").read_text())
    for mode in ("burst", "warm"):
        passes = got["modes"][mode]["passes"]["median"]
        assert passes == pytest.approx(real["modes"][mode]["passes"]["median"], abs=0.05)
        assert passes == pytest.approx(slots, abs=0.05)
        assert got["modes"][mode]["slots_used"] == real["modes"][mode]["slots_used"] == slots


def test_lab_yml_captures_resolve(
    lab: Path, gguf: dict[str, Any], paper: dict[str, Any], reuse: dict[str, Any]
) -> None:
    """Every JSON capture of the steps that ran here finds its value (peak GPU memory excepted:
    nvidia-smi is not here); slots_1 and slots_4 come from the test above."""
    loaded = load_lab(lab / "lab.yml")
    assert [s.id for s in loaded.lab.steps] == [
        "paper", "gguf", "server-1", "reuse", "limits", "burst-1", "server-1-stop", "server-4",
        "burst-4", "server-4-stop"]  # fmt: skip
    assert loaded.lab.include == ["../common/labkit", "../common/llamakit"]
    assert loaded.lab.builds["llama.cpp"].programs == [
        "llama-server",
        "llama-bench",
        "llama-perplexity",
    ]
    for step in loaded.lab.steps:
        if not any(c.json_file for c in step.capture.values()):
            continue
        if not all((lab / c.json_file).exists() for c in step.capture.values() if c.json_file):
            continue
        values, misses = capture_values(step.capture, "", lab)
        assert all("peak_gpu_memory" in m for m in misses), misses
        assert values, step.id
