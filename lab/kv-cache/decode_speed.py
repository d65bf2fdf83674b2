"""Step 4: how fast one conversation decodes as the KV cache behind it grows.

For each new token the GPU reads every weight once, plus the keys and values of every
earlier token. Reading bytes is the bottleneck, so the bytes-bound speed is

    tokens per second = copy bandwidth / (weight bytes + tokens cached x KV bytes per token)

We measure the copy bandwidth, then the decode speed at several depths, for both models.
Plain eager decoding is limited by Python and kernel launches (the host), not by bytes, so the
numbers come from the lab kit's compact decoder (labkit/decoder.py: the same weights, one CUDA
graph per step), timed on the GPU's own clock: CUDA events around 50 replays, 10 times, after a
warm-up; each speed is written with its spread (median, quartiles, extremes). transformers'
eager speed is printed once per model for comparison, timed as a user waits.

Every model is built, measured and freed in turn, so the step needs the memory of one model
(weights and a 32,769-position cache: under 20 GiB for Qwen3-8B), not of both.

    python3 decode_speed.py
    python3 decode_speed.py --weights Qwen/Qwen3-0.6B   # one model, real weights
    python3 decode_speed.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import copy
import textwrap
import time
import warnings
import weakref
from typing import Any

import torch
from labkit import gpuwatch, timing
from labkit import memory as gpu_memory
from labkit.checks import check
from labkit.configs import kv_bytes_per_token, weight_bytes
from labkit.decoder import Decoder
from labkit.results import write_results
from labkit.timing import Spread
from labkit.units import byte_rate, human
from transformers import DynamicCache

from kvlab import build_model, start

DEPTHS, TINY_DEPTHS = [0, 2_048, 8_192, 16_384, 32_768], [0, 64, 256, 512, 1_024]
TARGET = 0.75  # Qwen3-8B at depth 0: at least this fraction of the bytes-bound speed
# Per depth, `REPEATS` samples of `STEPS` graph replays back to back, timed by CUDA events
STEPS, REPEATS = 50, 10


def engine_eager(model: Any, device: torch.device, repeats: int) -> Spread:
    """transformers as it comes: one forward call per token, no graph. Tokens per second, as a
    user waits (host clock): at one token per call Python and the launch of every small kernel
    set the pace, not the GPU's memory."""
    cache = DynamicCache()
    ids = torch.tensor([[1]], device=device)
    with torch.no_grad():
        seconds = timing.time_wall(
            lambda: model(input_ids=ids, past_key_values=cache, use_cache=True),
            device,
            repeats,
            warmup=2,
        )
    return timing.derive(seconds, lambda s: 1 / s)


@torch.no_grad()
def float32_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """The next-token logits after `ids` from transformers' own Qwen3 layers run in float32.

    Each layer is copied to float32 just before it runs and dropped after it, so the reference
    never holds more than one layer in float32: the whole of Qwen3-8B in float32 would take
    30.5 GiB, more than a 24 GB card has.
    """
    inner, n = model.model, ids.shape[1]
    pos = torch.arange(n, device=ids.device)[None]
    h = inner.embed_tokens(ids).float()
    rope = inner.rotary_emb(h, pos)  # cos and sin in float32, like h
    # causal and additive: right for whichever attention kernel transformers picks
    mask = torch.full((n, n), torch.finfo(torch.float32).min, device=ids.device).triu(1)
    for layer in inner.layers:
        out = copy.deepcopy(layer).float()(
            h, attention_mask=mask[None, None], position_ids=pos, position_embeddings=rope
        )
        h = out[0] if isinstance(out, tuple) else out
    h = copy.deepcopy(inner.norm).float()(h[:, -1])
    w = model.lm_head.weight  # in slices of rows, so only one slice is in float32 at a time
    return torch.cat([h @ w[i : i + 8192].float().t() for i in range(0, w.shape[0], 8192)], -1)[0]


