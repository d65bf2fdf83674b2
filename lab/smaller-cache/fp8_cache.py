"""Step 3: the grouped-query design with its cache kept in 8 bits instead of 16.

Each key and each value vector (one head, one token) is stored as float8 e4m3 numbers with
one float32 scale (its largest magnitude / 448), and turned back into bf16 when attention
reads it. The cache takes a little more than half the bytes. What does that buy, and what
does it cost?

  - memory: the cache of a 32,768-token conversation, reserved, against the formula;
  - error: each of several prompts is run once (its keys and values computed exactly), then
    the model decodes with the bf16 cache and with the fp8 cache, both fed the same tokens;
    the logits are compared step by step (relative error, and how often the top token
    changes: a rate over every step, with its spread over the prompts);
  - speed: decode tokens per second at depths 8,192 and 32,767 with each cache, timed by the
    GPU's clock over repeats (median and spread).

    python3 fp8_cache.py                       # about 1 minute on one H200
    python3 fp8_cache.py --device cpu --tiny   # a shrunken model, seconds
"""

from __future__ import annotations

import statistics
import weakref
from typing import Any

import torch
from designs import CONVERSATION, design_shapes, time_depth
from labkit import device as devices
from labkit import memory, timing
from labkit.checks import check
from labkit.decoder import Decoder, Weights, random_weights
from labkit.reference import relative_error
from labkit.results import write_results
from labkit.shapes import Shape
from labkit.units import human

PROMPT, STEPS, PROMPTS = 8_192, 32, 8
TINY_CONTEXT, TINY_PROMPT, TINY_STEPS, TINY_PROMPTS = 256, 32, 6, 2


def compare(
    d: Shape, weights: Weights, device: torch.device, prompt: int, steps: int, prompts: int,
    fuse: bool,
) -> dict[str, Any]:  # fmt: skip
    """Decode `steps` tokens after each of `prompts` random prompts of `prompt` tokens, with a
    bf16 and an fp8 cache fed the same tokens; the logits' differences and the top tokens."""
    exact = Decoder(d, weights, prompt + steps, fuse=fuse, split_k=False, cache="bf16")
    eight = Decoder(d, weights, prompt + steps, fuse=fuse, split_k=False, cache="fp8")
    errors, margins, changed, worst = [], [], [], 0.0
    for _ in range(prompts):
        ids = torch.randint(0, d.vocab, (prompt,), device=device)
        with torch.no_grad():  # the prompt pass is not compiled: no graphs to keep apart
            token = exact.prefill(ids)[0].float().argmax()
            eight.prefill(ids)
        differ = 0
        for s in range(steps):
            exact.token.fill_(int(token))  # both are fed the bf16 run's choice: no drift
            eight.token.fill_(int(token))
            a, b = exact.step(prompt + s)[0].float(), eight.step(prompt + s)[0].float()
            errors.append(relative_error(b, a))
            worst = max(worst, float((b - a).abs().max()))
            differ += int(a.argmax() != b.argmax())
            top2 = a.topk(2).values
            margins.append(float(top2[0] - top2[1]))
            token = a.argmax()
        changed.append(differ)
    del exact, eight
    total = prompts * steps
    return {
        "prompt_tokens": prompt,
        "prompts": prompts,
        "steps_per_prompt": steps,
        "steps": total,
        "rel_error_mean": statistics.fmean(errors),
        "rel_error_max": max(errors),
        "abs_error_max": worst,
        "argmax_agree": total - sum(changed),
        "argmax_agree_fraction": (total - sum(changed)) / total,
        "argmax_changed": sum(changed),
        "argmax_changed_per_prompt": changed,
        # the share of steps whose top token changed: over all steps, and its spread over prompts
        "argmax_change_rate": sum(changed) / total,
        "argmax_change_rate_prompts": timing.Spread.of([c / steps for c in changed]),
        "top2_margin_median": statistics.median(margins),
    }


