"""Step 2: the same ~8B model built five ways, its cache measured and its decode timed.

One decoder with Qwen3-8B's sizes (36 layers, hidden size 4,096, 32 query heads of 128,
MLP 12,288, vocabulary 151,936) and random bf16 weights, built as multi-head (MHA),
grouped-query (GQA, 8 key-value heads), multi-query (MQA, 1), latent attention (MLA, a
512 + 64 latent) and sliding window (4,096 tokens on alternating layers). For each design:

  - the cache it reserves for one 32,768-token conversation, against the formula;
  - a check that its decode step computes what the plain, textbook model computes;
  - the working space a prompt of 8,192 tokens takes in one pass (its prefill peak);
  - decode speed with 0, 8,192 and 32,767 tokens already cached (the last token of a
    32K conversation), one CUDA graph per depth, timed by the GPU's own clock over repeats
    (median and spread), against its bytes bound:
        tokens per second <= copy bandwidth / (weight bytes + cache bytes read)
  - its peak GPU memory, and whether weights + a 32K cache fit a 24 GB card.

    python3 designs.py                       # all five; about 2 minutes on one H200
    python3 designs.py --designs mla gqa     # some of them, built in this order
    python3 designs.py --device cpu --tiny   # a shrunken model, seconds, for a quick look
"""

from __future__ import annotations

import argparse
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from labkit import device as devices
from labkit import facts, memory, timing
from labkit.checks import check
from labkit.configs import load_config
from labkit.decoder import Decoder, Weights, random_weights, weight_nbytes
from labkit.reference import decode_tokens, reference_logits, relative_error
from labkit.results import write_results
from labkit.shapes import Shape
from labkit.units import human

MODELS = Path(__file__).resolve().parent / "models"
CONVERSATION = 32_768  # the conversation the lesson sizes everything for
TINY_CONTEXT = 256
ROUNDING = 2**21  # the CUDA caching allocator sizes large blocks in steps of 2 MiB
CHECK_TOKENS, TINY_CHECK_TOKENS = 16, 20  # tiny: longer than its window of 8, to test the ring
# each timed sample replays CALLS decode steps back to back; REPEATS samples after WARMUP replays
REPEATS, CALLS, WARMUP = 10, 20, 3

DESIGN_NAMES = ["mha", "gqa", "mqa", "mla", "sliding"]
DESCRIPTIONS = {
    "mha": "multi-head: one key and one value per query head",
    "gqa": "grouped-query: each key-value head serves a group of query heads",
    "mqa": "multi-query: every query head shares one key-value head",
    "mla": "latent (MLA): one compressed latent per token, projections absorbed",
    "sliding": "sliding window on alternating layers, grouped-query otherwise",
}


def design_shapes(tiny: bool) -> list[Shape]:
    """The five designs, with Qwen3-8B's sizes read from its config (or a shrunken copy)."""
    cfg = load_config(MODELS / "Qwen3-8B" / "config.json")
    if tiny:
        base = Shape("", 4, 128, 4, 32, 256, 512, cfg["rope_theta"], cfg["rms_norm_eps"])
        kv, rank, rope, window = {"mha": 4, "gqa": 2, "mqa": 1}, 32, 16, 8
    else:
        # the same decoder for every design: no query and key norms, which latents do not have
        base = replace(Shape.of_config(cfg, name=""), qk_norm=False)
        kv = {"mha": base.heads, "gqa": cfg["num_key_value_heads"], "mqa": 1}
        rank, rope, window = 512, 64, 4096
    return [
        replace(base, name="mha", kv_heads=kv["mha"]),
        replace(base, name="gqa", kv_heads=kv["gqa"]),
        replace(base, name="mqa", kv_heads=kv["mqa"]),
        replace(base, name="mla", kv_heads=0, kv_lora_rank=rank, rope_dim=rope),
        replace(base, name="sliding", kv_heads=kv["gqa"], window=window),
    ]


