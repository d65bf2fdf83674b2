"""Step 3: the grouped-query design with its cache kept in 8 bits instead of 16.

Each key and each value vector (one head, one token) is stored as float8 e4m3 numbers with
one float32 scale (its largest magnitude / 448), and turned back into bf16 when attention
reads it. The cache takes a little more than half the bytes. What does that buy, and what
does it cost?

  - memory: the cache of a 32,768-token conversation, reserved, against the formula;
  - error: a prompt is run once (its keys and values computed exactly), then the model
    decodes with the bf16 cache and with the fp8 cache, both fed the same tokens; the
    logits are compared step by step (relative error, and whether the top token agrees);
  - speed: decode tokens per second at depths 8,192 and 32,767 with each cache.

    python3 fp8_cache.py                       # about 1 minute on one H200
    python3 fp8_cache.py --device cpu --tiny   # a shrunken model, seconds
"""

from __future__ import annotations

import argparse
import statistics
import weakref
from typing import Any

import torch
from cachelab import (
    CONVERSATION,
    PeakMemory,
    Stopwatch,
    add_device_args,
    allocated,
    check,
    check_freed,
    copy_bandwidth,
    describe,
    designs,
    fp8_layout,
    human,
    pick_device,
    release_memory,
    time_calls,
    write_results,
)
from small_decoder import Decoder, build_weights, relative_error

PROMPT, STEPS = 8_192, 32
TINY_CONTEXT, TINY_PROMPT, TINY_STEPS = 256, 32, 6