@torch.no_grad()
def engine_bf16(model: Any, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """transformers in bf16: all but the last token as a prefill, then one decode step.

    Returns the logits of that step and the keys and values of the prefill, per layer.
    """
    cache = DynamicCache()
    model(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True)
    prefix = [torch.stack((layer.keys[0], layer.values[0])) for layer in cache.layers]
    logits = model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True).logits[0, -1]
    return logits.float(), prefix


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """|a - b| / |b|, over the whole vocabulary."""
    return ((a - b).norm() / b.norm()).item()


def kernel_profile(run: Any, device: torch.device, calls: int = 20) -> dict[str, Any]:
    """Where the GPU's time in one decode step goes: the kernels of `calls` replays of the step,
    by the profiler (CUPTI), as microseconds per step for each kernel name, slowest first. Two
    runs that chose other kernels show it here; the same kernels each slower point at the GPU (its
    clocks)."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the profiler's notes on its cycles: not ours
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    run()
                torch.cuda.synchronize(device)
            rows = [  # (key_averages warns too, so it stays inside)
                {"name": e.key, "us": e.self_device_time_total / calls, "calls": e.count / calls}
                for e in prof.key_averages()
                if e.self_device_time_total > 0
            ]
    except (RuntimeError, AssertionError, AttributeError) as error:  # costs this table only
        return {"error": f"{type(error).__name__}: {error}"[:300], "kernels": [], "total_us": 0.0}
    rows.sort(key=lambda r: -r["us"])
    return {"kernels": rows, "total_us": sum(r["us"] for r in rows)}


def print_kernels(profile: dict[str, Any], seconds: float, top: int = 6) -> None:
    """The step's slowest kernels, and how much of the measured step the kernels fill."""
    if not profile["kernels"]:
        print(f"  kernels of one step: not profiled ({profile.get('error', 'no kernel seen')})")
        return
    busy = profile["total_us"] / (seconds * 1e6)
    print(
        f"  kernels of one step, depth 0: {profile['total_us']:.1f} µs busy of"
        f" {seconds * 1e6:.1f} µs ({busy:.1%}); slowest, µs per step:"
    )
    for row in profile["kernels"][:top]:
        name = row["name"] if len(row["name"]) <= 76 else row["name"][:73] + "..."
        print(f"    {row['us']:>8.1f}  x{row['calls']:<4g} {name}")


def sweep_depth(
    dec: Decoder, depth: int, row: dict[str, Any], per_token: int, bw: Any, device: torch.device
) -> None:
    """Time one decode step at `depth` cached tokens and add its row to `row["depths"]`."""
    cuda, read = device.type == "cuda", row["weight_bytes"]
    run = dec.graph(depth)
    # on the GPU: CUDA events around STEPS replays of the step's graph, REPEATS times
    seconds = timing.time_gpu(
        run,
        device,
        repeats=REPEATS if cuda else 3,
        warmup=2 if cuda else 1,
        calls=STEPS if cuda else 1,
    )
    bytes_read = read + depth * per_token
    # (On the CPU a tiny model's speed is set by Python, not bytes, and both timings swing
    # with whatever else runs: only the GPU's is held to the bound.)
    tok_s, bound, fraction = timing.bytes_bound(seconds, bw, bytes_read, held=cuda)
    print(
        f"  {depth:>8,}  {tok_s.median:>8.1f} tok/s  [{tok_s.min:>6.1f} to {tok_s.max:>6.1f}]"
        f"  {float(bound):>6.1f} tok/s  {fraction.median:>7.1%}  {seconds.median * 1e3:>8.3f}"
    )
    row["depths"][str(depth)] = {
        "tok_s": tok_s,
        "bound_tok_s": bound,
        "bytes_per_token": bytes_read,
        "fraction": fraction,
        "percent": timing.derive(fraction, lambda f: 100 * f),
        "seconds_per_token": seconds,
    }


