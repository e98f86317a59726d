"""The exact `--speculative-config` object for a family/method, with options checked against the engine's keys.

Which keys exist is the installed vLLM's answer (the probe reads `SpeculativeConfig`'s fields from its
sources); `FALLBACK_CONFIG_KEYS`, the hand-kept list of vLLM 0.32's keys, is used only when the probe could not
read them, and the result says so. Which method a key belongs to is this module's knowledge (`METHOD_OPTIONS`):
a key that vLLM accepts but that belongs to another method is refused, a key it knows nothing about (one a
newer vLLM added) is passed through.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from specselect._core.families import UnknownFamilyError, classify_family, normalize_family_name
from specselect._engines.base import Proposal
from specselect.errors import ConfigError
from specselect.records.responsecache import ResponseCacheSetting

__all__ = [
    "EXACT_REJECTION_METHODS",
    "FALLBACK_CONFIG_KEYS",
    "FAMILY_METHODS",
    "LOSSY_REJECTION_METHODS",
    "METHODS_WITHOUT_FAMILY",
    "METHOD_OPTIONS",
    "PROPOSER_CLASS_OPTION",
    "RESPONSE_CACHE_OPTION",
    "OptionProblem",
    "build_speculative_config",
    "default_method",
    "family_methods",
    "lossy_verification",
    "option_problem",
    "response_cache_setting",
    "speculative_config_json",
]

RESPONSE_CACHE_OPTION = "suffix_decoding_max_cached_requests"
"""vLLM's suffix decoding keeps up to this many earlier responses in a global tree to draft from (vLLM's default:
10000); 0 turns that tree off (drafts then come from the request's own prompt and output)."""
_RESPONSE_CACHE_METHODS = frozenset({"suffix"})

_COMMON = ("num_speculative_tokens_per_batch_size", "rejection_sample_method", "enforce_eager")
_DRAFT_LOADING = (
    "draft_tensor_parallel_size",
    "quantization",
    "revision",
    "code_revision",
    "max_model_len",
    "draft_load_config",
)
_NGRAM = ("prompt_lookup_min", "prompt_lookup_max")

METHOD_OPTIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "ngram": frozenset((*_COMMON, *_NGRAM)),
        "ngram_gpu": frozenset((*_COMMON, *_NGRAM)),
        "suffix": frozenset(
            (
                *_COMMON,
                "suffix_decoding_max_tree_depth",
                "suffix_decoding_max_cached_requests",
                "suffix_decoding_max_spec_factor",
                "suffix_decoding_min_token_prob",
            )
        ),
        "draft_model": frozenset(
            (
                *_COMMON,
                *_DRAFT_LOADING,
                "use_heterogeneous_vocab",
                "draft_sample_method",
                "parallel_drafting",
                "use_local_argmax_reduction",
            )
        ),
        "eagle": frozenset(
            (
                *_COMMON,
                *_DRAFT_LOADING,
                "draft_sample_method",
                "parallel_drafting",
                "disable_padded_drafter_batch",
                "disable_eagle_block_drop",
                "attention_backend",
                "use_local_argmax_reduction",
            )
        ),
        "dflash": frozenset((*_COMMON, *_DRAFT_LOADING, "attention_backend")),
        "dspark": frozenset((*_COMMON, *_DRAFT_LOADING, "dspark_draft_topk", "enable_adaptive_verification")),
        "medusa": frozenset((*_COMMON, *_DRAFT_LOADING)),
        "mlp_speculator": frozenset((*_COMMON, *_DRAFT_LOADING)),
        "custom_class": frozenset(_COMMON),
        "mtp": frozenset(
            (
                *_COMMON,
                "draft_tensor_parallel_size",
                "quantization",
                "moe_backend",
                "index_share_for_mtp_iteration",
            )
        ),
    }
)
"""Option keys per method that this module knows (`eagle3` shares `eagle`'s, model-specific `*_mtp` share `mtp`'s).
A key listed for some methods is refused for the others; a key the engine has but no method lists is passed."""

