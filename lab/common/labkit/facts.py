"""The course's facts (facts.toml, beside this file) and the engines' memory rules as functions.

    facts.fact("cards.rtx-4090.torch_total")        Fact(value=..., unit='GiB', source=...)
    facts.card("h200").torch_total                  150,109,880,320 (bytes, as PyTorch sees it)
    facts.model("qwen3-8b")["num_key_value_heads"]  8
    facts.vllm("rtx-4090", weights=..., activation_peak=..., non_torch=...)     a Budget
    facts.transformers("h200", weights=...)                                     a Budget
    facts.llama_cpp(context=32_768, bytes_per_token=147_456)                    a Budget
    budget.conversations(147_456, 32_768)           how many conversations of 32,768 tokens fit

Each engine plans its cache from its own starting point, and a Budget names the rule it used
(`budget.rule`) so a page can say which one a number assumes:

    vllm          a share (gpu_memory_utilization) of the whole card as PyTorch sees it; the
                  weights, non-torch memory, the profile run's activation peak and (since 0.21.0)
                  the CUDA graphs are paid inside it; the cache gets the rest
    transformers  a share (max_memory_percent) of the memory still free once the weights are
                  loaded; its planner then fits the largest batch's activations and the cache
    llama-cpp     no share: the cache is the context it is given, times the bytes per token

Standard library only (tomllib), so paper steps use it anywhere.
"""

from __future__ import annotations

import difflib
import functools
import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .units import human, to_base

PATH = Path(__file__).with_name("facts.toml")
MEASURED = "measured"
CONTEXT_CARD = "h200"
"""The card whose measured CUDA context stands in for a card whose own was never measured."""


class FactsError(KeyError):
    """A fact that is not in facts.toml (the message names it and the close match)."""

    def __str__(self) -> str:
        return str(self.args[0])


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    with open(path, "rb") as file:
        return tomllib.load(file)


def load(path: str | Path | None = None) -> dict[str, Any]:
    """facts.toml as tomllib reads it (read once per process)."""
    return _load(str(Path(path or PATH).resolve()))


def _names(node: Any, prefix: str = "") -> list[str]:
    """Every dotted name under a node, for suggestions."""
    if not isinstance(node, dict):
        return [prefix] if prefix else []
    out = [prefix] if prefix else []
    for key, child in node.items():
        out += _names(child, f"{prefix}.{key}" if prefix else key)
    return out


