"""Step 3: the settings that move the cache, each measured on the serving engine.

  - the memory fraction (max_memory_percent) 0.5, 0.7, 0.9, with Qwen3-8B;
  - the maximum context, 8K, 32K or the full 40,960 tokens: the same cache, counted in
    conversations of each length by the engine's own block manager;
  - the cache's number format, bf16 or an 8-bit float (float8_e4m3fn): the engine has no
    setting for it, so its planner class sizes an 8-bit cache and we reserve those tensors;
  - the model, Qwen3-0.6B against Qwen3-8B, at 0.9.

Each model is built once, with random bf16 weights, on the GPU. The cache takes a fraction of
whatever GPU it finds: this step sizes itself to the card.

    python3 settings.py
    python3 settings.py --device cpu --tiny    # shrunken models on a pretend 256 MiB GPU
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from math import lcm
from typing import Any

import torch
from transformers.generation.continuous_batching.cache import PagedAttentionMemoryHandler

from labkit.checks import check
from labkit.configs import weight_bytes
from labkit.device import add_device_args, describe, pick_device
from labkit.timing import Stopwatch
from labkit.units import human
from paged import finish, scaled_contexts
from planner import (
    SECTOR_ALIGN,
    Engine,
    cache_bytes_per_token,
    conversations,
    fraction_key,
    plan,
    say,
)
from serving import (
    SECTORS,
    Memory,
    build_model,
    cache_dtype_setting,
    cb_config,
    drop_model,
    make_prompts,
    serve,
)

FRACTIONS = (0.5, 0.7, 0.9)
FP8 = torch.float8_e4m3fn


def measure(
    model: Any,
    cfg: dict[str, Any],
    memory: Memory,
    fraction: float,
    block: int,
    contexts: dict[str, int],
) -> tuple[dict[str, Any], Engine]:
    """One engine start at `fraction`: what it reserved, and planner.py's figure beside it."""
    prompts = make_prompts(2, 64, cfg["vocab_size"], seed=round(fraction * 100))
    facts = serve(
        model, prompts, 4, memory, contexts, max_memory_percent=fraction, block_size=block
    )
    paper = plan(cfg, facts["available"], facts["engine"])
    out = {
        k: facts[k]
        for k in (
            "available",
            "free_before",
            "num_blocks",
            "max_batch_tokens",
            "cache_tokens",
            "cache_tensor_bytes",
            "available_logged_mib",
        )
    }
    out.update(
        paper_num_blocks=paper["num_blocks"],
        paper_cache_tokens=paper["cache_tokens"],
        blocks_diff=(facts["num_blocks"] - paper["num_blocks"]) / paper["num_blocks"],
        conversations=facts["admitted"],
        paper_conversations={
            k: conversations(paper["num_blocks"], block, c) for k, c in contexts.items()
        },
    )
    check(
        abs(out["blocks_diff"]) <= 0.01,
        f"at {fraction} the engine's blocks differ from paper by > 1 %",
    )
    return out, facts["engine"]