FAMILY_METHODS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "ngram": ("ngram", "ngram_gpu"),
        "suffix": ("suffix",),
        "draft_model": ("draft_model",),
        "mtp": ("mtp",),
        "eagle": ("eagle", "eagle3"),
        "dflash": ("dflash",),
        "dspark": ("dspark",),
        "medusa": ("medusa",),
        "mlp_speculator": ("mlp_speculator",),
        "custom": ("custom_class",),
    }
)
"""Family -> the vLLM methods that implement it (the first is the default; model-specific `*_mtp` are mtp's)."""
_FAMILY_METHODS = FAMILY_METHODS
METHODS_WITHOUT_FAMILY: Mapping[str, str] = MappingProxyType(
    {
        "extract_hidden_states": "saves the target's hidden states to train drafters; it proposes nothing to measure",
    }
)
"""vLLM methods that are no proposer specselect could choose, with why (every other method maps to a family)."""
PROPOSER_CLASS_OPTION = "proposer_class"
"""The option naming a `custom_class` candidate's proposer (`package.module.Class`, importable by the engine's
python); it becomes vLLM's `model`, which for this method is a class path, not a checkpoint."""
_NEEDS_MODEL = frozenset({"draft_model", "eagle", "eagle3", "dflash", "dspark", "medusa", "mlp_speculator"})
_NO_MODEL = frozenset({"ngram", "ngram_gpu", "suffix", "mtp"})
# Methods whose token budget vLLM cannot take from a checkpoint; without it vLLM fails at start-up.
_NEEDS_BUDGET = frozenset({"ngram", "ngram_gpu", "mtp"})
_RESERVED = {
    "method": "the candidate's method",
    "model": "the candidate's proposer",
    "num_speculative_tokens": "the candidate's num_speculative_tokens",
}
_KNOWN_OPTION_KEYS = frozenset(key for keys in METHOD_OPTIONS.values() for key in keys)
FALLBACK_CONFIG_KEYS = frozenset(
    {
        *_RESERVED,
        *_KNOWN_OPTION_KEYS,
        "tensor_parallel_size",
        "kv_cache_dtype",  # the draft's KV cache dtype; vLLM takes it for any method
        "synthetic_acceptance_rates",
        "synthetic_acceptance_length",
    }
)
"""vLLM 0.32's `SpeculativeConfig` fields, kept by hand: used only when the probe cannot read the installed ones."""
_INT_OPTIONS = frozenset(
    {
        "prompt_lookup_min",
        "prompt_lookup_max",
        "draft_tensor_parallel_size",
        "max_model_len",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_max_cached_requests",
        "dspark_draft_topk",
    }
)
_BOOL_OPTIONS = frozenset(
    {
        "use_heterogeneous_vocab",
        "parallel_drafting",
        "disable_padded_drafter_batch",
        "disable_eagle_block_drop",
        "enforce_eager",
        "enable_adaptive_verification",
        "index_share_for_mtp_iteration",
    }
)
_FLOAT_OPTIONS = frozenset({"suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"})


EXACT_REJECTION_METHODS = ("standard", "block")
"""vLLM 0.32's `rejection_sample_method` values that keep the target's outputs: rejection sampling ('standard') and
block verification ('block', Sun et al.: it verifies the drafts jointly and is lossless too)."""
LOSSY_REJECTION_METHODS = ("synthetic",)
"""vLLM 0.32's values that do not: 'synthetic' accepts drafts at a set rate whatever the target says (a benchmark
of what an acceptance rate would buy, even at temperature 0). Any value not known as exact counts as lossy."""
_REJECTION_KEY = "rejection_sample_method"


