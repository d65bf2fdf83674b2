"""Step 2: the same ~8B model built five ways, its cache measured and its decode timed.

One decoder with Qwen3-8B's sizes (36 layers, hidden size 4,096, 32 query heads of 128,
MLP 12,288, vocabulary 151,936) and random bf16 weights, built as multi-head (MHA),
grouped-query (GQA, 8 key-value heads), multi-query (MQA, 1), latent attention (MLA, a
512 + 64 latent) and sliding window (4,096 tokens on alternating layers). For each design:

  - the cache it reserves for one 32,768-token conversation, against the formula;
  - a check that its decode step computes what the plain, textbook model computes;
  - decode speed with 0, 8,192 and 32,767 tokens already cached (the last token of a
    32K conversation), one CUDA graph per depth, against its bytes bound:
        tokens per second <= copy bandwidth / (weight bytes + cache bytes read)
  - its peak GPU memory, and whether weights + a 32K cache fit a 24 GB card.

    python3 designs.py                       # all five; about 2 minutes on one H200
    python3 designs.py --designs mla gqa     # some of them, built in this order
    python3 designs.py --device cpu --tiny   # a shrunken model, seconds, for a quick look
"""

from __future__ import annotations

import argparse
import weakref
from typing import Any

import torch
from cachelab import (
    CARD_24GB,
    CONVERSATION,
    DESCRIPTIONS,
    DESIGN_NAMES,
    Design,
    PeakMemory,
    Stopwatch,
    add_device_args,
    allocated,
    check,
    check_freed,
    copy_bandwidth,
    describe,
    designs,
    free_bytes,
    human,
    outside_bytes,
    pick_device,
    time_calls,
    write_results,
)
from small_decoder import (
    Decoder,
    build_weights,
    decode_tokens,
    reference_logits,
    relative_error,
    weight_nbytes,
)

TINY_CONTEXT = 256
ROUNDING = 2**21  # the CUDA caching allocator sizes large blocks in steps of 2 MiB
CHECK_TOKENS, TINY_CHECK_TOKENS = 16, 20  # tiny: longer than its window of 8, to test the ring


