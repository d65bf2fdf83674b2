"""Step 1: what twelve published models keep per token, worked out from their config.json files.

    bytes per token (16-bit) = 2 (key and value) x layers x key-value heads x head size x 2
    latent attention (MLA)   = layers x (kv_lora_rank + qk_rope_head_dim) x 2

A sliding-window layer keeps at most `window` tokens, however long the conversation, so a
model with window layers keeps less than bytes-per-token x tokens. For each model the
script prints the arithmetic, the cache of one 32K and one 128K conversation, and what the
same model would keep with one key and one value per query head (plain multi-head).

Standard library only:  python3 configs.py [path/to/config.json ...]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.configs import head_size, kv_heads, load_config
from labkit.results import key_of as results_key
from labkit.results import write_results
from labkit.timing import Stopwatch
from labkit.units import BF16_BYTES, human

MODELS = Path(__file__).resolve().parent / "models"
CONVERSATION = 32_768  # the conversation the lesson sizes everything for
LONG_CONVERSATION = 131_072

# Fields a published config leaves out, with the value transformers (5.17) gives them.
DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"sliding_window_pattern": 6, "max_position_embeddings": 131_072},
}


def key_of(name: str) -> str:
    """A model's name as a results key: lowercase, '_' for '.' and '-' (llama_2_7b)."""
    return results_key(name).replace("-", "_")


def model_names() -> list[str]:
    """The models shipped under models/, oldest release first."""
    releases = json.loads((MODELS / "releases.json").read_text())
    return sorted(releases, key=lambda name: (releases[name]["release"], name))


def release_of(name: str) -> str:
    """The model's release month, YYYY-MM, from models/releases.json."""
    return str(json.loads((MODELS / "releases.json").read_text())[name]["release"])


def read_config(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A config.json with the text model's fields on top (Gemma 3 keeps them under
    `text_config`), the defaults it needed filled in, and a note for each default used."""
    cfg, notes = load_config(path), []
    for field, value in DEFAULTS.get(str(cfg.get("model_type")), {}).items():
        if field not in cfg:
            cfg[field] = value
            notes.append(f"{field} not in the file: transformers' default {value:,} used")
    return cfg, notes


@dataclass(frozen=True)
class Layout:
    """What one published model keeps per token: enough to work out its cache for any
    conversation."""

    kind: str  # MHA, GQA, MQA or MLA
    layers: int
    query_heads: int
    kv_heads: int  # key-value heads (MLA: the one latent, shared by every head)
    head_dim: int  # numbers per key and per value (MLA: the width of the latent)
    key_dim: int  # numbers per query-key product per head, before any compression
    value_dim: int
    window: int | None = None  # tokens a sliding-window layer keeps
    window_layers: int = 0

    @property
    def full_layers(self) -> int:
        """Layers that keep every token of the conversation."""
        return self.layers - self.window_layers

    def layer_bytes(self) -> int:
        """Bytes one layer keeps for one token in 16-bit numbers."""
        vectors = 1 if self.kind == "MLA" else 2 * self.kv_heads  # MLA: one latent, else K and V
        return vectors * self.head_dim * BF16_BYTES

    def bytes_per_token(self) -> int:
        """Bytes per token while the conversation is shorter than any window: every layer."""
        return self.layers * self.layer_bytes()

    def bytes_per_token_mha(self) -> int:
        """The same model with one key and one value per query head, uncompressed, 16-bit."""
        return self.layers * self.query_heads * (self.key_dim + self.value_dim) * BF16_BYTES

    def cache_bytes(self, tokens: int) -> int:
        """The cache of one conversation of `tokens` tokens; window layers hold at most the window."""
        kept = min(tokens, self.window) if self.window else tokens
        return (self.full_layers * tokens + self.window_layers * kept) * self.layer_bytes()


def window_layers(cfg: dict[str, Any]) -> tuple[int | None, int, str]:
    """The sliding window, how many layers use it, and which config field said so."""
    window, layers = cfg.get("sliding_window"), cfg["num_hidden_layers"]
    if not window or cfg.get("use_sliding_window") is False:
        return None, 0, "no sliding window"
    if "layer_types" in cfg:
        count = sum(t == "sliding_attention" for t in cfg["layer_types"])
        return window, count, "layer_types"
    if "sliding_window_pattern" in cfg:  # Gemma 3: every n-th layer is global, the rest local
        n = cfg["sliding_window_pattern"]
        return window, sum(bool((i + 1) % n) for i in range(layers)), f"sliding_window_pattern {n}"
    if cfg.get("model_type") == "gemma2":  # Gemma 2: local and global layers alternate
        return window, sum(bool((i + 1) % 2) for i in range(layers)), "Gemma 2 alternates"
    return window, layers, "sliding_window on every layer"


def layout_of(cfg: dict[str, Any]) -> Layout:
    """The cache layout a published config describes."""
    layers, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    if cfg.get("kv_lora_rank"):
        nope, rope = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
        return Layout(
            "MLA", layers, heads, 1, cfg["kv_lora_rank"] + rope, nope + rope, cfg["v_head_dim"]
        )
    kv, head_dim = kv_heads(cfg), head_size(cfg)
    kind = "MHA" if kv == heads else "MQA" if kv == 1 else "GQA"
    window, count, _ = window_layers(cfg)
    return Layout(kind, layers, heads, kv, head_dim, head_dim, head_dim, window, count)


TOKENS = [CONVERSATION, LONG_CONVERSATION]


def report(name: str, path: Path, release: str | None) -> dict[str, Any]:
    """Print one model's arithmetic and return its numbers (bytes, tokens)."""
    cfg, notes = read_config(path)
    lay = layout_of(cfg)
    window, count, rule = window_layers(cfg)
    context = cfg.get("max_position_embeddings")
    per_token = lay.bytes_per_token()
    print(
        f"{name}" + (f" (released {release})" if release else "") + f": {lay.kind},"
        f" {per_token:,} bytes per token ({human(per_token)})"
    )
    if lay.kind == "MLA":
        print(
            f"  = {lay.layers} layers x ({cfg['kv_lora_rank']} kv_lora_rank +"
            f" {cfg['qk_rope_head_dim']} qk_rope_head_dim) x 2 bytes:\n    one latent per token and"
            f" layer, shared by all {lay.query_heads} heads"
        )
    else:
        print(
            f"  = 2 x {lay.layers} layers x {lay.kv_heads} kv heads x {lay.head_dim} head size x 2 bytes"
            f" ({lay.query_heads} query heads)"
        )
    mha = lay.bytes_per_token_mha()
    if lay.kind == "MHA":
        print("  (multi-head already: one key and one value per query head)")
    else:
        print(
            f"  with one uncompressed key and value per query head: {mha:,} B per token,"
            f" {mha / per_token:.1f}x as much"
        )
    if window:
        print(f"  sliding window of {window:,} tokens on {count} of {lay.layers} layers ({rule})")
    for note in notes:
        print(f"  note: {note}")
    sizes, beyond = {}, {}
    for tokens in TOKENS:
        size = lay.cache_bytes(tokens)
        sizes[str(tokens)], beyond[str(tokens)] = size, bool(context and tokens > context)
        flag = "  *" if beyond[str(tokens)] else ""
        print(
            f"  {tokens:>9,} tokens: {size:>15,} B {human(size):>11}"
            f"  ({size / tokens:,.0f} B per token on average){flag}"
        )
    if any(beyond.values()):
        print(f"  * beyond its max_position_embeddings, {context:,} tokens")
    print()
    return {
        "name": name,
        "release": release,
        "attention": lay.kind,
        "layers": lay.layers,
        "query_heads": lay.query_heads,
        "kv_heads": lay.kv_heads if lay.kind != "MLA" else 0,
        "head_dim": head_size(cfg),
        "kv_lora_rank": cfg.get("kv_lora_rank") or 0,
        "qk_rope_head_dim": cfg.get("qk_rope_head_dim") or 0,
        "window": window or 0,
        "window_layers": count,
        "full_layers": lay.full_layers,
        "window_rule": rule,
        "context_tokens": context,
        "defaults_used": notes,
        "bytes_per_token": per_token,
        "bytes_per_token_mha": mha,
        "mha_over_this": mha / per_token,
        "cache_bytes": sizes,
        "average_bytes_per_token": {t: sizes[t] / int(t) for t in sizes},
        "beyond_context": beyond,
    }