def lossy_verification(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """(option, why) when the options make vLLM's verification trade exactness for speed; None when exact."""
    method = options.get(_REJECTION_KEY, EXACT_REJECTION_METHODS[0])
    if method in EXACT_REJECTION_METHODS:
        return None
    what = "accepts drafts at a set rate whatever the target says" if method == "synthetic" else "is not exact"
    return _REJECTION_KEY, f"rejection_sample_method {method!r} {what}: the outputs are not the target's"


def family_methods(family: str) -> tuple[str, ...]:
    """The vLLM methods that implement a proposer family (canonical or alias name; none for a family vLLM lacks)."""
    return _FAMILY_METHODS.get(classify_family(family).family, ())


def default_method(family: str) -> str:
    """The method used when a candidate names only its family (`eagle3` and `ngram_gpu` aliases keep theirs)."""
    canonical = classify_family(family).family
    written = normalize_family_name(family)
    for method in _FAMILY_METHODS[canonical]:
        if normalize_family_name(method) == written:
            return method
    return _FAMILY_METHODS[canonical][0]


def _allowed_keys(method: str) -> frozenset[str]:
    if method == "eagle3":
        return METHOD_OPTIONS["eagle"]
    if method.endswith("_mtp"):
        return METHOD_OPTIONS["mtp"]
    return METHOD_OPTIONS.get(method, _KNOWN_OPTION_KEYS)


def _check_value(key: str, value: Any, where: str) -> None:
    if key in _BOOL_OPTIONS and not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}", location=where, fix="use a boolean")
    if key in _INT_OPTIONS and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{key} must be an integer >= 1, got {value!r}", location=where, fix="use a whole number")
    if key in _FLOAT_OPTIONS and (
        isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0
    ):
        raise ConfigError(f"{key} must be a number >= 0, got {value!r}", location=where, fix="use a number")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key} is not JSON-serialisable: {exc}", location=where, fix="use plain values") from exc


def _method(family: str, method: str | None, location: str) -> tuple[str, str]:
    """(canonical family, chosen vLLM method); ConfigError for an unknown family or another family's method."""
    try:
        canonical = classify_family(family).family
    except UnknownFamilyError as exc:
        raise ConfigError(str(exc), location=f"{location}.family", fix="use a known family name") from exc
    allowed_methods = _FAMILY_METHODS.get(canonical)
    if allowed_methods is None:
        raise ConfigError(
            f"vLLM has no method for family {canonical!r}",
            location=f"{location}.family",
            fix=f"use one of: {', '.join(_FAMILY_METHODS)}",
        )
    chosen = default_method(family) if method is None else method.strip().lower()
    if chosen not in allowed_methods and not (canonical == "mtp" and chosen.endswith("_mtp")):
        raise ConfigError(
            f"method {chosen!r} does not implement family {canonical!r}; allowed: {', '.join(allowed_methods)}",
            location=f"{location}.method",
            fix=f"use one of: {', '.join(allowed_methods)}",
        )
    return canonical, chosen


def _proposer_class(options: Mapping[str, Any], proposer_path: str | Path | None, location: str) -> str:
    """A `custom_class` candidate's proposer class path (`package.module.Class`)."""
    value = options.get(PROPOSER_CLASS_OPTION)
    where = f"{location}.options.{PROPOSER_CLASS_OPTION}"
    if proposer_path is not None:
        raise ConfigError(
            "custom_class loads a proposer class, not a checkpoint",
            location=f"{location}.proposer",
            fix=f"remove the proposer and name the class in options.{PROPOSER_CLASS_OPTION}",
        )
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ConfigError(
            f"custom_class needs its proposer class as package.module.Class, got {value!r}",
            location=where,
            fix=f'set options.{PROPOSER_CLASS_OPTION} = "my_package.my_module.MyProposer"',
        )
    return str(value)


def _model(canonical: str, chosen: str, proposer_path: str | Path | None, location: str) -> str | None:
    """The proposer checkpoint when the method loads one; ConfigError for a missing or a superfluous one."""
    if chosen in _NEEDS_MODEL:
        if proposer_path is None or not str(proposer_path).strip():
            raise ConfigError(
                f"method {chosen!r} needs a proposer checkpoint",
                location=f"{location}.proposer",
                fix="give the proposer's local directory or model id",
            )
        return str(proposer_path)
    if proposer_path is not None and (chosen in _NO_MODEL or chosen.endswith("_mtp")):
        why = "uses the target's own layers" if canonical == "mtp" else "needs no checkpoint"
        raise ConfigError(
            f"method {chosen!r} {why} but a proposer was given",
            location=f"{location}.proposer",
            fix="remove the proposer",
        )
    return None