def main() -> None:
    args = devices.arguments(__doc__, speed=True).parse_args()
    clock, device = timing.Stopwatch(), devices.pick(args)
    cuda = memory.cuda(device)
    print(devices.describe(device, "torch"))
    torch.manual_seed(0)
    peak = memory.PeakMemory(device)
    bw = timing.bandwidth(device, 2**24 if args.tiny else 2**32, args.bandwidth)
    print(
        f"copy bandwidth: {float(bw) / 1e12:.2f} TB/s (device-to-device copy, bytes read + written)"
    )
    context = TINY_CONTEXT if args.tiny else CONVERSATION
    prompt, steps, prompts = (
        (TINY_PROMPT, TINY_STEPS, TINY_PROMPTS) if args.tiny else (PROMPT, STEPS, PROMPTS)
    )
    d = next(x for x in design_shapes(args.tiny) if x.name == "gqa")
    weights = random_weights(d, device, seed=1)
    fuse = not args.no_compile
    per16, per8 = d.bytes_per_token("bf16"), d.bytes_per_token("fp8")
    weights_read = d.weight_bytes_read()
    print(
        f"grouped-query design: {d.layers} layers, {d.kv_heads} key-value heads of {d.head_dim};"
        f" random bf16 weights, {human(d.weight_bytes())}"
    )
    print(
        f"bytes per token: bf16 {per16:,} B; fp8 {per8:,} B"
        f" = 2 x {d.layers} x {d.kv_heads} x ({d.head_dim} x 1 byte + a 4-byte scale)"
        f" ({per8 / per16:.1%})"
    )

    peak.part()  # from here: the comparison of the logits
    errors = compare(d, weights, device, prompt, steps, prompts, fuse)
    memory.release(device)  # so the next part's peak is its own
    print(
        f"\nafter each of {prompts} prompts of {prompt:,} tokens, {steps} decode steps fed the"
        " same tokens:"
    )
    print(
        f"  logits, fp8 cache against bf16 cache: relative error {errors['rel_error_mean']:.4f}"
        f" on average,\n  {errors['rel_error_max']:.4f} at worst"
        f" (largest single difference {errors['abs_error_max']:.3f})"
    )
    print(
        f"  the top token changed in {errors['argmax_changed']} of {errors['steps']} steps"
        f" ({errors['argmax_change_rate']:.1%});\n  in each prompt's {steps} steps:"
        f" {', '.join(map(str, errors['argmax_changed_per_prompt']))}"
    )
    print(
        f"  the median gap between the two top logits is {errors['top2_margin_median']:.3f}"
        "\n  (random weights: real models are usually far more decided)"
    )
    check(
        errors["rel_error_mean"] < 0.25,
        f"the fp8 cache changes the logits by {errors['rel_error_mean']:.1%}",
    )

    timed: dict[str, Any] = {}
    for fmt in ("bf16", "fp8"):
        peak.part()  # from here: this cache alone
        before = memory.allocated(device)
        dec = Decoder(d, weights, context, fuse=fuse, split_k=False, cache=fmt)
        formula = d.cache_bytes(context, fmt)
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
            "bytes_per_token": d.bytes_per_token(fmt),
            "depths": {},
        }
        for depth in (context // 4, context - 1):
            seconds = time_depth(dec, depth, device)
            read = d.cache_bytes(depth + 1, fmt)
            # this implementation also writes a bf16 copy of the filled part and reads it back
            moved = read + (2 * d.cache_bytes(depth + 1, "bf16") if fmt == "fp8" else 0)
            tok_s, bound, share = timing.bytes_bound(seconds, bw, weights_read + read, held=cuda)
            bound_here = timing.derive(bw, lambda b, n=weights_read + moved: b / n)
            print(
                f"  depth {depth:>7,}: {tok_s.median:8.1f} tok/s (spread {tok_s.relative:.1%});"
                f" bytes bound {float(bound):8.1f} tok/s ({float(share):.0%})"
            )
            if fmt == "fp8":
                print(
                    f"    {float(bound_here):.1f} tok/s counting the bf16 copy it writes and reads"
                )
            row["depths"][str(depth)] = {
                "tok_s": tok_s,
                "bound_tok_s": bound,
                "percent": timing.derive(share, lambda f: 100 * f),
                "bound_as_implemented_tok_s": bound_here,
                "seconds_per_token": seconds,
                "cache_bytes_read": read,
                "bytes_moved_by_attention": moved,
            }
        row["peak_gpu_memory"] = peak.part()["allocated"]
        timed[fmt] = row
        gone = [weakref.ref(dec)]
        del dec
        row["left_bytes"] = memory.check_freed(device, before, f"the {fmt} cache part", gone)

    print(f"\n{'depth':>8} {'bf16 tok/s':>11} {'fp8 tok/s':>10} {'fp8 / bf16':>10}")
    for depth in timed["bf16"]["depths"]:
        a, b = timed["bf16"]["depths"][depth]["tok_s"], timed["fp8"]["depths"][depth]["tok_s"]
        speed = timing.ratio(b, a)
        timed["fp8"]["depths"][depth]["speed_vs_bf16"] = speed
        print(f"{int(depth):>8,} {a.median:>11.1f} {b.median:>10.1f} {float(speed):>10.2f}")
    print(
        "the fp8 cache is dequantised into a bf16 copy before attention: it saves memory, and it"
        "\nwould save time only with an attention kernel that reads the 8-bit numbers itself"
    )
    results = {
        "device": device.type,
        "tiny": args.tiny,
        "copy_bandwidth": bw,
        "design": "gqa",
        "context_tokens": context,
        "layers": d.layers,
        "kv_heads": d.kv_heads,
        "head_dim": d.head_dim,
        "weight_bytes": d.weight_bytes(),
        "weight_bytes_read": d.weight_bytes_read(),
        "bytes_per_token_bf16": per16,
        "bytes_per_token_fp8": per8,
        "fp8_over_bf16": per8 / per16,
        "logits": errors,
        "cache": timed,
        "scale": "one float32 per head and token (largest magnitude / 448)",
    }
    results["peak_gpu_memory"] = peak.report()
    results["seconds"] = clock.seconds()
    print(f"\nwrote {write_results('fp8', results)}")
    print(f"step time: {clock.seconds():.1f} s")


if __name__ == "__main__":
    main()