def eight_bit(
    model: Any,
    cfg: dict[str, Any],
    memory: Memory,
    eng: Engine,
    fraction: float,
    contexts: dict[str, int],
) -> dict[str, Any]:
    """Size an 8-bit cache with the engine's planner class, reserve its tensors, and measure
    what 8 bits keep of a key. (Only the cache is reserved: the engine cannot run on it.)"""
    layers, heads, dim = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"]
    settings = cb_config(
        block_size=eng.block_size,
        max_memory_percent=fraction,
        max_blocks_per_request=eng.max_blocks_per_request,
        use_async_batching=eng.io_copies == 2,
        max_batch_tokens=eng.max_batch_tokens,
    )
    with memory.engine_reads_me():
        if SECTORS:  # 5.24: the cache's format sets the sector's bytes; here a sector is a block
            block_bytes = cache_bytes_per_token(cfg, replace(eng, cache_bytes=1)) * eng.block_size
            settings.max_requests_per_batch = eng.max_requests_per_batch
            handler = PagedAttentionMemoryHandler(
                config=model.config,
                cb_config=settings,
                dtype=model.dtype,
                bytes_per_sector=lcm(block_bytes, SECTOR_ALIGN),
                tokens_per_sector=lcm(block_bytes, SECTOR_ALIGN) // block_bytes * eng.block_size,
                bytes_per_block=block_bytes,
                attn_types=["full_attention"],
                model_supports_logits_to_keep=eng.logits_to_keep,
            )
            m, blocks = handler.infer_max_batch_tokens_and_num_sectors()
        else:
            handler = PagedAttentionMemoryHandler(
                model.config, settings, model.dtype, ["full_attention"], layers
            )
            handler.cache_dtype = FP8  # the class keeps the cache's and activations' formats apart
            m, blocks = handler.infer_max_batch_tokens_and_num_blocks()
    available = handler.available_memory  # what the planner class read, fraction applied
    paper = plan(cfg, available, replace(eng, cache_bytes=1))
    check(
        (m, blocks) == (paper["max_batch_tokens"], paper["num_blocks"]),
        f"the planner class sized {blocks:,} 8-bit blocks, planner.py {paper['num_blocks']:,}",
    )
    before = memory.allocated()
    budget = [available]  # only the pretend GPU counts it; a real one has the room
    # the engine's layout: a key and a value tensor per layer, each with 2 padding blocks (5.17);
    # one tensor of the same bytes (5.24)
    rows = (blocks + 2) * eng.block_size
    if SECTORS:
        tensors = [memory.empty((rows * 2 * layers, heads, dim), FP8, budget)]
    else:
        tensors = [memory.empty((rows, heads, dim), FP8, budget) for _ in range(2 * layers)]
    nbytes = sum(t.nbytes for t in tensors)
    allocated = memory.allocated() - before if not memory.pretend else nbytes
    # what 8 bits keep of a bf16 key: write random keys into one block, read them back
    keys = torch.randn((eng.block_size, heads, dim), dtype=torch.bfloat16, device=memory.device)
    tensors[0][: eng.block_size].copy_(keys)
    back = tensors[0][: eng.block_size].to(torch.bfloat16).float()
    rel = float((back - keys.float()).norm() / keys.float().norm())
    del tensors
    memory.free()
    check(
        nbytes == rows * 2 * layers * heads * dim, "the 8-bit tensors are not one byte per number"
    )
    check(0 < rel < 0.1, f"an 8-bit float kept bf16 keys with a relative error of {rel:.3f}")
    return {
        "engine_has_cache_dtype_setting": cache_dtype_setting(),
        "num_blocks": blocks,
        "max_batch_tokens": m,
        "cache_tokens": blocks * eng.block_size,
        "paper_num_blocks": paper["num_blocks"],
        "tensor_bytes": nbytes,
        "allocated_bytes": allocated,
        "relative_error": rel,
        "conversations": {k: conversations(blocks, eng.block_size, c) for k, c in contexts.items()},
    }