def _budget(chosen: str, num_speculative_tokens: int | None, location: str) -> int | None:
    """The proposal length when given (an integer >= 1); ConfigError when it is bad or a method needs one."""
    where = f"{location}.num_speculative_tokens"
    if num_speculative_tokens is None:
        if chosen in _NEEDS_BUDGET or chosen.endswith("_mtp"):
            raise ConfigError(
                f"method {chosen!r} needs num_speculative_tokens", location=where, fix="set the proposal budget, e.g. 4"
            )
        return None
    if isinstance(num_speculative_tokens, bool) or not isinstance(num_speculative_tokens, int):
        raise ConfigError(
            f"num_speculative_tokens must be an integer, got {num_speculative_tokens!r}",
            location=where,
            fix="use a whole number such as 4",
        )
    if num_speculative_tokens < 1:
        raise ConfigError(
            f"num_speculative_tokens must be >= 1, got {num_speculative_tokens}",
            location=where,
            fix="use a whole number such as 4",
        )
    return num_speculative_tokens


@dataclass(frozen=True)
class OptionProblem:
    """Why one option key cannot go into the speculative config (a stable reason, the key and a close match)."""

    reason: str
    """`option_reserved`, `option_not_a_speculative_key`, `unknown_speculative_option` or `option_of_other_method`."""
    key: str
    message: str
    fix: str
    did_you_mean: str | None = None


def _close_match(key: str, keys: Collection[str]) -> str | None:
    matches = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.75)
    return matches[0] if matches else None


def option_problem(method: str, key: str, engine_keys: Collection[str] | None = None) -> OptionProblem | None:
    """What is wrong with option `key` for `method` (None: it may be passed).

    `engine_keys`: the installed vLLM's `SpeculativeConfig` fields; None uses `FALLBACK_CONFIG_KEYS`.
    """
    if key in _RESERVED:
        return OptionProblem(
            "option_reserved", key, f"{key!r} cannot be set in options", f"set it through {_RESERVED[key]}"
        )
    if key == "tensor_parallel_size":
        return OptionProblem(
            "option_not_a_speculative_key",
            key,
            "tensor_parallel_size is not a speculative-config key",
            "use draft_tensor_parallel_size",
            did_you_mean="draft_tensor_parallel_size",
        )
    if key == PROPOSER_CLASS_OPTION:
        if method == "custom_class":
            return None
        return OptionProblem("option_of_other_method", key, f"{key!r} is only for method 'custom_class'", "remove it")
    accepted = frozenset(engine_keys) if engine_keys is not None else FALLBACK_CONFIG_KEYS
    if key not in accepted:
        guess = _close_match(key, accepted - set(_RESERVED))
        hint = f"; did you mean {guess!r}?" if guess else ""
        return OptionProblem(
            "unknown_speculative_option",
            key,
            f"vLLM's speculative config has no key {key!r}{hint}",
            f"rename it to {guess}" if guess else "remove it (see vLLM's SpeculativeConfig for the keys)",
            did_you_mean=guess,
        )
    allowed = _allowed_keys(method)
    if key in _KNOWN_OPTION_KEYS and key not in allowed:
        return OptionProblem(
            "option_of_other_method",
            key,
            f"unknown option {key!r} for method {method!r}; allowed: {', '.join(sorted(allowed))}",
            "remove it or use one of the allowed keys",
        )
    return None