def compare(
    d: Any, weights: dict[str, Any], device: torch.device, prompt: int, steps: int, fuse: bool
) -> dict[str, Any]:
    """Decode `steps` tokens after a `prompt`-token prompt with a bf16 and an fp8 cache."""
    exact = Decoder(d, weights, prompt + steps, fuse, "bf16")
    eight = Decoder(d, weights, prompt + steps, fuse, "fp8")
    ids = torch.randint(0, d.vocab, (prompt,), device=device)
    errors, agree, margins, worst = [], 0, [], 0.0
    with torch.no_grad():
        first = exact.prefill(ids)[0].float()
        eight.prefill(ids)
        token = first.argmax()
        for s in range(steps):
            exact.token.fill_(int(token))  # both are fed the bf16 run's choice: no drift
            eight.token.fill_(int(token))
            a, b = exact.step(prompt + s)[0].float(), eight.step(prompt + s)[0].float()
            errors.append(relative_error(b, a))
            worst = max(worst, float((b - a).abs().max()))
            agree += int(a.argmax() == b.argmax())
            top2 = a.topk(2).values
            margins.append(float(top2[0] - top2[1]))
            token = a.argmax()
    del exact, eight
    return {
        "prompt_tokens": prompt,
        "steps": steps,
        "rel_error_mean": statistics.fmean(errors),
        "rel_error_max": max(errors),
        "abs_error_max": worst,
        "argmax_agree": agree,
        "argmax_agree_fraction": agree / steps,
        "top2_margin_median": statistics.median(margins),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument(
        "--bandwidth", type=float, help="use this copy bandwidth (B/s) instead of measuring"
    )
    parser.add_argument(
        "--no-compile", action="store_true", help="leave the small operations unfused"
    )
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny)
    cuda = device.type == "cuda"
    print(describe(device))
    torch.manual_seed(0)
    peak = PeakMemory(device)
    bw = args.bandwidth or copy_bandwidth(device, 2**24 if args.tiny else 2**32)
    print(f"copy bandwidth: {bw / 1e12:.2f} TB/s (device-to-device copy, bytes read + written)")
    check(0 < bw < 6e12, f"a copy bandwidth of {bw / 1e12:.2f} TB/s is beyond any memory of today")
    context = TINY_CONTEXT if args.tiny else CONVERSATION
    prompt, steps = (TINY_PROMPT, TINY_STEPS) if args.tiny else (PROMPT, STEPS)
    d = next(x for x in designs(args.tiny) if x.name == "gqa")
    lay16, lay8 = d.layout(), fp8_layout(d)
    weights = build_weights(d, device, seed=1)
    fuse = not args.no_compile
    print(
        f"grouped-query design: {d.layers} layers, {d.kv_heads} key-value heads of {d.head_dim};"
        f" random bf16 weights, {human(d.weight_bytes())}"
    )
    print(
        f"bytes per token: bf16 {lay16.bytes_per_token():,} B; fp8 {lay8.bytes_per_token():,} B"
        f" = 2 x {d.layers} x {d.kv_heads} x ({d.head_dim} x 1 byte + a 4-byte scale)"
        f" ({lay8.bytes_per_token() / lay16.bytes_per_token():.1%})"
    )

    peak.reset()
    errors = compare(d, weights, device, prompt, steps, fuse)
    release_memory(device)  # so the next part's peak is its own
    print(f"\nafter a {prompt:,}-token prompt, {steps} decode steps fed the same tokens:")
    print(
        f"  logits, fp8 cache against bf16 cache: relative error {errors['rel_error_mean']:.4f} on average,"
        f" {errors['rel_error_max']:.4f} at worst (largest single difference {errors['abs_error_max']:.3f})"
    )
    print(
        f"  the top token agrees in {errors['argmax_agree']} of {steps} steps;"
        f" the median gap between the two top logits is {errors['top2_margin_median']:.3f}"
        " (random weights: real models are usually far more decided)"
    )
    check(
        errors["rel_error_mean"] < 0.25,
        f"the fp8 cache changes the logits by {errors['rel_error_mean']:.1%}",
    )

    timed: dict[str, Any] = {}
    for fmt, lay in (("bf16", lay16), ("fp8", lay8)):
        peak.reset()
        before = allocated(device)
        dec = Decoder(d, weights, context, fuse, fmt)
        formula = lay.cache_bytes(context)
        print(
            f"\n{fmt} cache for {context:,} tokens: reserved {dec.cache_reserved:,} B"
            f" ({human(dec.cache_reserved)}), formula {formula:,} B"
        )
        # the CUDA caching allocator sizes large blocks in steps of 2 MiB
        check(
            dec.cache_nbytes() == formula and 0 <= dec.cache_reserved - formula < 2**21 * 2,
            f"the {fmt} cache reserved {dec.cache_reserved:,} B, not {formula:,} B",
        )
        dec.fill_random()
        row: dict[str, Any] = {
            "cache_bytes_reserved": dec.cache_reserved,
            "cache_bytes_tensors": dec.cache_nbytes(),
            "cache_bytes_formula": formula,
            "bytes_per_token": lay.bytes_per_token(),
            "depths": {},
        }
        for depth in (context // 4, context - 1):
            run = dec.graph(depth)
            seconds = time_calls(run, device, calls=30 if cuda else 1, repeats=3 if cuda else 1)
            read = lay.cache_bytes(depth + 1)
            # this implementation also writes a bf16 copy of the filled part and reads it back
            moved = read + (2 * lay16.cache_bytes(depth + 1) if fmt == "fp8" else 0)
            bound = bw / (d.weight_bytes_read() + read)
            bound_here = bw / (d.weight_bytes_read() + moved)
            tok_s = 1 / seconds
            print(
                f"  depth {depth:>7,}: {tok_s:8.1f} tok/s; bytes bound {bound:8.1f} tok/s ({tok_s / bound:.0%})"
                + (
                    f"; {bound_here:.1f} tok/s counting the bf16 copy it writes and reads"
                    if fmt == "fp8"
                    else ""
                )
            )
            check(
                0 < tok_s and (not cuda or tok_s < 1.05 * bound),
                f"{tok_s:.1f} tok/s is faster than the bytes allow",
            )
            row["depths"][str(depth)] = {
                "tok_s": tok_s,
                "bound_tok_s": bound,
                "percent": 100 * tok_s / bound,
                "bound_as_implemented_tok_s": bound_here,
                "seconds_per_token": seconds,
                "cache_bytes_read": read,
                "bytes_moved_by_attention": moved,
            }
            del run
        row["peak_gpu_memory"] = peak.part()["allocated"]
        timed[fmt] = row
        gone = [weakref.ref(dec)]
        del dec
        row["left_bytes"] = check_freed(device, before, f"the {fmt} cache part", gone)

    print(f"\n{'depth':>8} {'bf16 tok/s':>11} {'fp8 tok/s':>10} {'fp8 / bf16':>10}")
    for depth in timed["bf16"]["depths"]:
        a, b = timed["bf16"]["depths"][depth]["tok_s"], timed["fp8"]["depths"][depth]["tok_s"]
        timed["fp8"]["depths"][depth]["speed_vs_bf16"] = b / a
        print(f"{int(depth):>8,} {a:>11.1f} {b:>10.1f} {b / a:>10.2f}")
    print(
        "the fp8 cache is dequantised into a bf16 copy before attention: it saves memory, and it"
        " would save time only with an attention kernel that reads the 8-bit numbers itself"
    )
    step_peak = peak.fold()
    results = {
        "device": device.type,
        "copy_bandwidth": bw,
        "design": "gqa",
        "context_tokens": context,
        "layers": d.layers,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "weight_bytes": d.weight_bytes(),
        "weight_bytes_read": d.weight_bytes_read(),
        "bytes_per_token_bf16": lay16.bytes_per_token(),
        "bytes_per_token_fp8": lay8.bytes_per_token(),
        "fp8_over_bf16": lay8.bytes_per_token() / lay16.bytes_per_token(),
        "logits": errors,
        "cache": timed,
        "scale": "one float32 per head and token (largest magnitude / 448)",
        "peak_gpu_memory": step_peak["allocated"],
        "peak_gpu_memory_reserved": step_peak["reserved"],
        "seconds": clock.seconds(),
    }
    print(f"\nwrote {write_results('fp8', results)}")
    print(
        f"step time: {clock.seconds():.1f} s; peak GPU memory: {step_peak['allocated']:,} B"
        f" ({human(step_peak['allocated'])})" + ("" if cuda else " (no GPU used)")
    )


if __name__ == "__main__":
    main()
