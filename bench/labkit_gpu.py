"""The lab kit's GPU paths, run for real on a CUDA GPU: what the CPU tests cannot reach.

Every lab builds on `lab/common/labkit/`; its CUDA-only branches (events, graphs on the side
stream, split-K tuning, torch.compile, peak-memory counters, freeing) run only on a GPU host. This
bench runs each of them once at the sizes the labs use and checks what it can:

    correctness   the decoder (each attention design, bf16 and fp8 caches; compiled, graphed)
                  against the textbook model on the GPU, and against transformers' own Qwen3
    timing        time_gpu's spread on a matrix product; copy_bandwidth; a Qwen3-8B decode step
                  replayed as a CUDA graph at depths 0 and 4,096 (tok/s, % of the bytes bound),
                  twice, to show the step's run-to-run spread on one host
    memory        PeakMemory's parts and report, check_freed after a decoder with graphs

    python3 bench/labkit_gpu.py [--out results.json] [--quick]

Prints one line per check and writes every figure to --out; exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab" / "common"))

import torch  # noqa: E402
from labkit import facts, memory, reference, timing  # noqa: E402
from labkit.decoder import Decoder, random_weights  # noqa: E402
from labkit.shapes import Shape  # noqa: E402

QWEN3_8B = Shape("qwen3-8b", 36, 4096, 32, 128, 12288, 151936, 1e6, 1e-6, kv_heads=8, qk_norm=True)
SMALL = {
    "gqa": Shape("gqa", 2, 512, 8, 64, 1024, 1000, 1e4, 1e-6, kv_heads=2, qk_norm=True),
    "mqa": Shape("mqa", 2, 512, 8, 64, 1024, 1000, 1e4, 1e-6, kv_heads=1),
    "sliding": Shape("sliding", 2, 512, 8, 64, 1024, 1000, 1e4, 1e-6, kv_heads=2, window=8),
    "mla": Shape("mla", 2, 512, 8, 64, 1024, 1000, 1e4, 1e-6, kv_lora_rank=128, rope_dim=32),
}
failures: list[str] = []
figures: dict[str, Any] = {}


def expect(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def designs(dev: Any) -> None:
    """Each design, compiled and graphed, against the textbook model in float32 on the GPU."""
    for name, shape in SMALL.items():
        for cache in ("bf16", "fp8") if name in ("gqa", "mqa") else ("bf16",):
            w = random_weights(shape, dev, seed=1)
            tokens = torch.randint(0, shape.vocab, (24,), device=dev)
            want = reference.reference_logits(shape, w, tokens)
            dec = Decoder(shape, w, slots=32, fuse=True, split_k=True, cache=cache)
            got = reference.decode_tokens(dec, tokens)
            err = reference.relative_error(got, want)
            bound = 0.08 if cache == "fp8" else 0.03
            figures[f"design.{name}.{cache}.relative_error"] = err
            expect(err < bound, f"{name} {cache}: decoder vs textbook model, error {err:.4f}")
            # a graph replay of the next step writes the token the eager step writes
            last = tokens[-1:]
            dec.token.copy_(last)
            dec.step(24)
            eager = dec.token.clone()
            run = dec.graph(24)
            dec.token.copy_(last)
            run()
            same = bool((dec.token == eager).all())
            expect(same, f"{name} {cache}: the graph's step writes the eager step's token")
    memory.release(dev)


def against_transformers(dev: Any) -> None:
    """The decoder on a transformers Qwen3's own weights gives the model's own next token."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, head_dim=64, vocab_size=1000, max_position_embeddings=256,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    tokens = torch.randint(0, 1000, (16,), device=dev)
    with torch.no_grad():
        want = model(tokens[None]).logits[0, -1].float()
    dec = Decoder.from_transformers(model, slots=32, fuse=True, autotune=False)
    got = reference.decode_tokens(dec, tokens)
    err = reference.relative_error(got, want)
    figures["transformers.relative_error"] = err
    expect(err < 0.03, f"transformers Qwen3 vs the decoder on its weights, error {err:.4f}")
    with torch.no_grad():
        again = model(tokens[None]).logits[0, -1].float()
    expect(reference.relative_error(again, want) < 1e-3, "the model still works after the join")
    del model, dec
    memory.release(dev)


