"""Step 1: the size of the KV cache, worked out from a model's config.json alone.

For every earlier token the model keeps, in every layer, one key and one value per
key-value head, each `head_dim` numbers long. In bf16 a number takes 2 bytes, so

    bytes per token = 2 (key and value) x layers x key-value heads x head size x 2 bytes

Grouped-query attention (GQA) lets several query heads share one key-value head; the
"without GQA" column shows what the cache would take if every query head had its own.

Standard library only:  python3 size_on_paper.py [path/to/config.json ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvlab import MODELS, head_size, human, kv_bytes_per_token, load_config, write_results

TOKEN_COUNTS = [1_000, 4_096, 32_768]


def size_report(name: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Print the arithmetic for one model and return its numbers (bytes)."""
    layers, kv_heads, q_heads = (
        cfg["num_hidden_layers"],
        cfg["num_key_value_heads"],
        cfg["num_attention_heads"],
    )
    context = cfg["max_position_embeddings"]
    per_token = kv_bytes_per_token(cfg)
    per_token_mha = kv_bytes_per_token(cfg, kv_heads=q_heads)
    print(f"{name}: {per_token:,} bytes per token ({human(per_token)})")
    print(
        f"  = 2 (key and value) x {layers} layers x {kv_heads} kv heads"
        f" x {head_size(cfg)} numbers per head x 2 bytes (bf16)"
    )
    print(
        f"  {q_heads} query heads share {kv_heads} kv heads (GQA, {q_heads // kv_heads} per group);"
        f" with one kv head per query head: {per_token_mha:,} bytes per token"
    )
    print()
    print(f"  {'tokens':>22}  {'KV cache':>28}  {'without GQA':>28}")
    sizes, sizes_mha = {}, {}
    for tokens in TOKEN_COUNTS + [context]:
        label = f"{tokens:,}" + (" (full context)" if tokens == context else "")
        size, size_mha = tokens * per_token, tokens * per_token_mha
        sizes[str(tokens)], sizes_mha[str(tokens)] = size, size_mha
        print(
            f"  {label:>22}  {size:>15,} B  {human(size):>10}"
            f"  {size_mha:>15,} B  {human(size_mha):>10}"
        )
    print()
    return {
        "layers": layers,
        "kv_heads": kv_heads,
        "query_heads": q_heads,
        "head_dim": head_size(cfg),
        "context_tokens": context,
        "bytes_per_token": per_token,
        "bytes_per_token_no_gqa": per_token_mha,
        "cache_bytes": sizes,
        "cache_bytes_no_gqa": sizes_mha,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", help="config.json files (default: both Qwen3 models)")
    args = parser.parse_args()

    results = {}
    if args.configs:
        for path in args.configs:
            key = Path(path).resolve().parent.name.lower().replace(".", "_")
            results[key] = size_report(Path(path).parent.name, json.loads(Path(path).read_text()))
    else:
        for key, folder in MODELS.items():
            results[key] = size_report(folder, load_config(folder))
    print(f"wrote {write_results('size', results)}")


if __name__ == "__main__":
    main()
