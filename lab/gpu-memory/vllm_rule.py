"""vLLM's memory rule on paper, checked against a published start-up log.

Standard library only. vLLM takes `gpu_memory_utilization` of the whole card as PyTorch sees
it; the weights, the memory outside PyTorch, the activation peak of its profile run and (since
0.21.0) its CUDA graphs are paid inside that share, and the KV cache gets the rest. The log
(facts.toml, crosschecks.vllm-a100): an A100-40GB serving Llama-3-8B.

Before it starts, vLLM runs the model once on a dummy batch of `max_num_batched_tokens` tokens
(its profile run) and measures the working space that took. On paper, `working_space()`
estimates it from the model's config: the hidden states and residual of every token, the
largest tensors one layer makes (the MLP's gate and up projections and their product), and the
fp32 logits of the rows the sampler reads (one per sequence, `max_num_seqs`). `predict()` then
gives the KV cache and the concurrency from what is known before the engine starts.
"""

from __future__ import annotations

from typing import Any

from labkit import facts
from labkit.checks import check
from labkit.configs import kv_bytes_per_token, weight_bytes
from labkit.units import GIB

LOG = "crosschecks.vllm-a100"
MAX_NUM_SEQS = 256  # vLLM's default number of sequences in a batch (the profile run's too)
# the profile batch assumed for this lesson's cards: max_num_batched_tokens of 8,192 tokens
PROFILE_TOKENS = 8_192
FP32 = 4


def working_space(cfg: dict[str, Any], tokens: int, rows: int = MAX_NUM_SEQS) -> dict[str, int]:
    """The profile run's activation peak on paper, in bytes, part by part: a batch of `tokens`
    tokens through one layer at a time, and the fp32 logits of `rows` sampled rows."""
    hidden, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    a = 2  # bf16 activations
    parts = {
        "residual": 2 * tokens * hidden * a,  # the hidden states and the residual stream
        "layer": tokens * 3 * inter * a,  # gate and up projections (2 x inter), their product
        "logits": min(rows, tokens) * vocab * FP32,  # the sampler's rows, in fp32
    }
    parts["total"] = sum(parts.values())
    return parts


def predict(tokens: int | None = None, rows: int = MAX_NUM_SEQS) -> dict[str, Any]:
    """vLLM's budget on the log's card, predicted from the card as PyTorch sees it, the share,
    the model's config and the profile batch (the model's context when not given), beside the
    same rule fed the log's measured working space."""
    x = facts.get(LOG)
    cfg = facts.model(x["model"])
    tokens = tokens or int(cfg["max_position_embeddings"])
    space = working_space(cfg, tokens, rows)
    per_token = kv_bytes_per_token(cfg)
    n = int(logged("tokens_per_request"))
    share = logged("gpu_memory_utilization")
    ours = facts.vllm(x["card"], model_key=x["model"], share=share,
                      activation_peak=space["total"], non_torch=0)  # fmt: skip
    theirs = facts.vllm(
        x["card"],
        model_key=x["model"],
        share=share,
        activation_peak=round(logged("activation_peak") * GIB),
        non_torch=round(logged("non_torch") * GIB),
    )
    per_layer_token = space["residual"] // tokens + space["layer"] // tokens
    implied = (round(logged("activation_peak") * GIB) - space["logits"]) // per_layer_token
    return {
        "profile_tokens": tokens,
        "logit_rows": min(rows, tokens),
        "working_space": space,
        "activation_peak": space["total"],
        "non_torch": 0,
        "cuda_graphs": 0,  # that release did not count them inside the share
        "cache": ours.cache,
        "concurrency": facts.concurrency(ours.cache, per_token, n),
        "logged_activation_peak": round(logged("activation_peak") * GIB),
        "logged_non_torch": round(logged("non_torch") * GIB),
        "cache_with_logged": theirs.cache,
        "concurrency_with_logged": facts.concurrency(theirs.cache, per_token, n),
        "implied_profile_tokens": implied,
    }


def on_card(
    card_key: str, cfg: dict[str, Any], contexts: dict[str, int], tokens: int = PROFILE_TOKENS
) -> dict[str, Any]:
    """vLLM's budget for a model on a card, predicted before it starts: its default share (the
    facts' gpu_memory_utilization) of the card as PyTorch sees it, less the weights from the
    config and the working space estimated for a profile batch of `tokens` tokens. The memory
    outside PyTorch and the CUDA graphs are not estimated (0): the prediction is an upper bound.
    vLLM starts only when at least its share is free: the card less the CUDA context."""
    space = working_space(cfg, tokens)
    b = facts.vllm(card_key, weights=weight_bytes(cfg), activation_peak=space["total"], non_torch=0)
    per_token = kv_bytes_per_token(cfg)
    block = int(facts.fact("engines.vllm.block_size").value)
    free = facts.room(card_key).bytes  # what is free when it starts: the total less the context
    return {
        "card": card_key,
        "share": b.share,
        "profile_tokens": tokens,
        "working_space": space,
        "budget": b.as_dict(),
        "cache": b.cache,
        "cache_bytes_per_token": per_token,
        "conversations": {k: b.conversations(per_token, n, block) for k, n in contexts.items()},
        "concurrency": {
            k: round(max(b.cache, 0) / (per_token * n), 2) for k, n in contexts.items()
        },
        "free_at_start": free,
        "starts": free >= b.lines["requested"],
    }