def _checked_options(
    chosen: str, options: Mapping[str, Any], location: str, engine_keys: Collection[str] | None
) -> dict[str, Any]:
    """The options, each key accepted for the method and each value of the right type, in the order given."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        where = f"{location}.options.{key}"
        problem = option_problem(chosen, key, engine_keys)
        if problem is not None:
            raise ConfigError(problem.message, location=where, fix=problem.fix)
        _check_value(key, value, where)
        out[key] = value
    return out


def _check_together(config: Mapping[str, Any], tensor_parallel_size: int | None, location: str) -> None:
    """Rules across options: the draft's tensor parallel size vLLM can run, an n-gram window low <= high."""
    draft_tp = config.get("draft_tensor_parallel_size")
    if tensor_parallel_size is not None and draft_tp is not None and draft_tp not in (1, tensor_parallel_size):
        raise ConfigError(
            f"draft_tensor_parallel_size {draft_tp} must be 1 or the target's tensor_parallel_size "
            f"({tensor_parallel_size})",
            location=f"{location}.options.draft_tensor_parallel_size",
            fix=f"set it to 1 or {tensor_parallel_size}, or remove it (the draft then uses {tensor_parallel_size})",
        )
    low, high = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if low is not None and high is not None and low > high:
        raise ConfigError(
            f"prompt_lookup_min ({low}) is larger than prompt_lookup_max ({high})",
            location=f"{location}.options.prompt_lookup_min",
            fix="make prompt_lookup_min <= prompt_lookup_max",
        )


def build_speculative_config(
    proposal: Proposal,
    *,
    location: str = "speculative",
    tensor_parallel_size: int | None = None,
    engine_keys: Collection[str] | None = None,
) -> dict[str, Any]:
    """Build vLLM's speculative-config object; ConfigError (naming `location` and the fix) on bad input.

    The result is exactly what is passed to the server and recorded in results: method, model (when the
    method loads one), num_speculative_tokens (when given), then the options in the order given.
    `tensor_parallel_size` is the target's: when given, `draft_tensor_parallel_size` must be 1 or equal
    to it (vLLM 0.32 refuses any other value at start-up); unset, vLLM drafts at the target's size.
    `engine_keys` are the installed vLLM's config keys (`option_problem`).
    """
    canonical, chosen = _method(proposal.family, proposal.method, location)
    config: dict[str, Any] = {"method": chosen}
    options = dict(proposal.options)
    if chosen == "custom_class":
        model: str | None = _proposer_class(options, proposal.proposer_path, location)
        del options[PROPOSER_CLASS_OPTION]
    else:
        model = _model(canonical, chosen, proposal.proposer_path, location)
    if model is not None:
        config["model"] = model
    budget = _budget(chosen, proposal.num_speculative_tokens, location)
    if budget is not None:
        config["num_speculative_tokens"] = budget
    config.update(_checked_options(chosen, options, location, engine_keys))
    if chosen in _RESPONSE_CACHE_METHODS:
        # Unset, the cache would learn from every earlier response, warm-up and repeats included: measured
        # acceptance would then be the replay's, not a deployment's. A plan that wants it learning says so.
        config.setdefault(RESPONSE_CACHE_OPTION, 0)
    _check_together(config, tensor_parallel_size, location)
    return config


def response_cache_setting(config: Mapping[str, Any] | None, options: Mapping[str, Any]) -> ResponseCacheSetting | None:
    """The response cache a speculative config (`build_speculative_config`'s) launches with; None when its method
    keeps none. `options` are the candidate's, to say who stated it."""
    if config is None or config.get("method") not in _RESPONSE_CACHE_METHODS:
        return None
    value = int(config.get(RESPONSE_CACHE_OPTION, 0))
    return ResponseCacheSetting(
        state="learning" if value > 0 else "off",
        option=RESPONSE_CACHE_OPTION,
        value=value,
        stated_by="plan" if RESPONSE_CACHE_OPTION in options else "specselect",
    )


def speculative_config_json(config: Mapping[str, Any]) -> str:
    """The compact JSON text passed as `--speculative-config` (key order kept, so it is reproducible)."""
    return json.dumps(dict(config), separators=(",", ":"), allow_nan=False)
