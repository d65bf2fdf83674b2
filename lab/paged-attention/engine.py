"""The serving engine the GPU steps drive: transformers' continuous batching and its paged cache.

The engine runs in this process. Requests go to its manager (`add_request(ids, max_new_tokens=)`,
or `generate_batch` for a batch of equal requests); a scheduler packs them into batches and gives
each request blocks of the cache as it grows. Two releases are supported, and they name things
differently:

    transformers 5.17   ContinuousBatchingConfig(block_size=...)   attention "paged|sdpa"
                        one key and one value tensor per layer, blocks of block_size tokens;
                        per request, cache.group_cache_managers[i].block_table[request_id]
    transformers 5.24   ContinuousBatchingConfig(page_size=...)    attention "sdpa"
                        (block_size is deprecated)                 (auto_switch_to_flash=False)
                        one flat byte tensor cut into sectors; per request,
                        cache.cache_allocators[type].block_table[request_id]

In both, a block holds `block size` tokens of keys and values for every layer, and the planner
logs "Paged cache initialized: ..." (logger ContinuousBatchingLogger). `Trace` watches the
engine's own cache object: the blocks each request holds when it is freed, and the most blocks
and requests held at once.

On the CPU (--tiny) the engine's memory reading is answered with a pretend GPU of 1 GiB (the
planner asks CUDA how much is free; the CPU has no such figure).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.continuous_batching import cache as cache_module

from labkit import configs, logs
from labkit.checks import check

MODEL = Path(__file__).with_name("models") / "Qwen3-8B" / "config.json"
LOGGER = logs.CONTINUOUS_BATCHING
PRETEND_TOTAL = 2**30  # --tiny on the CPU: the memory the planner is told the "GPU" has
SETTINGS = {f.name for f in fields(ContinuousBatchingConfig)}
PAGE_SIZE = "page_size" if "page_size" in SETTINGS else "block_size"
"""The name of the block size setting in the installed release: page_size from 5.18 (block_size
still accepted, with a deprecation warning), block_size before."""
ATTENTION = "sdpa" if "auto_switch_to_flash" in SETTINGS else "paged|sdpa"
"""PyTorch's SDPA over the paged cache (gathered per batch), the same on every machine."""


def cb_config(block: int, num_blocks: int, max_batch_tokens: int, **more: Any) -> Any:
    """A ContinuousBatchingConfig with a fixed cache of `num_blocks` blocks of `block` tokens
    (fixed, so the same run fits a 24 GB card and an H200), no prefix sharing (each request's
    blocks are its own), no CUDA graphs and no asynchronous double buffering."""
    settings: dict[str, Any] = {
        PAGE_SIZE: block,
        "num_blocks": num_blocks,
        "max_batch_tokens": max_batch_tokens,
        "allow_block_sharing": False,
        "use_cuda_graph": False,
        "use_async_batching": False,
    }
    if "auto_switch_to_flash" in SETTINGS:
        settings["auto_switch_to_flash"] = False
    return ContinuousBatchingConfig(**(settings | more))


def greedy(new_tokens: int) -> Any:
    """Greedy decoding of exactly `new_tokens` tokens (no end-of-sequence token stops it)."""
    return GenerationConfig(
        max_new_tokens=new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0
    )


def build_model(
    device: Any, tiny: bool, weights: str | None = None
) -> tuple[Any, dict[str, Any], str]:
    """Qwen3-8B in bf16 on `device` (random weights from its config.json, shrunk with --tiny),
    or real weights from the Hugging Face Hub or a folder; its config and how it was made."""
    transformers.logging.set_verbosity_error()
    if weights:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16).to(device)
        how = f"real weights from {weights}"
    else:
        cfg = configs.load_config(MODEL)
        cfg = configs.tiny_config(cfg) if tiny else cfg
        with torch.device(device):  # built where it runs: no 16 GB copy through the CPU
            model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
        how = "random bf16 weights from its config.json" + (", shrunk (--tiny)" if tiny else "")
    model.eval()
    model.set_attn_implementation(ATTENTION)
    return model, model.config.to_dict(), how


def allocators(cache: Any) -> list[Any]:
    """The engine's per-attention-type allocators, each with a block_table dict."""
    if hasattr(cache, "cache_allocators"):
        return list(cache.cache_allocators.values())
    return list(cache.group_cache_managers)


def blocks_held(cache: Any, request_id: str) -> int:
    """Blocks a request holds now, over every allocator."""
    return sum(len(a.block_table.get(request_id, ())) for a in allocators(cache))


def blocks_in_use(cache: Any) -> tuple[int, int]:
    """Blocks held by all requests now, and how many requests hold any."""
    tables = [t for a in allocators(cache) for t in a.block_table.values() if t]
    return sum(len(t) for t in tables), len(tables)