def one_model(
    folder: str,
    fractions: tuple[float, ...],
    args: argparse.Namespace,
    memory: Memory,
    block: int,
    contexts: dict[str, int],
) -> dict[str, Any]:
    """Build one model, start the engine at each fraction (and size an 8-bit cache for the 8B)."""
    weights = args.weights if folder == "Qwen3-8B" else None
    model, cfg, how = build_model(folder, memory.device, args.tiny, memory, weights)
    entry: dict[str, Any] = {
        "weights": weight_bytes(cfg),
        "weights_how": how,
        "bytes_per_token": cache_bytes_per_token(cfg),
    }
    lengths = "".join(f"{c:>8,}" for c in contexts.values())
    say(f"\n{folder}: {how}; weights {human(entry['weights'])}; {block}-token blocks")
    print(f"  {'':>42}   conversations of this many tokens")
    print(
        f"  {'fraction':>8} {'available (B)':>17} {'blocks':>7} {'paper':>7}   {'tokens':>10}"
        f"{lengths}"
    )
    for fraction in fractions:
        got, eng = measure(model, cfg, memory, fraction, block, contexts)
        entry[fraction_key(fraction)] = got
        convs = "".join(f"{got['conversations'][k]:>8,}" for k in contexts)
        print(
            f"  {fraction:>8.2f} {got['available']:>17,} {got['num_blocks']:>7,}"
            f" {got['paper_num_blocks']:>7,}   {got['cache_tokens']:>10,}{convs}"
        )
    if folder == "Qwen3-8B":
        f90 = entry[fraction_key(0.9)]
        say(
            f"  the context length does not enter the planner: the same {f90['cache_tokens']:,}"
            f" tokens hold {f90['conversations']['8k']:,} conversations of {contexts['8k']:,}"
            f" tokens or {f90['conversations']['32k']:,} of {contexts['32k']:,}"
        )
        fp8 = entry["fp8"] = eight_bit(model, cfg, memory, eng, 0.9, contexts)
        entry["fp8_ratio"] = fp8["cache_tokens"] / f90["cache_tokens"]
        has = "a" if fp8["engine_has_cache_dtype_setting"] else "no"
        say(
            f"\n  the cache in float8_e4m3fn at 0.90: the engine has {has} setting for it, so its"
            " planner class sized it and this script reserved the tensors:"
        )
        say(
            f"    {fp8['num_blocks']:,} blocks, {fp8['cache_tokens']:,} tokens"
            f" ({entry['fp8_ratio']:.2f} x bf16's {f90['cache_tokens']:,}),"
            f" tensors {fp8['tensor_bytes']:,} B ({human(fp8['tensor_bytes'])})"
        )
        say(
            f"    conversations of {contexts['full']:,} tokens: {fp8['conversations']['full']:,}"
            f" (bf16: {f90['conversations']['full']:,}); the cost: keys written in 8 bits"
            f" come back with a relative error of {fp8['relative_error']:.2%}"
        )
    drop_model(model, folder, memory)
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_args(parser, weights=True)
    parser.add_argument("--block-size", type=int, help="tokens per block (256; 32 with --tiny)")
    args = parser.parse_args()
    clock, device = Stopwatch(), pick_device(args.device, args.tiny, cpu_needs_tiny=True)
    block, contexts = args.block_size or (32 if args.tiny else 256), scaled_contexts(args.tiny)
    memory = Memory(device)
    print(describe(device, "torch", "transformers"))
    big = one_model("Qwen3-8B", FRACTIONS, args, memory, block, contexts)
    small = one_model("Qwen3-0.6B", (0.9,), args, memory, block, contexts)
    ratio = small["f90"]["cache_tokens"] / big["f90"]["cache_tokens"]
    per = small["bytes_per_token"] / big["bytes_per_token"]
    say(
        f"\nat 0.90 Qwen3-0.6B gets {small['f90']['cache_tokens']:,} cache tokens, {ratio:.2f} x"
        f" Qwen3-8B's: its weights leave more memory free, and its tokens take {per:.2f} x"
        " the bytes"
    )
    at = [big[fraction_key(f)] for f in FRACTIONS]
    results = {
        "device": device.type,
        "sizes_to_card": True,
        "fractions": list(FRACTIONS),
        "contexts": contexts,
        "block_size": block,
        "total": memory.total,
        "qwen3-8b": big,
        "qwen3-0_6b": small,
        "model_ratio": ratio,
        "chart": {
            "fractions": list(FRACTIONS),
            "conversations_full": [a["conversations"]["full"] for a in at],
            "paper_conversations_full": [a["paper_conversations"]["full"] for a in at],
            "cache_tokens": [a["cache_tokens"] for a in at],
        },
    }
    finish("settings", results, memory, clock)


if __name__ == "__main__":
    main()