def depths(context: int) -> list[int]:
    """Tokens already cached at each timed step: none, a quarter, all but the last."""
    return [0, context // 4, context - 1]


def correctness(d: Design, weights: dict[str, Any], dec: Decoder, tokens: int) -> dict[str, float]:
    """Our decode steps against the textbook model in float32, and the textbook model in bf16 too."""
    ids = torch.randint(0, d.vocab, (tokens,), device=dec.device)
    with torch.no_grad():
        ours = decode_tokens(dec, ids)
        exact = reference_logits(d, weights, ids, torch.float32)
        plain_bf16 = reference_logits(d, weights, ids, torch.bfloat16)
    return {
        "ours": relative_error(ours, exact),
        "plain_bf16": relative_error(plain_bf16, exact),
        "tokens": tokens,
    }


def run_design(
    d: Design,
    args: argparse.Namespace,
    device: torch.device,
    bw: float,
    peak: PeakMemory,
    outside: int,
) -> dict[str, Any]:
    """Build one design, measure its cache and its decode speed, free it; its numbers."""
    clock, cuda = Stopwatch(), device.type == "cuda"
    lay, context = d.layout(), TINY_CONTEXT if args.tiny else CONVERSATION
    formula = lay.cache_bytes(context)
    row: dict[str, Any] = {
        "description": DESCRIPTIONS[d.name],
        "attention": lay.kind,
        "layers": d.layers,
        "hidden": d.hidden,
        "heads": d.heads,
        "head_dim": d.head_dim,
        "intermediate": d.intermediate,
        "vocab": d.vocab,
        "kv_heads": d.kv_heads,
        "kv_lora_rank": d.kv_lora_rank,
        "rope_dim": d.rope_dim,
        "window": d.window or 0,
        "window_layers": lay.window_layers,
        "bytes_per_token": lay.bytes_per_token(),
        "context_tokens": context,
        "cache_bytes_formula": formula,
        "weight_bytes_formula": d.weight_bytes(),
    }
    print(f"\n{d.name}: {DESCRIPTIONS[d.name]}")
    shape = (
        f"a latent of {d.kv_lora_rank} + {d.rope_dim} numbers per token and layer"
        if d.name == "mla"
        else f"{d.kv_heads} key-value heads of {d.head_dim}"
    )
    print(f"  {d.layers} layers, {d.heads} query heads; {shape}")
    need = d.weight_bytes() + formula
    free = free_bytes(device)
    if free is not None and need + 2**30 > free:
        print(
            f"  needs {human(need)} for weights and a {context:,}-token cache; this GPU has"
            f" {human(free)} free: skipped"
        )
        fits = need + 2**30 + outside <= CARD_24GB  # on paper, with 1 GiB of working space
        row.update(skipped=True, fits_24gb=fits, fits_24gb_flag="yes" if fits else "no")
        return row

    # each design draws its own random numbers: its check and its cache do not depend on which
    # designs were built before it
    torch.manual_seed(DESIGN_NAMES.index(d.name))
    peak.reset()
    before = allocated(device)  # the same for every design, as check_freed makes sure below
    weights = build_weights(d, device, seed=1)
    tensors = weight_nbytes(weights)
    resident = allocated(device) - before if cuda else tensors
    check(
        tensors == d.weight_bytes(),
        f"{d.name}: the weights take {tensors:,} B, the formula says {d.weight_bytes():,} B",
    )
    # the allocator hands out whole 2 MiB pieces of a large block when less than 1 MiB would be left
    count = sum(len(layer) for layer in weights["layers"]) + 3
    check(
        0 <= resident - tensors < ROUNDING * count, f"{d.name}: the allocator holds {resident:,} B"
    )
    dec = Decoder(d, weights, context, fuse=not args.no_compile)
    reserved = dec.cache_reserved
    print(
        f"  weights {tensors:,} B ({human(tensors)})"
        + (f", {resident:,} B taken from the allocator" if cuda else "")
        + f"; one decode step reads {d.weight_bytes_read():,} B (all but the embedding table)"
    )
    same = "exactly the formula" if reserved == formula else f"formula {formula:,} B"
    print(
        f"  cache for {context:,} tokens: reserved {reserved:,} B ({human(reserved)}), {same}"
        f" ({lay.bytes_per_token():,} B per token"
        + (f"; window layers capped at {d.window:,} tokens" if d.window else "")
        + ")"
    )
    check(
        dec.cache_nbytes() == formula and 0 <= reserved - formula < ROUNDING * len(dec.store),
        f"{d.name}: the cache reserved {reserved:,} B, the formula says {formula:,} B",
    )

    errors = correctness(d, weights, dec, TINY_CHECK_TOKENS if args.tiny else CHECK_TOKENS)
    print(
        f"  check over {errors['tokens']} tokens, logits against the plain model in float32:"
        f" ours off by {errors['ours']:.4f}, the plain model in bf16 by {errors['plain_bf16']:.4f}"
    )
    check(
        errors["ours"] < 2 * errors["plain_bf16"] + 0.01,
        f"{d.name}: the decode step is off by {errors['ours']:.4f} from the plain model",
    )

    dec.fill_random()
    if cuda:
        torch.cuda.empty_cache()  # let go of the check's temporaries, so the peak below is decode's
    peak.reset()  # from here: what serving this conversation takes (weights, cache, decode)
    print(
        f"  {'depth':>8}  {'measured':>12}  {'bytes-bound':>12}  {'share':>6}  {'ms/token':>8}  {'bytes/step':>10}"
    )
    timings: dict[str, Any] = {}
    for depth in depths(context):
        run = dec.graph(depth)
        steps, repeats = (30, 3) if cuda else (1, 1)
        seconds = time_calls(run, device, calls=steps, repeats=repeats)
        # the step reads every weight but the embedding table, and the new token's entry too
        step_bytes = d.weight_bytes_read() + lay.cache_bytes(depth + 1)
        bound, tok_s = bw / step_bytes, 1 / seconds
        print(
            f"  {depth:>8,}  {tok_s:>8.1f} tok/s  {bound:>6.1f} tok/s  {tok_s / bound:>6.1%}"
            f"  {seconds * 1e3:>8.3f}  {human(step_bytes):>10}"
        )
        # (on the CPU a tiny model sits in the processor's caches: no bytes bound holds there)
        check(
            0 < tok_s and (not cuda or tok_s < 1.05 * bound),
            f"{d.name}: {tok_s:.1f} tok/s is faster than the bytes allow ({bound:.1f})",
        )
        timings[str(depth)] = {
            "tok_s": tok_s,
            "bound_tok_s": bound,
            "fraction": tok_s / bound,
            "percent": 100 * tok_s / bound,
            "seconds_per_token": seconds,
            "bytes_per_step": step_bytes,
            "cache_bytes_read": lay.cache_bytes(depth + 1),
        }
        del run
    part = peak.part()
    work = part["allocated"] - before - resident - reserved if cuda else 0
    fits = (part["reserved"] + outside if cuda else resident + reserved) <= CARD_24GB
    where = "measured peak" if cuda else "weights + cache (no GPU to measure)"
    print(
        f"  peak GPU memory while decoding: {part['allocated']:,} B allocated ({human(part['allocated'])}),"
        f" {part['reserved']:,} B reserved; a 24 GB card ({where}):"
        + (" fits" if fits else " does NOT fit a 32K conversation")
    )
    first, last = timings["0"], timings[str(depths(context)[-1])]
    row.update(
        skipped=False,
        weight_bytes=tensors,
        weight_bytes_allocated=resident,
        weight_bytes_read=d.weight_bytes_read(),
        cache_bytes_reserved=reserved,
        cache_bytes_tensors=dec.cache_nbytes(),
        check=errors,
        depths=timings,
        peak_gpu_memory=part["allocated"],
        peak_gpu_memory_reserved=part["reserved"],
        work_bytes=work,
        fits_24gb=fits,
        fits_24gb_flag="yes" if fits else "no",
        slowdown=first["tok_s"] / last["tok_s"],
        slowdown_predicted=first["bound_tok_s"] / last["bound_tok_s"],
        seconds=clock.seconds(),
    )
    print(
        f"  from depth 0 to {depths(context)[-1]:,}: {row['slowdown']:.2f}x slower measured,"
        f" {row['slowdown_predicted']:.2f}x by the bytes; {clock.seconds():.0f} s for this design"
    )
    gone = [weakref.ref(dec), weakref.ref(weights["embed"])]
    del dec, weights
    row["left_bytes"] = check_freed(device, before, f"design {d.name}", gone)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_args(parser)
    parser.add_argument(
        "--designs",
        nargs="+",
        default=DESIGN_NAMES,
        choices=DESIGN_NAMES,
        help="which designs, built in this order (default: all five)",
    )
    parser.add_argument(
        "--bandwidth", type=float, help="use this copy bandwidth (B/s) instead of measuring"
    )
    parser.add_argument(
        "--no-compile", action="store_true", help="leave the small operations unfused"
    )
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny)
    print(describe(device))
    torch.manual_seed(0)
    peak = PeakMemory(device)
    cuda = device.type == "cuda"
    bw = args.bandwidth or copy_bandwidth(device, 2**24 if args.tiny else 2**32)
    print(f"copy bandwidth: {bw / 1e12:.2f} TB/s (device-to-device copy, bytes read + written)")
    check(0 < bw < 6e12, f"a copy bandwidth of {bw / 1e12:.2f} TB/s is beyond any memory of today")
    outside = outside_bytes(device)
    context = TINY_CONTEXT if args.tiny else CONVERSATION
    how = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how += ", small operations fused by torch.compile" if cuda and not args.no_compile else ""
    print(f"decoder: {how}; memory outside PyTorch (CUDA context, libraries): {human(outside)}")

    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,
        "copy_bandwidth": bw,
        "copy_bandwidth_gb_s": bw / 1e9,
        "decoder": how,
        "context_tokens": context,
        "depths": depths(context),
        "outside_bytes": outside,
        "card_24gb_bytes": CARD_24GB,
        "order": list(dict.fromkeys(args.designs)),
        "designs": {},
    }
    built = {d.name: d for d in designs(args.tiny)}
    for name in results["order"]:
        results["designs"][name] = run_design(built[name], args, device, bw, peak, outside)

    done = {k: v for k, v in results["designs"].items() if not v["skipped"]}
    last = str(depths(context)[-1])
    print(
        f"\n{'design':<8} {'B/token':>9} {f'cache {context:,}':>13} {'tok/s d0':>9} {f'tok/s d{last}':>12}"
        f" {'share':>6} {'24 GB':>6}"
    )
    for name, r in done.items():
        print(
            f"{name:<8} {r['bytes_per_token']:>9,} {human(r['cache_bytes_reserved']):>13}"
            f" {r['depths']['0']['tok_s']:>9.1f} {r['depths'][last]['tok_s']:>12.1f}"
            f" {r['depths'][last]['percent']:>5.0f}% {'fits' if r['fits_24gb'] else 'no':>6}"
        )
    step_peak = peak.fold()
    # the CUDA context grows as kernels are loaded: keep the larger of the two readings
    results["outside_bytes"] = max(outside, outside_bytes(device))
    results.update(
        peak_gpu_memory=step_peak["allocated"],
        peak_gpu_memory_reserved=step_peak["reserved"],
        seconds=clock.seconds(),
    )
    print(f"\nwrote {write_results('designs', results)}")
    print(
        f"step time: {clock.seconds():.1f} s; peak GPU memory: {step_peak['allocated']:,} B"
        f" ({human(step_peak['allocated'])})" + ("" if cuda else " (no GPU used)")
    )


if __name__ == "__main__":
    main()
