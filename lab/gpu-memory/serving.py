"""The serving path the lab measures: transformers' continuous batching with its paged KV cache.

`model.generate_batch(prompts, generation_config=..., continuous_batching_config=...)` runs the
engine inside this process. At start-up its planner reads the GPU's free memory, takes
`max_memory_percent` of it and reserves a cache of whole blocks; a scheduler then packs the
requests into batches, giving each request blocks as it grows.

On the CPU (--tiny) there is no GPU memory to read. The engine is then told it runs on a
PRETEND GPU of 256 MiB: while a tiny run lasts, the lab replaces the one function the planner
asks for memory figures (`get_device_and_memory_breakdown` in transformers' cache module).
Everything else, the planner's sums included, runs as it does on a GPU.
"""

from __future__ import annotations

import gc
import logging
import random
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import fields
from math import ceil
from pathlib import Path
from time import perf_counter
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3Config
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.continuous_batching import cache as cache_module

from labkit import logs
from labkit.checks import check
from labkit.configs import load_config, tiny_config
from labkit.memory import PeakMemory
from labkit.units import MIB
from planner import Engine

LAB = Path(__file__).resolve().parent
TINY_TOTAL = 256 * MIB  # the pretend GPU of --tiny
TINY_CONTEXT = 16 * MIB  # what the pretend GPU loses to a "CUDA context"
LARGE_ROUND = 2 * MIB  # the CUDA caching allocator rounds large tensors up to 2 MiB
# transformers 5.24 plans the cache in "sectors" of one flat tensor; 5.17 in blocks per layer
SECTORS = hasattr(
    cache_module.PagedAttentionMemoryHandler, "infer_max_batch_tokens_and_num_sectors"
)
RELEASE = "5.24" if SECTORS else "5.17"
# PyTorch's SDPA attention over the paged cache, the same on every machine (5.24 drops "paged|")
ATTENTION = "sdpa" if SECTORS else "paged|sdpa"
# 5.24 keeps the largest batch at 8,192 tokens unless told: too large for the pretend GPU
TINY_BATCH_TOKENS = 3072
# The engine's settings worth recording, as it resolved them for a run.
RESOLVED = (
    "max_memory_percent",
    "num_blocks",
    "max_batch_tokens",
    "max_requests_per_batch",
    "max_blocks_per_request",
    "use_async_batching",
    "use_cuda_graph",
)


def cache_dtype_setting() -> bool:
    """Whether ContinuousBatchingConfig has any setting for the cache's number format."""
    return any("dtype" in f.name for f in fields(ContinuousBatchingConfig))


def cb_config(**settings: Any) -> ContinuousBatchingConfig:
    """ContinuousBatchingConfig(**settings); `block_size` is called `page_size` from 5.24 on."""
    if SECTORS and "block_size" in settings:
        settings["page_size"] = settings.pop("block_size")
    return ContinuousBatchingConfig(**settings)


class Memory:
    """The device's memory, read the way the engine's planner reads it (or a pretend GPU)."""

    def __init__(self, device: torch.device) -> None:
        # The engine runs gc.collect() each time it stops; moving the objects of the imports (some
        # hundreds of thousands) out of the collector's sight makes each pass take milliseconds.
        gc.freeze()
        self.device = device
        self.pretend = device.type != "cuda"
        self.held: dict[str, int] = {}  # pretend GPU: the bytes of the weights it holds
        if self.pretend:
            self.total, self.context = TINY_TOTAL, TINY_CONTEXT
            self.peaks = PeakMemory(device)  # zeros on the CPU
            return
        torch.zeros(1, device=device)  # start the CUDA context and the allocator
        torch.cuda.synchronize(device)
        free, self.total = torch.cuda.mem_get_info(device)
        self.context = self.total - free - torch.cuda.memory_reserved(device)
        self.peaks = PeakMemory(device)  # the step's peak, and each engine run's (part())

    def hold(self, name: str, nbytes: int) -> None:
        """Count a model's weights on the pretend GPU (no-op on a real one)."""
        self.held[name] = nbytes

    def drop(self, name: str) -> None:
        """Forget a model's weights on the pretend GPU."""
        self.held.pop(name, None)

    def free(self) -> int:
        """Free bytes once PyTorch has handed back its cached blocks, as the planner reads them."""
        if self.pretend:
            return self.total - self.context - sum(self.held.values())
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        return int(torch.cuda.mem_get_info(self.device)[0])

    def free_now(self) -> int:
        """Free bytes as they are, without handing anything back (0 on the pretend GPU)."""
        return 0 if self.pretend else int(torch.cuda.mem_get_info(self.device)[0])

    def allocated(self) -> int:
        """Bytes in live tensors (the pretend GPU counts only the weights it holds)."""
        if self.pretend:
            return sum(self.held.values())
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.memory_allocated(self.device))

    def reserved(self) -> int:
        """Bytes PyTorch's allocator holds from the GPU."""
        return self.allocated() if self.pretend else int(torch.cuda.memory_reserved(self.device))

    def breakdown(self) -> tuple[torch.device, int, int, int]:
        """The pretend GPU as the engine's planner asks: device, total, reserved, allocated."""
        used = self.context + sum(self.held.values())
        return self.device, self.total, used, used

    @contextmanager
    def engine_reads_me(self) -> Iterator[None]:
        """On the pretend GPU, let the engine's planner read this object's figures."""
        if not self.pretend:
            yield
            return
        real = cache_module.get_device_and_memory_breakdown
        cache_module.get_device_and_memory_breakdown = self.breakdown
        try:
            yield
        finally:
            cache_module.get_device_and_memory_breakdown = real

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype, budget: list[int]) -> torch.Tensor:
        """An uninitialised tensor; on the pretend GPU, raise OutOfMemoryError past budget[0] bytes.

        budget is [bytes left]; the pretend GPU rounds each tensor up to 2 MiB as the CUDA
        caching allocator does with large tensors. On a real GPU the allocator's own cap decides.
        """
        if self.pretend:
            nbytes = ceil(torch.Size(shape).numel() * dtype.itemsize / LARGE_ROUND) * LARGE_ROUND
            if nbytes > budget[0]:
                raise torch.OutOfMemoryError(
                    f"pretend GPU: {nbytes:,} B asked, {budget[0]:,} B left"
                )
            budget[0] -= nbytes
        return torch.empty(shape, dtype=dtype, device=self.device)