@dataclass
class Trace:
    """What the engine's cache did during a run, read from its own objects."""

    freed: list[tuple[str, int]] = field(default_factory=list)
    """(request id, blocks it held) at each free: a request freed twice was preempted."""
    peak_blocks: int = 0
    peak_requests: int = 0
    caches: list[dict[str, Any]] = field(default_factory=list)
    """cache_facts() of each cache the engine built (the objects themselves are not kept: the
    engine's memory must come back when it stops)."""
    _seen: list[int] = field(default_factory=list)

    def final_blocks(self) -> dict[str, int]:
        """Blocks each request held when it was freed the last time (at its end)."""
        return dict(self.freed)

    def preempted(self) -> int:
        """Frees of requests that came back later: the engine's preemptions."""
        return len(self.freed) - len(self.final_blocks())


@contextmanager
def trace() -> Iterator[Trace]:
    """Watch every PagedAttentionCache while the block is running (the engine builds its cache
    in its own thread, so the class is watched, not one object)."""
    cls = cache_module.PagedAttentionCache
    got = Trace()
    free = cls.free_blocks
    grow_name = (
        "can_store_request_tokens"
        if hasattr(cls, "can_store_request_tokens")
        else "allocate_blocks"
    )
    grow = getattr(cls, grow_name)

    def freeing(self: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        held = blocks_held(self, request_id)
        if held:  # a request may be freed again once it holds nothing (5.24 does so)
            got.freed.append((request_id, held))
        return free(self, request_id, *args, **kwargs)

    def growing(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = grow(self, *args, **kwargs)
        if id(self) not in got._seen:
            got._seen.append(id(self))
            got.caches.append(cache_facts(self))
        used, holders = blocks_in_use(self)
        got.peak_blocks, got.peak_requests = (
            max(got.peak_blocks, used),
            max(got.peak_requests, holders),
        )
        return out

    cls.free_blocks, cls_grow = freeing, grow_name  # type: ignore[method-assign]
    setattr(cls, cls_grow, growing)
    try:
        yield got
    finally:
        cls.free_blocks = free  # type: ignore[method-assign]
        setattr(cls, cls_grow, grow)


def engine_log() -> AbstractContextManager[list[str]]:
    """Every message of the engine's logger (ContinuousBatchingLogger), at level INFO; none is
    printed as it comes: the script prints what it keeps, not twice."""
    return logs.collect(LOGGER)


@contextmanager
def memory_reading(device: Any) -> Iterator[None]:
    """On the CPU, answer the planner's question about free memory with a pretend 1 GiB GPU."""
    if device.type == "cuda":
        yield
        return
    real = cache_module.get_device_and_memory_breakdown
    cache_module.get_device_and_memory_breakdown = lambda: (device, PRETEND_TOTAL, 0, 0)
    try:
        yield
    finally:
        cache_module.get_device_and_memory_breakdown = real


def serve(
    model: Any, prompts: list[list[int]], answers: list[int], settings: Any, device: Any
) -> tuple[dict[str, Any], Trace, list[str]]:
    """Send each prompt with its own answer length to a fresh engine; wait for every answer.
    The outputs by request id, what the cache did and the engine's log."""
    outputs: dict[str, Any] = {}
    running = model.continuous_batching_context_manager(
        generation_config=greedy(max(answers)),
        continuous_batching_config=settings,
        block=True,
        timeout=60,
    )
    with engine_log() as lines, trace() as seen, memory_reading(device), running as manager:
        for i, (ids, answer) in enumerate(zip(prompts, answers, strict=True)):
            manager.add_request(ids, request_id=f"req_{i}", max_new_tokens=answer)
        while len(outputs) < len(prompts):
            out = manager.get_result(timeout=1)
            if out is not None and out.is_finished():
                outputs[out.request_id] = out
            check(manager.is_running() or len(outputs) == len(prompts),
                  "the engine's thread stopped before every request was answered")  # fmt: skip
    for i, answer in enumerate(answers):
        out = outputs[f"req_{i}"]
        check(out.error is None, f"request {i} failed in the engine: {out.error}")
        check(len(out.generated_tokens) == answer, f"request {i} got {len(out.generated_tokens)}"
              f" tokens, not the {answer} asked")  # fmt: skip
    return outputs, seen, lines


def cache_facts(cache: Any) -> dict[str, Any]:
    """The engine's cache as it was built: blocks, block size, bytes."""
    block = getattr(cache, "block_size", None) or allocators(cache)[0].tokens_per_page
    if hasattr(cache, "cache_tensor"):
        nbytes = cache.cache_tensor.nbytes
    else:
        nbytes = sum(t.nbytes for t in cache.key_cache + cache.value_cache)
    return {"num_blocks": int(cache.num_blocks), "block_size": int(block),
            "tensor_bytes": int(nbytes)}  # fmt: skip


def planner_lines(lines: list[str]) -> list[str]:
    """The planner's own lines about the cache it made."""
    return [s for s in lines if s.startswith(("Paged cache initialized", "Memory available"))]
