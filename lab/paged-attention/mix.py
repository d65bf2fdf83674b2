"""The mix of requests every step uses, and the arithmetic of blocks on paper.

A server's requests differ in length: a short question, a long document to summarise. The mix is
a fixed list drawn with a fixed seed: prompts of 200 to 4,000 tokens and answers of 50 to 1,000,
each drawn log-uniformly (as many requests between 200 and 400 tokens as between 2,000 and
4,000: short requests are common, long ones rarer), so every run, here or on a learner's
machine, counts the same requests. `--tiny` divides every length by 16.

Standard library only: the paper step runs anywhere.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SEED = 31
REQUESTS = 1000  # enough that even the H200's cache, in blocks of 16, runs out before the mix does
PROMPTS = (200, 4000)
ANSWERS = (50, 1000)
BLOCKS = (16, 64, 256)
TINY_DIVISOR = 16  # --tiny: lengths / 16
TINY_BLOCK_DIVISOR = 4  # --tiny: blocks of 4, 16, 64 (the engine takes no block under 4 tokens)


@dataclass(frozen=True)
class Request:
    """One request of the mix: its prompt and answer lengths, in tokens."""

    prompt: int
    answer: int

    @property
    def tokens(self) -> int:
        """Tokens whose keys and values the cache holds at the end: the prompt and every answer
        token but the last (the last one is sampled and returned, never fed back in)."""
        return self.prompt + self.answer - 1


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    """A whole number between low and high, drawn uniformly on a log scale."""
    return min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def the_mix(count: int = REQUESTS, tiny: bool = False, seed: int = SEED) -> list[Request]:
    """The fixed mix: `count` requests drawn with `seed` (lengths / 16 with `tiny`)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        prompt, answer = log_uniform(rng, *PROMPTS), log_uniform(rng, *ANSWERS)
        if tiny:
            prompt, answer = max(2, prompt // TINY_DIVISOR), max(2, answer // TINY_DIVISOR)
        out.append(Request(prompt, answer))
    return out


def block_sizes(tiny: bool = False) -> tuple[int, ...]:
    """Tokens per block to compare: 16, 64, 256 (4, 16, 64 with --tiny)."""
    return tuple(b // TINY_BLOCK_DIVISOR for b in BLOCKS) if tiny else BLOCKS


def blocks_for(tokens: int, block: int) -> int:
    """Whole blocks a request of `tokens` tokens holds."""
    return math.ceil(tokens / block)


def waste(tokens: int, block: int) -> int:
    """Token slots left empty in a request's last block."""
    return blocks_for(tokens, block) * block - tokens


def fit_in_order(lengths: list[int], capacity: int, cost: int | None = None) -> int:
    """How many requests, taken in order, fit a cache of `capacity` slots at once: each takes
    `cost` slots (a fixed reservation) or, without it, its own length."""
    used = count = 0
    for length in lengths:
        need = cost if cost is not None else length
        if used + need > capacity:
            break
        used += need
        count += 1
    return count


def paged_fit(requests: list[Request], cache_tokens: int, block: int) -> int:
    """Requests of the mix, in order, whose blocks fit a cache of `cache_tokens` token slots
    (cut into whole blocks of `block` tokens)."""
    blocks = cache_tokens // block
    return fit_in_order([blocks_for(r.tokens, block) for r in requests], blocks)


def static_fit(cache_tokens: int, reservation: int) -> int:
    """Requests that fit when each reserves `reservation` token slots, whatever its length."""
    return cache_tokens // reservation


def summary(values: list[int]) -> dict[str, float]:
    """Smallest, median, mean and largest of some lengths."""
    ordered = sorted(values)
    return {
        "min": ordered[0],
        "median": ordered[len(ordered) // 2],
        "mean": sum(ordered) / len(ordered),
        "max": ordered[-1],
    }


def last_block_waste(requests: list[Request], block: int) -> dict[str, float | int]:
    """The slots left empty in the last block of each request, against half a block each."""
    wasted = [waste(r.tokens, block) for r in requests]
    total = sum(wasted)
    held = sum(blocks_for(r.tokens, block) for r in requests) * block
    return {
        "block": block,
        "requests": len(requests),
        "blocks": held // block,
        "slots": held,
        "tokens": held - total,
        "wasted_tokens": total,
        "wasted_per_request": total / len(requests),
        "predicted_per_request": block / 2,
        "per_request_over_predicted": total / len(requests) / (block / 2),
        "wasted_share": total / held,
    }
