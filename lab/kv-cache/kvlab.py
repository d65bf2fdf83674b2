"""What the lesson's GPU scripts share and the lab kit does not: the two models the lab measures,
and how a script gets one of them as a transformers model (random weights from the shipped
config.json, or real ones with --weights).

Everything else (device choice, checks, results files, units, config arithmetic, timing with
spread, peak memory, the compact decoder, the course's facts) is the lab kit's: `labkit/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.configs import load_config, tiny_config

LAB = Path(__file__).resolve().parent
# Key used in results/*.json -> folder under models/ (no dots in keys: the runner splits on them).
MODELS = {"qwen3-0_6b": "Qwen3-0.6B", "qwen3-8b": "Qwen3-8B"}


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