def build_model(
    folder: str, device: torch.device, tiny: bool, memory: Memory, weights: str | None = None
) -> tuple[Any, dict[str, Any], str]:
    """The model in bf16 on `device`, its config as the engine reads it, and how it was made."""
    transformers.logging.set_verbosity_error()  # version notes would drown the lab's output
    if weights:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16).to(device)
        how = f"real weights from {weights}"
    else:
        cfg = load_config(LAB / "models" / folder / "config.json")
        cfg = tiny_config(cfg) if tiny else cfg
        with torch.device(device):  # built where it runs: no copy of 16 GB through the CPU
            model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
        how = "random bf16 weights from its config.json" + (", shrunk (--tiny)" if tiny else "")
    model.eval()
    # Flash attention would change the planner's sums (no mask); ask for SDPA everywhere.
    model.set_attn_implementation(ATTENTION)
    memory.hold(folder, sum(p.nbytes for p in model.parameters()))
    return model, model.config.to_dict(), how


def drop_model(model: Any, folder: str, memory: Memory) -> None:
    """Free a model's weights before the next one is built."""
    memory.drop(folder)
    del model
    gc.collect()
    if not memory.pretend:
        torch.cuda.empty_cache()


def make_prompts(count: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """`count` prompts of random token ids, all different (so no prefix is shared in the cache)."""
    rng = random.Random(seed)
    return [[rng.randrange(1, vocab) for _ in range(length)] for _ in range(count)]


def shown(record: logging.LogRecord) -> bool:
    """Which of the engine's messages reach the transcript: its warnings, less two that do not
    apply here."""
    message = record.getMessage()
    return (
        record.levelno >= logging.WARNING
        # generate_batch warns that a kept manager is sized for this batch: we destroy it after
        and "persistent_manager" not in message
        and "psutil" not in message  # a CPU offloading cap the lab never uses
    )


def engine_log() -> AbstractContextManager[list[str]]:
    """Collect every message of transformers' ContinuousBatchingLogger; print only its warnings."""
    return logs.collect(logs.CONTINUOUS_BATCHING, show=shown)


def logged_available_mib(lines: list[str]) -> int | None:
    """The planner's 'Memory available for cache allocation: N MB' (N is MiB, rounded down)."""
    for line in lines:
        if line.startswith("Memory available for cache allocation:"):
            return int(line.split(":")[1].split()[0])
    return None


def admitted(cache: Any, tokens: int, block: int) -> int:
    """How many conversations of `tokens` tokens the engine's block manager admits at once."""
    need = ceil(tokens / block)
    if SECTORS:  # 5.24 counts, without allocating, the requests its free sectors would take
        cache.evict_cached_blocks()  # finished requests' blocks, kept in case a prompt repeats
        cache.pool.try_to_free_sectors()
        check(cache.pool.num_free_sectors == cache.num_sectors, "the cache kept sectors in use")
        wanted = [dict.fromkeys(cache.cache_allocators, need)] * (cache.num_blocks // need + 1)
        return int(cache.count_storable_requests(wanted))
    ids: list[str] = []
    while cache.allocate_blocks(need, f"probe-{len(ids)}", 0) is not None:
        ids.append(f"probe-{len(ids)}")
    for rid in ids:
        cache.free_blocks(rid)
    check(cache.get_num_free_blocks() == cache.num_blocks, "the probe left blocks allocated")
    return len(ids)


def cache_tensors(cache: Any) -> tuple[int, str]:
    """Bytes of the cache's tensors and their number format: a key and a value tensor per layer
    (5.17), or one flat tensor of bytes holding the sectors (5.24)."""
    if SECTORS:
        return int(cache.cache_tensor.nbytes), str(cache.dtype).removeprefix("torch.")
    tensors = cache.key_cache + cache.value_cache
    return sum(int(t.nbytes) for t in tensors), str(tensors[0].dtype).removeprefix("torch.")


def peak_concurrency(outputs: dict[str, Any]) -> int:
    """The most requests that were running at the same moment, from their lifespans."""
    events = sorted(
        [(o.lifespan[0], 1) for o in outputs.values()]
        + [(o.lifespan[1], -1) for o in outputs.values()]
    )
    running = best = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


def engine_settings(manager: Any, model: Any, block_size: int, batch: int | None) -> Engine:
    """The planner's inputs as the engine resolved them (attention, async batching, ...);
    `batch` is the max_batch_tokens it was given (None: its own choice)."""
    cfg = manager.continuous_batching_config
    flash = "flash" in str(model.config._attn_implementation)
    keep = getattr(model, "_supports_logits_to_keep", None)
    return Engine(
        block_size=block_size,
        cache_bytes=model.dtype.itemsize,
        activation_bytes=model.dtype.itemsize,
        attention_masks=0 if flash else 1,
        io_copies=2 if cfg.use_async_batching else 1,
        max_blocks_per_request=int(cfg.max_blocks_per_request or 0),
        output_rows=2 if cfg.return_logprobs else 1,
        release=RELEASE,
        logits_to_keep=bool(callable(keep) and keep()),
        max_requests_per_batch=int(getattr(cfg, "max_requests_per_batch", None) or 0),
        max_batch_tokens=batch,
    )


def serve(
    model: Any,
    prompts: list[list[int]],
    new_tokens: int,
    memory: Memory,
    contexts: dict[str, int] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Run generate_batch once with a fresh engine; return what it reserved, used and produced.

    `settings` go to ContinuousBatchingConfig (max_memory_percent, block_size, num_blocks, ...).
    """
    gen = GenerationConfig(
        max_new_tokens=new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0
    )
    if SECTORS and memory.pretend:
        settings.setdefault("max_batch_tokens", TINY_BATCH_TOKENS)
    cb = cb_config(**settings)
    free = memory.free()  # the planner reads the same figure a moment later
    before = memory.allocated()
    memory.peaks.part()  # the engine run's peak starts here
    with engine_log() as lines, memory.engine_reads_me():
        start = perf_counter()
        outputs = model.generate_batch(
            prompts, generation_config=gen, continuous_batching_config=cb, persistent_manager=True
        )  # kept so that we can read its cache
        wall = perf_counter() - start
    peak = memory.peaks.part()
    manager = getattr(model, "_cached_continuous_batching_manager", None)
    check(
        manager is not None and manager.batch_processor is not None,
        "the engine kept no manager to read",
    )
    cache = manager.batch_processor.cache
    check(len(outputs) == len(prompts), f"{len(prompts) - len(outputs)} requests got no answer")
    for out in outputs.values():
        check(out.error is None, f"a request failed: {out.error}")
        check(len(out.generated_tokens) == new_tokens, "a request stopped before its new tokens")
    block = int(cb.page_size if SECTORS else cache.block_size)
    nbytes, dtype = cache_tensors(cache)
    facts: dict[str, Any] = {
        "release": RELEASE,
        "num_blocks": cache.num_blocks,
        "block_size": block,
        "max_batch_tokens": cache.max_batch_tokens,
        "cache_tokens": cache.num_blocks * block,
        "cache_tensor_bytes": nbytes,
        "cache_dtype": dtype,
        "free_before": free,
        "available_logged_mib": logged_available_mib(lines),
        "planner_lines": [
            s for s in lines if s.startswith(("Memory available", "Paged cache initialized"))
        ],
        "attention": str(model.config._attn_implementation),
        "safety_margin": manager.batch_processor.scheduler.safety_margin,
        "allocated_before": before,
        "allocated_after": memory.allocated(),
        "peak_allocated": peak["allocated"],
        "peak_reserved": peak["reserved"],
        "reserved_after": memory.reserved(),
        "free_after": memory.free_now(),
        "wall_s": wall,
        "requests": len(outputs),
        "generated_tokens": sum(len(o.generated_tokens) for o in outputs.values()),
        "peak_concurrency": peak_concurrency(outputs),
        "admitted": {k: admitted(cache, c, block) for k, c in (contexts or {}).items()},
    }
    if settings.get("max_memory_percent") is not None:
        facts["available"] = int(free * settings["max_memory_percent"])
    facts["engine"] = engine_settings(manager, model, block, settings.get("max_batch_tokens"))
    resolved = manager.continuous_batching_config
    facts["resolved"] = {k: repr(getattr(resolved, k)) for k in RESOLVED}
    alive = weakref.ref(cache)
    del cache, manager
    model.destroy_cached_continuous_batching_manager()
    if alive() is not None:  # the engine's objects hold cycles: a gc pass frees them
        gc.collect()
    check(
        alive() is None, "the engine's cache outlived its manager: its memory would not come back"
    )
    if not memory.pretend:
        torch.cuda.empty_cache()
    left = memory.allocated() - before
    check(left < 64 * MIB, f"{left:,} B of the engine's memory did not come back after it stopped")
    return facts