def chart(models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Points for a chart of bytes per token against release date, oldest first."""
    points = []
    for key, m in models.items():
        year, month = (int(x) for x in m["release"].split("-"))
        points.append(
            {
                "key": key,
                "model": m["name"],
                "release": m["release"],
                "year": year + (month - 1) / 12,
                "attention": m["attention"],
                "window": m["window"],
                "bytes_per_token": m["bytes_per_token"],
                "average_bytes_per_token_32768": m["average_bytes_per_token"][str(CONVERSATION)],
            }
        )
    points.sort(key=lambda p: (p["year"], p["bytes_per_token"]))
    return {
        "x": "year",
        "y": "bytes_per_token",
        "unit": "B",
        "points": points,
        "note": "bytes per token in 16-bit numbers; for models with sliding windows also the"
        " average over a 32,768-token conversation",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "configs", nargs="*", help="config.json files (default: the twelve under models/)"
    )
    args = parser.parse_args()
    clock = Stopwatch()

    models: dict[str, dict[str, Any]] = {}
    if args.configs:
        for path in map(Path, args.configs):
            models[key_of(path.resolve().parent.name)] = report(
                path.resolve().parent.name, path, None
            )
        print(f"wrote {write_results('configs_custom', {'models': models})}")
        return
    for name in model_names():
        models[key_of(name)] = report(name, MODELS / name / "config.json", release_of(name))

    print(
        f"{'model':<16} {'released':>8} {'design':>7} {'B/token':>9} {'32K cache':>11} {'128K cache':>11}"
    )
    for m in models.values():
        row = [
            human(m["cache_bytes"][str(t)]) + ("*" if m["beyond_context"][str(t)] else " ")
            for t in TOKENS
        ]
        design = m["attention"] + ("+SW" if m["window"] else "")
        print(
            f"{m['name']:<16} {m['release']:>8} {design:>7} {m['bytes_per_token']:>9,} {row[0]:>11} {row[1]:>11}"
        )
    print("  * beyond the model's context length (max_position_embeddings); SW: sliding window")
    results = {
        "models": models,
        "chart": chart(models),
        "peak_gpu_memory": 0,
        "gpu": "none: this step reads text files only",
        "seconds": clock.seconds(),
    }
    print(
        f"\nwrote {write_results('configs', results)} and"
        f" {write_results('bytes_chart', results['chart'])}"
    )
    print(f"step time: {clock.seconds():.2f} s; peak GPU memory: 0 B (no GPU used)")


if __name__ == "__main__":
    main()