def get(name: str, path: str | Path | None = None) -> Any:
    """The node at a dotted name (a fact's table, a card's table, a plain field)."""
    node: Any = load(path)
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            close = difflib.get_close_matches(name, _names(load(path)), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise FactsError(f"no fact '{name}' in {Path(path or PATH).name}{hint}")
        node = node[part]
    return node


@dataclass(frozen=True)
class Fact:
    """One fact: a value with its unit, where it comes from and when it was read."""

    name: str
    value: Any
    unit: str
    source: str
    date: str
    note: str = ""
    run: str | None = None

    @property
    def base(self) -> float:
        """The value in base units: bytes, bytes or FLOP per second, seconds, tokens."""
        return to_base(float(self.value), self.unit)

    @property
    def cite(self) -> str:
        """Where it comes from, in a few words: 'measured in run ...' or its source."""
        where = f"measured in run {self.run}" if self.source == MEASURED else self.source
        return f"{where} ({self.date})"


def fact(name: str, path: str | Path | None = None) -> Fact:
    """The fact at a dotted name, such as 'cards.rtx-4090.torch_total'."""
    node = get(name, path)
    if not (isinstance(node, dict) and {"value", "source", "date"} <= set(node)):
        raise FactsError(
            f"'{name}' in {Path(path or PATH).name} is not a fact (value, source, date)"
        )
    return Fact(
        name,
        node["value"],
        str(node.get("unit", "none")),
        str(node["source"]),
        str(node["date"]),
        str(node.get("note", "")),
        node.get("run"),
    )


def _bytes(table: dict[str, Any], name: str, key: str) -> int | None:
    return round(fact(f"{name}.{key}").base) if key in table else None


@dataclass(frozen=True)
class Card:
    """A card's figures in base units (bytes, bytes and FLOP per second); None where not known."""

    key: str
    name: str
    label: str
    memory: int
    """As the datasheet prints it (141 GB = 141e9 B)."""
    bandwidth: float
    bf16_flops: float
    smi_total: int | None
    torch_total: int | None
    cuda_context: int | None
    prices: dict[str, dict[str, Any]] = field(default_factory=dict)


def card(key: str, path: str | Path | None = None) -> Card:
    """One card of facts.toml, by its key ('rtx-4090')."""
    t = get(f"cards.{key}", path)
    name = f"cards.{key}"
    return Card(
        key,
        t["name"],
        t["label"],
        round(fact(f"{name}.memory", path).base),
        fact(f"{name}.bandwidth", path).base,
        fact(f"{name}.bf16_flops", path).base,
        _bytes(t, name, "smi_total"),
        _bytes(t, name, "torch_total"),
        _bytes(t, name, "cuda_context"),
        {k: dict(v) for k, v in t.get("prices", {}).items()},
    )


def card_named(smi_name: str, path: str | Path | None = None) -> Card | None:
    """The card whose `match` words all appear in the name nvidia-smi prints and whose `avoid`
    words do not (the first that fits); None for a card the facts do not know."""
    upper = smi_name.upper()
    for key, t in load(path)["cards"].items():
        if all(w in upper for w in t["match"]) and not any(w in upper for w in t["avoid"]):
            return card(key, path)
    return None


def model(key: str, path: str | Path | None = None) -> dict[str, Any]:
    """A model's config.json fields as facts.toml keeps them (plain values, facts as values)."""
    t = get(f"models.{key}", path)
    return {k: (v["value"] if isinstance(v, dict) else v) for k, v in t.items()}


@dataclass(frozen=True)
class Room:
    """What a program can use on a card: PyTorch's total less the CUDA context, and how that
    was worked out, in words."""

    bytes: int
    text: str


def context_of(key: str, path: str | Path | None = None) -> tuple[int, str]:
    """The CUDA context on a card: its own measured one, else the H200's, said so."""
    own = card(key, path).cuda_context
    if own is not None:
        return own, "its CUDA context as measured"
    h200 = card(CONTEXT_CARD, path).cuda_context
    assert h200 is not None, "facts.toml must hold cards.h200.cuda_context"
    return h200, f"about {human(h200)} of CUDA context (as measured on the H200)"


def room(key: str, path: str | Path | None = None) -> Room:
    """Bytes left for a program's tensors on a card: torch_total - the CUDA context."""
    c = card(key, path)
    if c.torch_total is None:
        raise FactsError(f"cards.{key}.torch_total is not in facts.toml: measure it (the total of"
                         " torch.cuda.mem_get_info()) and add it")  # fmt: skip
    context, how = context_of(key, path)
    text = (
        f"a {c.memory / 1e9:.0f} GB card ({c.label}: {human(c.torch_total)} as PyTorch sees it,"
        f" less {how}: {human(c.torch_total - context)})"
    )
    return Room(c.torch_total - context, text)


# --- the engines' memory rules -----------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """The memory an engine gives its KV cache, the rule it used, and the lines of the sum."""

    engine: str
    rule: str
    cache: int
    """Bytes for the KV cache."""
    lines: dict[str, int]
    card: str | None = None
    share: float | None = None

    def conversations(self, bytes_per_token: int, tokens: int, block: int = 1) -> int:
        """How many conversations of `tokens` tokens the cache holds at once (in whole blocks of
        `block` tokens when the engine pages its cache)."""
        return conversations(self.cache, bytes_per_token, tokens, block)

    def as_dict(self) -> dict[str, Any]:
        """The budget for a results file."""
        return asdict(self)


def conversations(cache: int, bytes_per_token: int, tokens: int, block: int = 1) -> int:
    """Conversations of `tokens` tokens that fit a cache of `cache` bytes; with `block`, each
    takes whole blocks of `block` tokens."""
    if cache <= 0:
        return 0
    if block <= 1:
        return cache // (bytes_per_token * tokens)
    blocks = cache // (block * bytes_per_token)
    return blocks // math.ceil(tokens / block)


def concurrency(cache: int, bytes_per_token: int, tokens: int) -> float:
    """vLLM's 'Maximum concurrency for N tokens per request': cache / (bytes per token x N)."""
    return cache / (bytes_per_token * tokens)


def _weights(weights: int | None, model_key: str | None, path: str | Path | None) -> int:
    if weights is not None:
        return int(weights)
    if model_key is None:
        raise ValueError("give the weights' bytes or a model key")
    from .configs import weight_bytes

    return weight_bytes(model(model_key, path))


def _total(key: str, path: str | Path | None) -> tuple[Card, int]:
    c = card(key, path)
    if c.torch_total is None:
        room(key, path)  # raises, naming the missing fact
    assert c.torch_total is not None
    return c, c.torch_total


def vllm(
    card_key: str,
    *,
    activation_peak: int,
    non_torch: int,
    cuda_graphs: int = 0,
    weights: int | None = None,
    model_key: str | None = None,
    share: float | None = None,
    path: str | Path | None = None,
) -> Budget:
    """vLLM's KV cache on a card: ceil(share x PyTorch's total), less the weights, the non-torch
    memory, the activation peak of its profile run and the CUDA graphs (counted since 0.21.0)."""
    c, total = _total(card_key, path)
    share = fact("engines.vllm.gpu_memory_utilization", path).value if share is None else share
    weight = _weights(weights, model_key, path)
    requested = math.ceil(share * total)
    cache = requested - weight - non_torch - activation_peak - cuda_graphs
    rule = (
        f"vLLM: gpu_memory_utilization {share:.2f} of the {human(total)} PyTorch sees on the"
        f" {c.label}, the weights, non-torch memory, activation peak and CUDA graphs paid inside it"
    )
    lines = {
        "total": total,
        "requested": requested,
        "weights": weight,
        "non_torch": non_torch,
        "activation_peak": activation_peak,
        "cuda_graphs": cuda_graphs,
        "cache": cache,
    }
    return Budget("vllm", rule, cache, lines, card_key, share)


def transformers(
    card_key: str,
    *,
    weights: int | None = None,
    model_key: str | None = None,
    share: float | None = None,
    context: int | None = None,
    path: str | Path | None = None,
) -> Budget:
    """transformers' continuous batching: `share` of the memory free once the weights are loaded
    (PyTorch's total less the CUDA context and the weights). That is what its planner divides
    between the largest batch's activations and the cache: `cache` here is the share, before
    the planner's working space comes out of it."""
    c, total = _total(card_key, path)
    share = fact("engines.transformers.max_memory_percent", path).value if share is None else share
    weight = _weights(weights, model_key, path)
    if context is None:
        context, how = context_of(card_key, path)
    else:
        how = "the CUDA context given"
    free = total - context - weight
    available = int(max(free, 0) * share)
    rule = (
        f"transformers: max_memory_percent {share:.2f} of the memory free after the weights on"
        f" the {c.label} ({human(total)} as PyTorch sees it, less {how} and the weights)"
    )
    lines = {"total": total, "context": context, "weights": weight, "free": free,
             "cache": available}  # fmt: skip
    return Budget("transformers", rule, available, lines, card_key, share)


def llama_cpp(context: int, bytes_per_token: int) -> Budget:
    """llama.cpp's KV cache: the context it is given (all slots together) times the bytes per
    token of its cache types, whatever the card."""
    rule = (
        f"llama.cpp: the {context:,}-token context it is given (-c), at {bytes_per_token:,} B"
        " a token"
    )
    cache = context * bytes_per_token
    return Budget("llama-cpp", rule, cache, {"context": context, "cache": cache})