def timers(dev: Any) -> None:
    a = torch.randn(4096, 4096, dtype=torch.bfloat16, device=dev)
    s = timing.time_gpu(lambda: a @ a, dev, repeats=9)
    flops = timing.derive(s, lambda t: 2 * 4096**3 / t)
    figures["matmul_4096.seconds"] = s.as_dict()
    figures["matmul_4096.flops"] = flops.as_dict()
    expect(s.n == 9 and s.min <= s.q1 <= s.median <= s.q3 <= s.max, f"time_gpu spread {s}")
    peak = facts.card("h200").bf16_flops
    expect(
        0.2 * peak < flops.median < 1.2 * peak, f"4096² bf16 matmul at {flops.median:.3e} FLOP/s"
    )
    bw = timing.copy_bandwidth(dev, 1 << 30)
    figures["copy_bandwidth"] = bw.as_dict()
    data = facts.card("h200").bandwidth
    expect(0.5 * data < bw.median < 1.05 * data, f"copy bandwidth {bw.median / 1e12:.2f} TB/s")
    wall = timing.time_wall(lambda: (a @ a).sum().item(), dev, repeats=5)
    expect(wall.median >= s.median, f"wall time {wall.median * 1e3:.3f} ms ≥ events' time")


def decode_8b(dev: Any, quick: bool) -> None:
    """Qwen3-8B's decode step as a CUDA graph, at two depths, twice: the spread between runs."""
    before = memory.allocated(dev)
    ref = _decode_8b(dev, quick)
    left = memory.check_freed(dev, before, "the 8B decoder", [ref], strict=False)
    figures["decode.left_after_free"] = left
    expect(abs(left) <= memory.LEFT_TOLERANCE, f"freed: {left:+,} B left")


def _decode_8b(dev: Any, quick: bool) -> Any:
    peak = memory.PeakMemory(dev)
    dec = Decoder.random(QWEN3_8B, dev, slots=8192, fuse=True, autotune=not quick)
    dec.fill_random()
    figures["decode.splits"] = dict(dec.splits)
    read = dec.weight_bytes_read()
    bound = facts.card("h200").bandwidth
    for depth in (0, 4096):
        run = dec.graph(depth)
        for attempt in (1, 2):
            s = timing.time_gpu(run, dev, repeats=15, warmup=3)
            moved = read + QWEN3_8B.cache_bytes(depth + 1)
            share = timing.derive(s, lambda t, moved=moved: moved / t / bound)
            key = f"decode.depth_{depth}.run_{attempt}"
            figures[key] = {"seconds": s.as_dict(), "share_of_bound": share.as_dict()}
            print(
                f"     depth {depth:>5,} run {attempt}: {1 / s.median:6.1f} tok/s,"
                f" {share.median:.1%} of the bytes bound (spread {s.relative:.1%})",
                flush=True,
            )
            expect(0.3 < share.median < 1.0, f"decode at depth {depth}: share of bound plausible")
    tokens = torch.randint(0, QWEN3_8B.vocab, (512,), device=dev)
    pre = timing.time_gpu(lambda: dec.prefill(tokens), dev, repeats=5, warmup=2, calls=1)
    figures["prefill_512.seconds"] = pre.as_dict()
    print(f"     prefill of 512 tokens: {pre.median * 1e3:.2f} ms (eager)", flush=True)
    got = peak.report(paper=read + dec.cache_nbytes(), what="weights + cache")
    figures["decode.peak"] = got
    expect(got["allocated"] >= read, "the peak holds at least the weights")
    return weakref.ref(dec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("labkit-gpu.json"))
    parser.add_argument("--quick", action="store_true", help="no max-autotune for the 8B decoder")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: this bench runs the kit's GPU paths only", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    figures["gpu"] = torch.cuda.get_device_name(dev)
    figures["torch"] = torch.__version__
    start = time.perf_counter()
    for part in (timers, designs, against_transformers):
        t = time.perf_counter()
        try:
            part(dev)
        except Exception as error:  # one part's crash is a failure, the others still run
            expect(False, f"{part.__name__} raised {type(error).__name__}: {error}")
        figures[f"seconds.{part.__name__}"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    try:
        decode_8b(dev, args.quick)
    except Exception as error:
        expect(False, f"decode_8b raised {type(error).__name__}: {error}")
    figures["seconds.decode_8b"] = round(time.perf_counter() - t, 1)
    figures["seconds.total"] = round(time.perf_counter() - start, 1)
    figures["failures"] = failures
    args.out.write_text(json.dumps(figures, indent=2, default=str))
    print(f"{len(failures)} failures; {figures['seconds.total']} s; figures in {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