def show_on_card(label: str, model: str, p: dict[str, Any]) -> None:
    """One predicted vLLM budget, line by line."""
    lines, gib = p["budget"]["lines"], lambda x: f"{x / GIB:.2f} GiB"
    print(
        f"  {model} on {label}: {p['share']:.2f} x {gib(lines['total'])}"
        f" = {gib(lines['requested'])}"
    )
    print(
        f"    - weights {gib(lines['weights'])} - working space {gib(lines['activation_peak'])}"
        f" = KV cache {gib(p['cache'])}"
    )
    convs = ", ".join(f"{n:,} of {k}" for k, n in p["conversations"].items())
    print(f"    conversations at once: {convs}")
    start = "starts" if p["starts"] else "refuses to start"
    print(
        f"    {gib(p['free_at_start'])} free before it starts (the card less the CUDA context):"
        f" it {start}"
    )


def show_prediction(p: dict[str, Any]) -> None:
    """The prediction beside the log, line by line."""
    w = p["working_space"]
    print(f"\nvLLM's budget predicted before it starts (a profile batch of {p['profile_tokens']:,}"
          f" tokens, {p['logit_rows']} sampled rows):")  # fmt: skip
    print(f"  hidden states and residual   {w['residual'] / GIB:6.2f} GiB")
    print(f"  one layer's MLP tensors      {w['layer'] / GIB:6.2f} GiB")
    print(f"  the sampler's fp32 logits    {w['logits'] / GIB:6.2f} GiB")
    print(
        f"  working space on paper       {p['activation_peak'] / GIB:6.2f} GiB;"
        f" the log measured {p['logged_activation_peak'] / GIB:.2f} GiB"
        f" (+ {p['logged_non_torch'] / GIB:.2f} GiB outside PyTorch)"
    )
    print(
        f"  => KV cache {p['cache'] / GIB:.2f} GiB, concurrency {p['concurrency']:.2f}x"
        f" (the log: {logged('concurrency'):.2f}x)"
    )
    print(
        f"  with the log's working space: {p['cache_with_logged'] / GIB:.2f} GiB,"
        f" {p['concurrency_with_logged']:.2f}x"
    )
    print(
        f"  the log's {p['logged_activation_peak'] / GIB:.2f} GiB is this estimate for a profile"
        f" batch of about {p['implied_profile_tokens']:,} tokens"
    )


def logged(name: str) -> float:
    """One figure of the log, in its own unit (GiB, tokens, x)."""
    return float(facts.fact(f"{LOG}.{name}").value)


def crosscheck() -> dict[str, Any]:
    """The log's figures through vLLM's rule; prints both answers and stops if they differ."""
    x = facts.get(LOG)
    card, cfg = facts.card(x["card"]), facts.model(x["model"])
    tokens = int(logged("tokens_per_request"))
    per_token = kv_bytes_per_token(cfg)
    weights = weight_bytes(cfg)
    share = logged("gpu_memory_utilization")
    b = facts.vllm(
        x["card"],
        weights=weights,
        non_torch=round(logged("non_torch") * GIB),
        activation_peak=round(logged("activation_peak") * GIB),
        share=share,
    )
    cache_gib = round(b.cache / GIB, 2)
    concurrency = facts.concurrency(b.cache, per_token, tokens)
    block = int(facts.fact("engines.vllm.block_size").value)
    blocks = b.cache // (block * per_token)
    via_blocks = blocks * block / tokens
    line = f"Maximum concurrency for {tokens} tokens per request: {logged('concurrency'):.2f}x"
    print(f"\nvLLM's rule, on its log: {card.label} serving {cfg['name']}")
    print(f"  ({x['source']})")
    print(
        f"  {share:.2f} x {b.lines['total'] / GIB:.2f} GiB (the card as PyTorch sees it)"
        f" = {b.lines['requested'] / GIB:.2f} GiB (the log: {logged('usable'):.2f})"
    )
    print(
        f"  - weights {weights / GIB:.2f} (the log: {logged('weights'):.2f})"
        f" - outside PyTorch {logged('non_torch'):.2f}"
        f" - activation peak {logged('activation_peak'):.2f}"
    )
    print(f"  = KV cache {cache_gib:.2f} GiB (the log: {logged('kv_cache'):.2f} GiB)")
    print(
        f"  bytes per token: 2 x {cfg['num_hidden_layers']} layers"
        f" x {cfg['num_key_value_heads']} kv heads x {cfg['head_dim']} x 2 B = {per_token:,} B"
    )
    print(f"  {cache_gib:.2f} GiB / ({per_token:,} B x {tokens:,} tokens) = {concurrency:.2f}x;")
    print(f"  in whole {block}-token blocks {blocks:,} x {block} / {tokens:,} = {via_blocks:.2f}x")
    print(f'  the log says: "{line}"')
    sums = logged("usable") - logged("weights") - logged("non_torch") - logged("activation_peak")
    check(
        round(sums, 2) == logged("kv_cache"), "the log's memory lines do not add up to its KV cache"
    )
    check(
        round(concurrency, 2) == logged("concurrency"),
        "our arithmetic does not give vLLM's concurrency",
    )
    predicted = predict()
    show_prediction(predicted)
    check(
        abs(predicted["concurrency_with_logged"] / logged("concurrency") - 1) < 0.01,
        "vLLM's rule fed the log's working space does not give its concurrency within 1 %",
    )
    return {
        "predicted": predicted,
        "source": x["source"],
        "gpu": card.label,
        "model": cfg["name"],
        "logged_line": line,
        "logged_concurrency": logged("concurrency"),
        "budget": b.as_dict(),
        "bytes_per_token_computed": per_token,
        "kv_cache_gib_computed": cache_gib,
        "concurrency": round(concurrency, 2),
        "vllm_blocks": blocks,
        "concurrency_via_blocks": round(via_blocks, 2),
    }