def depths(context: int) -> list[int]:
    """Tokens already cached at each timed step: none, a quarter, all but the last."""
    return [0, context // 4, context - 1]


def correctness(d: Shape, weights: Weights, dec: Decoder, tokens: int) -> dict[str, float]:
    """Our decode steps against the textbook model in float32, and the textbook model in bf16."""
    ids = torch.randint(0, d.vocab, (tokens,), device=dec.device)
    ours = decode_tokens(dec, ids)
    with torch.no_grad():
        exact = reference_logits(d, weights, ids, torch.float32)
        plain_bf16 = reference_logits(d, weights, ids, torch.bfloat16)
    return {
        "ours": relative_error(ours, exact),
        "plain_bf16": relative_error(plain_bf16, exact),
        "tokens": tokens,
    }


def prefill_peak(d: Shape, dec: Decoder, tokens: int, peak: memory.PeakMemory) -> int | None:
    """The working space of a prompt of `tokens` tokens run in one pass: the peak allocated
    beyond what was allocated before it (weights, cache). None for the designs the decoder has
    no prompt pass for (latents, windows); 0 on the CPU, which has no counter."""
    if d.kv_lora_rank or d.window:
        return None
    ids = torch.randint(0, d.vocab, (tokens,), device=dec.device)
    peak.part()  # from here: the prompt pass alone
    base = memory.allocated(dec.device)
    with torch.no_grad():
        dec.prefill(ids)
    top = peak.part()["allocated"]
    del ids
    return max(top - base, 0) if memory.cuda(dec.device) else 0


def time_depth(dec: Decoder, depth: int, device: torch.device) -> timing.Spread:
    """Seconds per decode step at `depth`: a CUDA graph's replays, timed by CUDA events."""
    run = dec.graph(depth)
    if memory.cuda(device):
        return timing.time_gpu(run, device, repeats=REPEATS, warmup=WARMUP, calls=CALLS)
    return timing.time_gpu(run, device, repeats=3, warmup=1, calls=1)


def run_design(
    d: Shape,
    args: argparse.Namespace,
    device: torch.device,
    bw: Any,
    peak: memory.PeakMemory,
) -> dict[str, Any]:
    """Build one design, measure its cache and its decode speed, free it; its numbers."""
    clock, cuda = timing.Stopwatch(), memory.cuda(device)
    context = TINY_CONTEXT if args.tiny else CONVERSATION
    room = facts.room(memory.CARD)
    formula = d.cache_bytes(context)
    row: dict[str, Any] = {
        "description": DESCRIPTIONS[d.name],
        "attention": d.kind,
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
        "window_layers": d.window_layers,
        "bytes_per_token": d.bytes_per_token(),
        "context_tokens": context,
        "cache_bytes_formula": formula,
        "weight_bytes_formula": d.weight_bytes(),
    }
    print(f"\n{d.name}: {DESCRIPTIONS[d.name]}")
    shape = (
        f"a latent of {d.kv_lora_rank} + {d.rope_dim} numbers per token and layer"
        if d.kv_lora_rank
        else f"{d.kv_heads} key-value heads of {d.head_dim}"
    )
    print(f"  {d.layers} layers, {d.heads} query heads; {shape}")
    need = d.weight_bytes() + formula
    free = memory.free_bytes(device)
    if free is not None and need + 2**30 > free:
        print(
            f"  needs {human(need)} for weights and a {context:,}-token cache; this GPU has"
            f" {human(free)} free: skipped"
        )
        fits = need + 2**30 <= room.bytes  # on paper, with 1 GiB of working space
        row.update(skipped=True, fits_24gb=fits, fits_24gb_flag="yes" if fits else "no")
        return row

    # each design draws its own random numbers: its check and its cache do not depend on which
    # designs were built before it
    torch.manual_seed(DESIGN_NAMES.index(d.name))
    peak.part()  # from here: this design alone
    before = memory.allocated(device)  # the same for every design, as check_freed makes sure
    weights = random_weights(d, device, seed=1)
    tensors = weight_nbytes(weights)
    resident = memory.allocated(device) - before if cuda else tensors
    check(
        tensors == d.weight_bytes(),
        f"{d.name}: the weights take {tensors:,} B, the formula says {d.weight_bytes():,} B",
    )
    # the allocator hands out whole 2 MiB pieces of a large block when less than 1 MiB would be left
    count = sum(len(layer) for layer in weights["layers"]) + 3
    check(
        0 <= resident - tensors < ROUNDING * count, f"{d.name}: the allocator holds {resident:,} B"
    )
    dec = Decoder(d, weights, context, fuse=not args.no_compile, split_k=False)
    reserved = dec.cache_reserved
    print(
        f"  weights {tensors:,} B ({human(tensors)})"
        + (f", {resident:,} B taken from the allocator" if cuda else "")
        + f";\n  one decode step reads {d.weight_bytes_read():,} B (all but the embedding table)"
    )
    same = "exactly the formula" if reserved == formula else f"formula {formula:,} B"
    print(
        f"  cache for {context:,} tokens: reserved {reserved:,} B ({human(reserved)}), {same}"
        f"\n  ({d.bytes_per_token():,} B per token"
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
        f"\n  ours off by {errors['ours']:.4f},"
        f" the plain model in bf16 by {errors['plain_bf16']:.4f}"
    )
    check(
        errors["ours"] < 2 * errors["plain_bf16"] + 0.01,
        f"{d.name}: the decode step is off by {errors['ours']:.4f} from the plain model",
    )
    memory.release(device)  # the check's temporaries: the peaks below are the prompt's and decode's
    chunk = context // 4
    prompt = prefill_peak(d, dec, chunk, peak)
    if prompt is None:
        print("  prompt pass: not written for this design (see the designs with plain heads)")
    else:
        print(
            f"  a prompt of {chunk:,} tokens in one pass: {human(prompt)} of working space"
            + ("" if cuda else " (no GPU to measure)")
        )

    dec.fill_random()
    memory.release(device)
    peak.part()  # from here: what serving this conversation takes (weights, cache, decode)
    print(
        f"  {'depth':>8}  {'measured':>12}  {'spread':>6}  {'bytes-bound':>12}  {'share':>6}"
        f"  {'ms/token':>8}  {'bytes/step':>10}"
    )
    timings: dict[str, Any] = {}
    for depth in depths(context):
        seconds = time_depth(dec, depth, device)
        # the step reads every weight but the embedding table, and the new token's entry too
        step_bytes = d.weight_bytes_read() + d.cache_bytes(depth + 1)
        # (on the CPU a tiny model sits in the processor's caches: no bytes bound holds there)
        tok_s, bound, fraction = timing.bytes_bound(seconds, bw, step_bytes, cuda, d.name)
        print(
            f"  {depth:>8,}  {tok_s.median:>8.1f} tok/s  {tok_s.relative:>6.1%}"
            f"  {float(bound):>6.1f} tok/s  {float(fraction):>6.1%}"
            f"  {seconds.median * 1e3:>8.3f}  {human(step_bytes):>10}"
        )
        timings[str(depth)] = {
            "tok_s": tok_s,
            "bound_tok_s": bound,
            "fraction": fraction,
            "percent": timing.derive(fraction, lambda f: 100 * f),
            "seconds_per_token": seconds,
            "bytes_per_step": step_bytes,
            "cache_bytes_read": d.cache_bytes(depth + 1),
        }
    part = peak.part()
    work = part["allocated"] - before - resident - reserved if cuda else 0
    fits = (part["reserved"] if cuda else resident + reserved) <= room.bytes
    where = "its measured peak" if cuda else "weights + cache (no GPU to measure)"
    print(
        f"  peak GPU memory while decoding: {part['allocated']:,} B allocated"
        f" ({human(part['allocated'])}), {part['reserved']:,} B reserved"
    )
    print(
        f"  on a 24 GB card ({human(room.bytes)} usable), {where}:"
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
        prompt_tokens=chunk,
        prefill_work_bytes=prompt,
        depths=timings,
        peak_gpu_memory=part["allocated"],
        peak_gpu_memory_reserved=part["reserved"],
        work_bytes=work,
        fits_24gb=fits,
        fits_24gb_flag="yes" if fits else "no",
        slowdown=timing.ratio(first["tok_s"], last["tok_s"]),
        slowdown_predicted=last["bytes_per_step"] / first["bytes_per_step"],
        seconds=clock.seconds(),
    )
    print(
        f"  from depth 0 to {depths(context)[-1]:,}: {row['slowdown'].median:.2f}x slower"
        f" measured, {row['slowdown_predicted']:.2f}x by the bytes;"
        f" {clock.seconds():.0f} s for this design"
    )
    gone = [weakref.ref(dec), weakref.ref(weights["embed"])]
    del dec, weights
    row["left_bytes"] = memory.check_freed(device, before, f"design {d.name}", gone)
    return row


def main() -> None:
    parser = devices.arguments(__doc__, speed=True)
    parser.add_argument(
        "--designs",
        nargs="+",
        default=DESIGN_NAMES,
        choices=DESIGN_NAMES,
        help="which designs, built in this order (default: all five)",
    )
    args = parser.parse_args()
    clock, device = timing.Stopwatch(), devices.pick(args)
    print(devices.describe(device, "torch"))
    torch.manual_seed(0)
    peak = memory.PeakMemory(device)
    cuda = memory.cuda(device)
    bw = timing.bandwidth(device, 2**24 if args.tiny else 2**32, args.bandwidth)
    print(
        f"copy bandwidth: {float(bw) / 1e12:.2f} TB/s (device-to-device copy, bytes read +"
        " written" + (f"; spread {bw.relative:.1%})" if isinstance(bw, timing.Spread) else ")")
    )
    outside = memory.outside_bytes(device)
    context = TINY_CONTEXT if args.tiny else CONVERSATION
    how = "one CUDA graph per depth" if cuda else "eager on the CPU"
    how += ", small operations fused by torch.compile" if cuda and not args.no_compile else ""
    print(f"decoder: {how}")
    print(f"memory outside PyTorch (CUDA context, libraries): {human(outside)}")
    card = facts.card(memory.CARD)
    print(
        f"a 24 GB card leaves {human(facts.room(memory.CARD).bytes)} for tensors ({card.label}:"
        f" {human(card.torch_total or 0)} to PyTorch, less the CUDA context)"
    )
    if cuda:
        print(
            f"each speed: the median of {REPEATS} samples of {CALLS} steps replayed, timed by"
            " the GPU's clock\n  (spread: fastest to slowest sample, against the median)"
        )

    results: dict[str, Any] = {
        "device": device.type,
        "tiny": args.tiny,
        "copy_bandwidth": bw,
        "copy_bandwidth_gb_s": timing.derive(bw, lambda b: b / 1e9),
        "decoder": how,
        "context_tokens": context,
        "depths": depths(context),
        "outside_bytes": outside,
        "card_24gb_bytes": facts.room(memory.CARD).bytes,
        "order": list(dict.fromkeys(args.designs)),
        "designs": {},
    }
    built = {d.name: d for d in design_shapes(args.tiny)}
    for name in results["order"]:
        results["designs"][name] = run_design(built[name], args, device, bw, peak)

    done = {k: v for k, v in results["designs"].items() if not v["skipped"]}
    prompts = [
        r["prefill_work_bytes"] for r in done.values() if r["prefill_work_bytes"] is not None
    ]
    results["prefill_work_bytes"] = max(prompts) if prompts else None
    last = str(depths(context)[-1])
    print(
        f"\n{'design':<8} {'B/token':>9} {f'cache {context:,}':>13} {'tok/s d0':>9}"
        f" {f'tok/s d{last}':>12} {'share':>6} {'24 GB':>6}"
    )
    for name, r in done.items():
        print(
            f"{name:<8} {r['bytes_per_token']:>9,} {human(r['cache_bytes_reserved']):>13}"
            f" {r['depths']['0']['tok_s'].median:>9.1f} {r['depths'][last]['tok_s'].median:>12.1f}"
            f" {float(r['depths'][last]['percent']):>5.0f}% {'fits' if r['fits_24gb'] else 'no':>6}"
        )
    # the CUDA context grows as kernels are loaded: keep the larger of the two readings
    results["outside_bytes"] = max(outside, memory.outside_bytes(device))
    results["peak_gpu_memory"] = peak.report(
        sized_to_card="a design whose weights and cache do not fit the free memory is skipped"
    )
    results["seconds"] = clock.seconds()
    print(f"\nwrote {write_results('designs', results)}")
    print(f"step time: {clock.seconds():.1f} s")


if __name__ == "__main__":
    main()