def measure(
    folder: str, name: str, args: argparse.Namespace, device: torch.device, setup: dict[str, Any]
) -> tuple[dict[str, Any], int, str, list[Any]]:
    """Time one model at every depth; return its row, its peak on paper with how that sum is
    made up, and weak references to what must be gone once this returns."""
    depths, compiled, how, bw = setup["depths"], setup["compiled"], setup["how"], setup["bw"]
    cuda = device.type == "cuda"
    start = time.perf_counter()
    model, cfg, weights = build_model(folder, device, args.tiny, args.weights)
    per_token = kv_bytes_per_token(cfg)
    # The check, before the decoder and its cache take their memory: one decode step after 16
    # tokens, from transformers in bf16 and from its layers in float32.
    ids = torch.randint(0, model.config.vocab_size, (1, 17), device=device)
    exact = float32_logits(model, ids)
    bf16, prefix = engine_bf16(model, ids)
    if cuda:
        torch.cuda.empty_cache()  # the float32 copies' blocks go back before the decoder's own
    # Products go to cuBLAS, not to the compiler's autotuning: that times close candidates at
    # compile time and may keep a different one each compile (three compiles of Qwen3-0.6B on one
    # H200 decoded 7 % apart that way, 0.5 % with cuBLAS): a draw that no re-run repeats.
    dec = Decoder.from_transformers(model, depths[-1] + 1, fuse=compiled, autotune=False)
    dec.fill_random()  # random keys and values: no timing runs on zeros
    for i, kv in enumerate(prefix):  # start our decoder from transformers' cache
        dec.cache[i, :, :, :16] = kv
    dec.token.fill_(int(ids[0, 16]))
    ours = dec.step(16)[0].float()
    diff, engine_diff = relative(ours, exact), relative(bf16, exact)
    del prefix, ours, bf16, exact
    eager = engine_eager(model, device, 20 if cuda else 3)
    print(f"\n{name}: {weights}")
    read = dec.weight_bytes_read()
    print(f"  weights read per token {read:,} B ({human(read)}), KV per token {per_token:,} B")
    print(
        f"  transformers, eager, one call per token, depth 0: {eager.median:8.1f} tok/s"
        f" [{eager.min:.1f} to {eager.max:.1f}]\n    (host-bound: Python and the launch of every"
        " small kernel set this pace, not the GPU's memory)"
    )
    splits = ", ".join(f"{k}={v}" for k, v in dec.splits.items())
    said = f"our decoder ({how}; K slices per product, as timed at start-up: {splits}):"
    print(textwrap.fill(said, 98, initial_indent="  ", subsequent_indent="  "))
    print(
        "  check: next-token logits after 16 tokens, against transformers' layers in float32"
        " (one at a time):"
    )
    print(f"    ours off by {diff:.4f}, transformers' own bf16 run by {engine_diff:.4f}")
    check(engine_diff < 0.25, f"the float32 reference is {engine_diff:.4f} off transformers' bf16")
    check(diff < 2 * engine_diff + 0.01, f"the compact decoder is off by {diff:.4f}")
    print(
        f"  {'depth':>8}  {'measured':>12}  {'[min to max]':>16}  {'bytes-bound':>12}"
        f"  {'fraction':>8}  {'ms/token':>8}"
    )
    row: dict[str, Any] = {
        "weight_bytes": read,
        "kv_bytes_per_token": per_token,
        "eager_tok_s": eager,
        "logits_rel_diff": diff,
        "engine_logits_rel_diff": engine_diff,
        "depths": {},
        "splits": dec.splits,
    }
    watch = gpuwatch.Watch(device)
    with watch:
        for depth in depths:
            sweep_depth(dec, depth, row, per_token, bw, device)
    row["gpu_under_load"] = watch.summary()
    if cuda:
        print(textwrap.indent(gpuwatch.describe(row["gpu_under_load"]), "  "))
        row["kernels_d0"] = kernel_profile(dec.graph(0), device)
        print_kernels(row["kernels_d0"], row["depths"]["0"]["seconds_per_token"].median)
    d0, dn = row["depths"][str(depths[0])], row["depths"][str(depths[3])]
    row["slowdown"] = timing.ratio(d0["tok_s"], dn["tok_s"])
    # the bandwidth cancels: the ratio of the bytes read per token, exact
    row["slowdown_predicted"] = dn["bytes_per_token"] / d0["bytes_per_token"]
    print(
        f"  from depth 0 to {depths[3]:,}: {row['slowdown'].median:.3f}x slower measured"
        f" [{row['slowdown'].min:.3f} to {row['slowdown'].max:.3f}],"
        f"\n  {row['slowdown_predicted']:.3f}x predicted by the bytes"
        f" ({row['slowdown'].median / row['slowdown_predicted']:.1%} of it)"
    )
    print(
        f"  ({time.perf_counter() - start:.0f} s for this model, compiling and recording included)"
    )
    on_paper = weight_bytes(cfg), dec.cache_nbytes()
    what = (
        f"weights of {name} {human(on_paper[0])} + our decoder's cache of {depths[-1] + 1:,}"
        f" positions {human(on_paper[1])} (compiling and CUDA graphs add a little)"
    )
    return row, sum(on_paper), what, [weakref.ref(model), weakref.ref(dec)]


