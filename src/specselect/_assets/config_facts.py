"""Facts derived from a model's `config.json` (pure: a dict in, values out)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specselect.errors import EngineSetupError

__all__ = [
    "MTP_COUNT_KEYS",
    "architectures",
    "config_int",
    "estimate_params_from_config",
    "has_native_mtp",
    "load_config",
    "mtp_layer_count",
    "text_config",
]

MTP_COUNT_KEYS: tuple[str, ...] = (
    "num_nextn_predict_layers",
    "mtp_num_hidden_layers",
    "num_mtp_modules",
    "num_mtp_layers",
    "mtp_num_layers",
    "n_mtp_layers",
)
"""Config keys under which checkpoints declare their multi-token-prediction layers (vLLM reads these)."""


def load_config(model_dir: Path) -> dict[str, Any]:
    """The parsed `config.json` of a model directory."""
    path = model_dir / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EngineSetupError(
            "no config.json: not a Hugging Face model directory",
            location=str(model_dir),
            fix="point to the directory that holds config.json and the weights",
        ) from exc
    except (OSError, ValueError) as exc:
        raise EngineSetupError(f"unreadable config.json: {exc}", location=str(path), fix="repair the file") from exc
    if not isinstance(data, dict):
        raise EngineSetupError("config.json is not a JSON object", location=str(path), fix="repair the file")
    return data


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language-model part of a config (multimodal models nest it under `text_config`)."""
    nested = config.get("text_config")
    return nested if isinstance(nested, Mapping) else config


def config_int(config: Mapping[str, Any], *keys: str) -> int | None:
    """The first integer value among `keys`, looked up at the top level then in `text_config`."""
    for scope in (config, text_config(config)):
        for key in keys:
            value = scope.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def architectures(config: Mapping[str, Any]) -> tuple[str, ...]:
    """`architectures` as a tuple of strings (empty when absent)."""
    value = config.get("architectures")
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return ()


def mtp_layer_count(config: Mapping[str, Any]) -> int:
    """How many MTP layers the config declares (0 when none)."""
    count = config_int(config, *MTP_COUNT_KEYS)
    if count:
        return count
    model_type = str(config.get("model_type") or "")
    if model_type.endswith("_mtp"):
        # An MTP-only checkpoint (vLLM's `*_mtp` model types) stores its depth as `n_predict`.
        return config_int(config, "n_predict") or 1
    return 0


def has_native_mtp(config: Mapping[str, Any]) -> bool:
    """True when the target checkpoint carries its own multi-token-prediction layers."""
    return mtp_layer_count(config) > 0


def estimate_params_from_config(config: Mapping[str, Any]) -> int | None:
    """A rough dense-transformer parameter count, for checkpoints without safetensors headers.

    embeddings (+ an untied lm_head) + per layer (attention with grouped KV heads + gated MLP).
    Mixture-of-experts layouts are underestimated; safetensors headers are preferred when present.
    """
    hidden = config_int(config, "hidden_size", "d_model", "n_embd")
    layers = config_int(config, "num_hidden_layers", "n_layer", "num_layers")
    vocab = config_int(config, "vocab_size")
    if not hidden or not layers or not vocab:
        return None
    heads = config_int(config, "num_attention_heads", "n_head") or 1
    kv_heads = config_int(config, "num_key_value_heads") or heads
    head_dim = config_int(config, "head_dim") or hidden // heads
    intermediate = config_int(config, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate
    tied = bool(text_config(config).get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    embeddings = vocab * hidden * (1 if tied else 2)
    return embeddings + layers * (attention + mlp + 2 * hidden) + hidden
