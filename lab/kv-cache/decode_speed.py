"""Step 4: how fast one conversation decodes as the KV cache behind it grows.

For each new token the GPU reads every weight once, plus the keys and values of every
earlier token. Reading bytes is the bottleneck, so the bytes-bound speed is

    tokens per second = copy bandwidth / (weight bytes + tokens cached x KV bytes per token)

We measure the copy bandwidth, then the decode speed at several depths, for both models.
Plain eager decoding is limited by Python and kernel launches, not by bytes, so the numbers
come from the compact decoder in decoder.py (same weights, CUDA graphs); transformers'
eager speed is printed once per model for comparison.

Every model is built, measured and freed in turn, so the step needs the memory of one model
(weights and a 32,769-position cache: under 20 GiB for Qwen3-8B), not of both.

    python3 decode_speed.py
    python3 decode_speed.py --weights Qwen/Qwen3-0.6B   # one model, real weights
    python3 decode_speed.py --device cpu --tiny
"""

from __future__ import annotations

import argparse
import copy
import time
import weakref
from typing import Any

import torch
from transformers import DynamicCache

from decoder import Decoder
from kvlab import (
    MODELS,
    GpuMemory,
    add_device_args,
    build_model,
    check,
    describe,
    human,
    kv_bytes_per_token,
    median_seconds,
    model_key,
    model_name,
    pick_device,
    release,
    weight_bytes_on_paper,
    write_results,
)

DEPTHS, TINY_DEPTHS = [0, 2_048, 8_192, 16_384, 32_768], [0, 64, 256, 512, 1_024]
TARGET = 0.75  # Qwen3-8B at depth 0: at least this fraction of the bytes-bound speed


def copy_bandwidth(device: torch.device, nbytes: int) -> float:
    """Bytes read plus bytes written per second by a large device-to-device copy."""
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    seconds = (
        median_seconds(lambda _: [dst.copy_(src) for _ in range(10)], device, 10, warmup=2) / 10
    )
    return 2 * nbytes / seconds