def main() -> None:
    args, todo, device = start(__doc__, speed=True)
    memory = gpu_memory.PeakMemory(device)
    depths, cuda = (TINY_DEPTHS if args.tiny else DEPTHS), device.type == "cuda"
    copy_bytes = 2**22 if args.tiny else 2**32
    bw = timing.bandwidth(device, copy_bytes, args.bandwidth)
    if isinstance(bw, Spread):
        print(
            f"copy bandwidth: {byte_rate(bw.median)} [{byte_rate(bw.min)} to {byte_rate(bw.max)},"
            f" {bw.n} repeats]\n  (a device-to-device copy, bytes read + written)"
        )
    else:
        print(f"copy bandwidth: {byte_rate(bw)} (given)")
    memory.part()
    compiled = cuda and not args.no_compile
    how = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how += ", small operations fused by torch.compile, products by cuBLAS" if compiled else ""
    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,  # the shrunk models of --device cpu --tiny: not the page's sizes
        "copy_bandwidth": bw,
        "decoder": how,
        "copy_bandwidth_gb_s": timing.derive(bw, lambda b: b / 1e9),
    }
    setup = {"depths": depths, "compiled": compiled, "how": how, "bw": bw}
    # The copy's source and destination, unless a bandwidth was given.
    peaks = [(0 if args.bandwidth else 2 * copy_bytes, "the copy test's two buffers")]
    for key, (folder, name) in todo.items():
        before = gpu_memory.allocated(device)
        results[key], paper, what, gone = measure(folder, name, args, device, setup)
        part = memory.part()
        results[key]["peak_gpu_memory"] = {**part, "paper": paper}
        if cuda:
            print(
                f"  peak while measuring {name}: {part['allocated']:,} B allocated"
                f" ({human(part['allocated'])}),\n    {part['reserved']:,} B reserved;"
                f" on paper {paper:,} B ({human(paper)})"
            )
        peaks.append((paper, what))
        if compiled:
            torch._dynamo.reset()  # compiled code for this model's shapes: not needed again
        # one model at a time: this one must be gone before the next is built
        results[key]["left_after_free_bytes"] = gpu_memory.check_freed(
            device, before, name, gone, strict=False
        )

    if "qwen3-8b" in results:  # the lab's own aim, kept in the JSON for its author, not printed
        got = results["qwen3-8b"]["depths"]["0"]["fraction"].median
        results["target"] = {"fraction_of_bound": TARGET, "reached": got >= TARGET}
    results["peak_gpu_memory"] = memory.report(*max(peaks))
    print(f"wrote {write_results('decode', results)}")


if __name__ == "__main__":
    main()
