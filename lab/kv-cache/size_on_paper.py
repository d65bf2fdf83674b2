"""Step 1: the size of the KV cache, worked out from a model's config.json alone.

For every earlier token the model keeps, in every layer, one key and one value per
key-value head, each `head_dim` numbers long. With 2 bytes per number (bf16), so

    bytes per token = 2 (key and value) x layers x key-value heads x head size x 2 bytes

The fields to read in config.json: num_hidden_layers, num_key_value_heads (absent: one per
query head, num_attention_heads), head_dim (absent: hidden_size / num_attention_heads) and
torch_dtype (or dtype) for the bytes per number. Grouped-query attention (GQA) lets several
query heads share one key-value head; the "without GQA" column shows what the cache would
take if every query head had its own. A latent-attention config (DeepSeek's MLA, which names
a kv_lora_rank) keeps one compressed vector per token and layer instead:

    bytes per token = layers x (kv_lora_rank + qk_rope_head_dim) x 2 bytes

Standard library only:
    python3 size_on_paper.py                        # both Qwen3 models -> results/size.json
    python3 size_on_paper.py path/to/config.json    # any model -> results/size-<name>.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.configs import head_size, is_latent, kv_bytes_per_token, load_config, number_bytes
from labkit.configs import kv_heads as count_kv_heads
from labkit.results import key_of as model_key
from labkit.results import write_results
from labkit.units import BF16_BYTES, human

from kvlab import LAB, MODELS

TOKEN_COUNTS = [1_000, 4_096, 32_768]
NO_GPU = {"allocated": 0, "reserved": 0, "device": "none", "fits_24gb": True}


def mla_uncompressed_bytes_per_token(cfg: dict[str, Any], nbytes: int = BF16_BYTES) -> int:
    """What a latent-attention model would keep without the compression: every query head its
    own key (qk_nope_head_dim + qk_rope_head_dim numbers) and value (v_head_dim numbers)."""
    key = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    return (
        cfg["num_hidden_layers"] * cfg["num_attention_heads"] * (key + cfg["v_head_dim"]) * nbytes
    )


def config_name(path: Path, cfg: dict[str, Any]) -> str:
    """The model's name: the config's `_name_or_path`, else the Hugging Face cache folder
    (models--org--name/snapshots/<revision>/config.json), else the folder holding the file."""
    named = str(cfg.get("_name_or_path") or "").rstrip("/")
    if named:
        return named.rsplit("/", 1)[-1]
    parts = path.resolve().parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4].split("--")[-1]
    return path.resolve().parent.name or path.stem


def field(cfg: dict[str, Any], name: str, absent: str = "", then: str = "") -> None:
    """Print one config.json field as read (with what follows from it), or what stands in for it."""
    shown = f"{cfg[name]}{then}" if cfg.get(name) is not None else f"(absent: {absent})"
    print(f"    {name:<24} {shown}")


def fields_read(cfg: dict[str, Any], nbytes: int, dtype: str) -> None:
    """Print, by name, the config.json fields the sum below uses."""
    print("  config.json fields read:")
    field(cfg, "num_hidden_layers")
    field(cfg, "num_attention_heads")
    if is_latent(cfg):
        for name in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            field(cfg, name)
    else:
        heads = cfg["num_attention_heads"]
        field(cfg, "num_key_value_heads", f"multi-head attention, one per query head -> {heads}")
        if not cfg.get("head_dim"):
            field(cfg, "hidden_size")
        field(cfg, "head_dim", f"hidden_size / num_attention_heads -> {head_size(cfg)}")
    key = "dtype" if cfg.get("dtype") and not cfg.get("torch_dtype") else "torch_dtype"
    if dtype:
        field(cfg, key, then=f" -> {nbytes} bytes per number")
    else:  # absent, "auto", or a name this script does not know
        field(cfg, key, f"{nbytes} bytes per number assumed (bfloat16)")
        if cfg.get(key) is not None:
            print(f"    {'':<24} (not a number format known here: {nbytes} bytes assumed)")
    field(cfg, "max_position_embeddings", "no context length given")


def size_report(name: str, cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """Print the arithmetic for one model (its config read from `source`); return its numbers."""
    check(
        all(cfg.get(k) for k in ("num_hidden_layers", "num_attention_heads")),
        f"{name}: no num_hidden_layers or num_attention_heads (nor a text_config with them);"
        " is this a language model's config.json?",
    )
    nbytes, dtype = number_bytes(cfg)
    fmt = dtype or "bfloat16, assumed"
    layers, q_heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    context = cfg.get("max_position_embeddings")
    per_token = kv_bytes_per_token(cfg, nbytes=nbytes)
    print(f"{name}, from {source}")
    fields_read(cfg, nbytes, dtype)
    print(f"{name}: {per_token:,} bytes per token ({human(per_token)})")
    row: dict[str, Any] = {"layers": layers, "query_heads": q_heads, "bytes_per_number": nbytes}
    if is_latent(cfg):
        rank, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
        other = mla_uncompressed_bytes_per_token(cfg, nbytes)
        key, column = "no_latent", "without MLA"
        print("  latent attention (MLA): one compressed vector per token and layer, from which")
        print("  every head's key and value are rebuilt")
        print(
            f"  = {layers} layers x ({rank} kv_lora_rank + {rope} qk_rope_head_dim) numbers"
            f" x {nbytes} bytes ({fmt})"
        )
        key_dim = cfg["qk_nope_head_dim"] + rope
        print(
            f"  without the compression, each of {q_heads} heads keeping a {key_dim}-number key and"
            f" a {cfg['v_head_dim']}-number value: {other:,} bytes per token"
        )
        row.update(attention="latent (MLA)", kv_lora_rank=rank, qk_rope_head_dim=rope)
    else:
        kv_heads = count_kv_heads(cfg)
        other = kv_bytes_per_token(cfg, nbytes=nbytes, heads=q_heads)
        key, column = "no_gqa", "without GQA"
        print(
            f"  = 2 (key and value) x {layers} layers x {kv_heads} kv heads"
            f" x {head_size(cfg)} numbers per head x {nbytes} bytes ({fmt})"
        )
        if kv_heads < q_heads:
            print(
                f"  {q_heads} query heads share {kv_heads} kv heads (GQA, {q_heads // kv_heads} per"
                f" group);\n  with one kv head per query head: {other:,} bytes per token"
            )
            row["attention"] = "grouped-query"
        else:
            print(f"  multi-head attention: each of the {q_heads} query heads has its own kv head")
            row["attention"] = "multi-head"
        row.update(kv_heads=kv_heads, head_dim=head_size(cfg))
    window = cfg.get("sliding_window")
    if window and cfg.get("use_sliding_window", True) is not False:
        print(
            f"  note: sliding_window {window:,}: layers with a window keep at most {window:,}"
            " tokens; the sums here count every layer at full length"
        )
    print()
    print(f"  {'tokens':>22}  {'KV cache':>28}  {column:>28}")
    sizes, sizes_other = {}, {}
    # the usual counts up to the model's context, and the full context itself
    counts = [t for t in TOKEN_COUNTS if not context or t < context] + (
        [context] if context else []
    )
    for tokens in counts:
        label = f"{tokens:,}" + (" (full context)" if tokens == context else "")
        size, size_other = tokens * per_token, tokens * other
        sizes[str(tokens)], sizes_other[str(tokens)] = size, size_other
        print(
            f"  {label:>22}  {size:>15,} B  {human(size):>10}"
            f"  {size_other:>15,} B  {human(size_other):>10}"
        )
    print()
    row.update(
        {
            "context_tokens": context,
            "bytes_per_token": per_token,
            f"bytes_per_token_{key}": other,
            "cache_bytes": sizes,
            f"cache_bytes_{key}": sizes_other,
        }
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "configs", nargs="*", help="config.json files or folders holding one (default: both Qwen3)"
    )
    args = parser.parse_args()

    if not args.configs:  # the lab's own two models, the file the course's runner records
        results: dict[str, Any] = {
            key: size_report(
                folder,
                load_config(LAB / "models" / folder / "config.json"),
                f"models/{folder}/config.json",
            )
            for key, folder in MODELS.items()
        }
        print(f"wrote {write_results('size', {**results, 'peak_gpu_memory': NO_GPU})}")
        return
    for given in args.configs:
        path = Path(given) / "config.json" if Path(given).is_dir() else Path(given)
        check(path.is_file(), f"{given}: no such config.json")
        cfg = load_config(path)  # a multimodal config's text_config on top
        name = config_name(path, cfg)
        # One file per model, so the lab's own results/size.json is never overwritten.
        data = {model_key(name): size_report(name, cfg, str(path)), "peak_gpu_memory": NO_GPU}
        print(f"wrote {write_results(f'size-{model_key(name)}', data)}")


if __name__ == "__main__":
    main()