def engine_eager(model: Any, device: torch.device, repeats: int) -> float:
    """transformers as it comes: one forward call per token, no graph. Tokens per second."""
    cache = DynamicCache()
    ids = torch.tensor([[1]], device=device)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, use_cache=True)
        return 1 / median_seconds(
            lambda _: model(input_ids=ids, past_key_values=cache, use_cache=True), device, repeats
        )


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
    dec = Decoder(model, depths[-1] + 1, compiled)
    for i, kv in enumerate(prefix):  # start our decoder from transformers' cache
        dec.cache[i, :, :, :16] = kv
    dec.token.fill_(int(ids[0, 16]))
    ours = dec.step(16)[0].float()
    diff, engine_diff = relative(ours, exact), relative(bf16, exact)
    del prefix, ours, bf16, exact
    eager = engine_eager(model, device, 5 if cuda else 1)
    print(f"\n{name}: {weights}")
    print(
        f"  weights read per token {dec.weight_bytes():,} B ({human(dec.weight_bytes())}),"
        f" KV per token {per_token:,} B"
    )
    print(f"  transformers, eager, one call per token, depth 0: {eager:8.1f} tok/s")
    print(f"  our decoder ({how};")
    print(f"  K slices per matrix-vector product, fastest measured: {dec.splits}):")
    print(
        "  check: next-token logits after 16 tokens against transformers' layers run in float32"
        " (one layer at a time):"
    )
    print(f"    ours off by {diff:.4f}, transformers' own bf16 run by {engine_diff:.4f}")
    check(engine_diff < 0.25, f"the float32 reference is {engine_diff:.4f} off transformers' bf16")
    check(diff < 2 * engine_diff + 0.01, f"the compact decoder is off by {diff:.4f}")
    print(
        f"  {'depth':>8}  {'measured':>12}  {'bytes-bound':>12}  {'fraction':>8}  {'ms/token':>8}"
    )
    row: dict[str, Any] = {
        "weight_bytes": dec.weight_bytes(),
        "kv_bytes_per_token": per_token,
        "eager_tok_s": eager,
        "logits_rel_diff": diff,
        "engine_logits_rel_diff": engine_diff,
        "depths": {},
        "splits": dec.splits,
    }
    for depth in depths:
        run = dec.graph(depth)
        steps, repeats = (50, 5) if cuda else (1, 1)
        seconds = median_seconds(lambda _, r=run, n=steps: [r() for _ in range(n)], device, repeats)
        seconds /= steps
        bound = bw / (dec.weight_bytes() + depth * per_token)
        tok_s = 1 / seconds
        print(
            f"  {depth:>8,}  {tok_s:>8.1f} tok/s  {bound:>6.1f} tok/s  {tok_s / bound:>7.1%}"
            f"  {seconds * 1e3:>8.3f}"
        )
        # (On the CPU a tiny model's speed is set by Python, not bytes, and both timings swing
        # with whatever else runs: only the GPU's is held to the bound.)
        check(
            0 < tok_s and (not cuda or tok_s < 1.05 * bound),
            f"{tok_s:.1f} tok/s is faster than the bytes allow ({bound:.1f})",
        )
        row["depths"][str(depth)] = {
            "tok_s": tok_s,
            "bound_tok_s": bound,
            "fraction": tok_s / bound,
            "percent": 100 * tok_s / bound,
            "seconds_per_token": seconds,
        }
    d0, dn = row["depths"][str(depths[0])], row["depths"][str(depths[3])]
    row["slowdown"] = d0["tok_s"] / dn["tok_s"]
    row["slowdown_predicted"] = d0["bound_tok_s"] / dn["bound_tok_s"]
    print(
        f"  from depth 0 to {depths[3]:,}: {row['slowdown']:.3f}x slower measured,"
        f" {row['slowdown_predicted']:.3f}x predicted by the bytes"
        f" ({row['slowdown'] / row['slowdown_predicted']:.1%} of it)"
    )
    print(
        f"  ({time.perf_counter() - start:.0f} s for this model, compiling and recording included)"
    )
    on_paper = weight_bytes_on_paper(cfg), dec.cache.nbytes
    what = (
        f"weights of {name} {human(on_paper[0])} + our decoder's cache of {depths[-1] + 1:,}"
        f" positions {human(on_paper[1])} (compiling and CUDA graphs add a little)"
    )
    return row, sum(on_paper), what, [weakref.ref(model), weakref.ref(dec)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument("--models", nargs="*", choices=list(MODELS), help="default: both")
    parser.add_argument(
        "--bandwidth", type=float, help="use this copy bandwidth (B/s) instead of measuring"
    )
    parser.add_argument("--no-compile", action="store_true", help="graphs of unfused operations")
    args = parser.parse_args()
    check(not (args.weights and args.models), "give --weights or --models, not both")
    device = pick_device(args.device)
    print(describe(device))
    memory = GpuMemory(device)
    depths, cuda = (TINY_DEPTHS if args.tiny else DEPTHS), device.type == "cuda"
    copy_bytes = 2**22 if args.tiny else 2**32
    bw = args.bandwidth or copy_bandwidth(device, copy_bytes)
    print(f"copy bandwidth: {bw / 1e12:.2f} TB/s (device-to-device copy, bytes read + written)")
    check(0 < bw < 6e12, f"a copy bandwidth of {bw / 1e12:.2f} TB/s is beyond any memory of today")
    if cuda:
        torch.cuda.empty_cache()  # the copy's two buffers go back to the GPU
    memory.phase()
    compiled = cuda and not args.no_compile
    how = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how += ", small operations fused and products autotuned by torch.compile" if compiled else ""
    results: dict[str, Any] = {
        "device": device.type,
        "copy_bandwidth": bw,
        "decoder": how,
        "copy_bandwidth_gb_s": bw / 1e9,
    }
    setup = {"depths": depths, "compiled": compiled, "how": how, "bw": bw}
    # The copy's source and destination, unless a bandwidth was given.
    peaks = [(0 if args.bandwidth else 2 * copy_bytes, "the copy test's two buffers")]
    if args.weights:  # one model, named by its weights
        todo = {model_key(args.weights): ("", model_name("", args.weights))}
    else:
        todo = {key: (MODELS[key], MODELS[key]) for key in args.models or MODELS}
    for key, (folder, name) in todo.items():
        results[key], paper, what, gone = measure(folder, name, args, device, setup)
        allocated, reserved = memory.phase()
        results[key]["peak_gpu_memory"] = {
            "allocated": allocated,
            "reserved": reserved,
            "paper": paper,
        }
        if cuda:
            print(
                f"  peak while measuring {name}: {allocated:,} B allocated ({human(allocated)}),"
                f" {reserved:,} B reserved; on paper {paper:,} B ({human(paper)})"
            )
        peaks.append((paper, what))
        if compiled:
            torch._dynamo.reset()  # compiled code for this model's shapes: not needed again
        results[key]["left_after_free_bytes"] = release(device, name, *gone)  # one at a time

    if "qwen3-8b" in results:  # the lab's own aim, kept in the JSON for its author, not printed
        got = results["qwen3-8b"]["depths"]["0"]["fraction"]
        results["target"] = {"fraction_of_bound": TARGET, "reached": got >= TARGET}
    results["peak_gpu_memory"] = memory.report(*max(peaks))
    print(f"wrote {write_results('decode', results)}")


if __name__ == "__main__":
    main()
