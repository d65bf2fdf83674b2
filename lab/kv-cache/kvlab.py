"""What the lesson's GPU scripts share and the lab kit does not: the two models the lab measures,
how a script gets one of them as a transformers model (random weights from the shipped
config.json, or real ones with --weights), the start of a script that measures each in turn
(`start`), and a StaticCache reserved ahead of time, as an engine reserves its cache
(`static_cache`).

Everything else (device choice, checks, results files, units, config arithmetic, timing with
spread, peak memory, the compact decoder, the course's facts) is the lab kit's: `labkit/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.checks import check
from labkit.configs import load_config, tiny_config
from labkit.results import key_of

LAB = Path(__file__).resolve().parent
# Key used in results/*.json -> folder under models/ (no dots in keys: the runner splits on them).
MODELS = {"qwen3-0_6b": "Qwen3-0.6B", "qwen3-8b": "Qwen3-8B"}


def start(doc: str | None, speed: bool = False) -> tuple[Any, dict[str, tuple[str, str]], Any]:
    """The start of a script that measures each model in turn: its options (--device, --tiny,
    --weights, --models; with `speed` --bandwidth and --no-compile too) parsed, the models it
    measures ({results key: (models/ folder, name printed)}: both, those of --models, or the
    one of --weights), and the device, its line printed."""
    from labkit import device as devices

    parser = devices.arguments(doc, weights=True, speed=speed)
    parser.add_argument("--models", nargs="*", choices=list(MODELS), help="default: both")
    args = parser.parse_args()
    check(not (args.weights and args.models), "give --weights or --models, not both")
    if args.weights:  # one model, named by its weights
        todo = {key_of(args.weights): ("", model_name("", args.weights))}
    else:
        todo = {key: (MODELS[key], MODELS[key]) for key in args.models or MODELS}
    device = devices.pick(args)
    print(devices.describe(device, "torch", "transformers"))
    return args, todo, device


def config_of(folder: str) -> dict[str, Any]:
    """models/<folder>/config.json, the model's published Hugging Face config."""
    return load_config(LAB / "models" / folder / "config.json")


def build_model(
    folder: str, device: Any, tiny: bool, weights: str | None = None, vocab: int | None = 4096
) -> tuple[Any, dict[str, Any], str]:
    """The model in bf16 on `device`: real weights when given, else random ones from config.json.

    `weights` is a Hugging Face model id or a local folder, loaded with from_pretrained (ids
    through huggingface_hub and its cache: HF_HOME, HF_HUB_OFFLINE). Otherwise the model is
    built from models/<folder>/config.json; with `tiny` it is shrunk and its vocabulary cut to
    `vocab` (None keeps it). Returns the model, its shapes as a plain dict, and a phrase saying
    which path ran.
    """
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config
    from transformers.utils import logging

    # Keep version notes (e.g. past_key_values renamed to cache in newer releases) out of the output.
    logging.set_verbosity_error()
    logging.disable_progress_bar()  # the loading bars would clutter the recorded output
    warnings.filterwarnings("ignore", category=FutureWarning)
    if weights:
        # Loaded in host memory first, then moved: device_map would need the accelerate package.
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.bfloat16).to(device)
        how = f"real weights from {weights}"
    else:
        cfg = config_of(folder)
        cfg = tiny_config(cfg, vocab) if tiny else cfg
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(Qwen3Config(**cfg), dtype=torch.bfloat16)
        how = "random bf16 weights from its config.json" + (", shrunk (--tiny)" if tiny else "")
    model.eval()
    c = model.config
    keys = (
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "hidden_size",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
    )
    shapes: dict[str, Any] = {k: getattr(c, k) for k in keys}
    shapes.update(
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        tie_word_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
        model_type=getattr(c, "model_type", "qwen3"),
    )
    return model, shapes, how


def model_name(folder: str, weights: str | None) -> str:
    """The name a script prints for its model: the weights' id or folder, else the config's folder."""
    return weights.rstrip("/") if weights else folder


def static_cache(model: Any, cfg: dict[str, Any], tokens: int, device: Any) -> Any:
    """transformers' StaticCache of `tokens` tokens for one sequence in bf16, its tensors allocated
    now, as an engine reserves its cache ahead of time (a StaticCache otherwise allocates them on
    first use). `cfg` is build_model's plain dict of the model's shapes."""
    import torch
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=tokens)
    cache.early_initialization(
        batch_size=1,
        num_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"],
        dtype=torch.bfloat16,
        device=device,
    )
    return cache
