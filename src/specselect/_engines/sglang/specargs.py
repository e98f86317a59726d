"""SGLang's `--speculative-*` server arguments for a candidate, checked against the installed version.

A candidate is (family, method, num_speculative_tokens, proposer, options); SGLang takes flags:

| family      | method (default first)               | `--speculative-algorithm` |
|-------------|--------------------------------------|---------------------------|
| ngram       | ngram                                | NGRAM                     |
| draft_model | draft_model, standalone              | STANDALONE                |
| mtp         | mtp, nextn, `<model>_mtp`            | NEXTN (SGLang's alias of EAGLE for MTP layers) |
| mtp         | frozen_kv_mtp                        | FROZEN_KV_MTP             |
| eagle       | eagle, eagle3                        | EAGLE, EAGLE3             |
| dflash      | dflash                               | DFLASH (when the probed version accepts it) |
| dspark      | dspark                               | DSPARK (0.5.2x)           |
| uno         | uno                                  | UNO (0.5.2x; the proposer is the draft LoRA, `--uno-lora-path`) |
| custom      | the name a plugin registers          | that name, upper-cased (`SpeculativeAlgorithm.register`) |

Other families (suffix, medusa, mlp_speculator) have no SGLang mapping: admission reports them
`unsupported` with reason `family_not_in_engine`; an algorithm the installed SGLang does not accept is
`unsupported` with `method_not_in_backend` (see `gate.backend_gate`). A plugin's algorithm is known only
once SGLang loads the plugin at start-up: the probe lists the installed plugins, not what they register.

Token budget: `num_speculative_tokens = k` is the number of tokens proposed per verify step, as in
vLLM. SGLang's verify width counts the last accepted token too, so k becomes
`--speculative-num-draft-tokens k+1`; chain drafting (`eagle_topk` 1, the default) also sets
`--speculative-num-steps k --speculative-eagle-topk 1`; tree drafting (`eagle_topk` > 1) takes its depth
from `options.num_steps`. DFLASH and DSPARK verify a block k+1 wide in one step (DSPARK's `dspark_block_size` is k); UNO
verifies k+1 positions (`eagle_topk` > 1 builds a tree whose depth `num_steps` gives); NGRAM fills a k+1
token tree; a plugin gets `--speculative-num-draft-tokens k+1` and reads what it needs.
Without k, only the algorithm (and draft model) are given and SGLang picks its own defaults, which the
server reports in `/server_info` (see `telemetry.parse_server_info`).

The result is a dict keyed by SGLang's own `ServerArgs` field names (`speculative_eagle_topk`, ...): the
flag of a key is `--` plus the key with dashes, so the recorded object is exactly what was passed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from specselect._core.families import UnknownFamilyError, classify_family
from specselect._engines.base import Proposal
from specselect.errors import ConfigError

__all__ = [
    "DRAFT_PATH_KEY",
    "KNOWN_OPTIONS",
    "PLUGIN_FAMILY",
    "RESERVED_OPTIONS",
    "RETIRED_OPTIONS",
    "SGLANG_FAMILY_METHODS",
    "SGLANG_METHOD_ALGORITHMS",
    "UNO_LORA_KEY",
    "build_sglang_speculative_args",
    "lossy_verification",
    "sglang_algorithm",
    "sglang_field",
    "sglang_flag",
    "supported_methods",
]

_PREFIX = "speculative_"
DRAFT_PATH_KEY = f"{_PREFIX}draft_model_path"
"""The configuration key holding the proposer's local path."""
UNO_LORA_KEY = "uno_lora_path"
"""UNO's proposer: the draft LoRA adapter applied to the target (`--uno-lora-path`)."""
PLUGIN_FAMILY = "custom"
"""The family of a proposer the user supplies as code: on SGLang, an algorithm a plugin registers."""

SGLANG_METHOD_ALGORITHMS: Mapping[str, str] = MappingProxyType(
    {
        "ngram": "NGRAM",
        "draft_model": "STANDALONE",
        "standalone": "STANDALONE",
        "mtp": "NEXTN",
        "nextn": "NEXTN",
        "frozen_kv_mtp": "FROZEN_KV_MTP",
        "eagle": "EAGLE",
        "eagle3": "EAGLE3",
        "dflash": "DFLASH",
        "dspark": "DSPARK",
        "uno": "UNO",
    }
)
"""specselect method -> SGLang algorithm (model-specific `<model>_mtp` methods map to NEXTN too)."""

SGLANG_FAMILY_METHODS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "ngram": ("ngram",),
        "draft_model": ("draft_model", "standalone"),
        "mtp": ("mtp", "nextn", "frozen_kv_mtp"),
        "eagle": ("eagle", "eagle3"),
        "dflash": ("dflash",),
        "dspark": ("dspark",),
        "uno": ("uno",),
    }
)
"""The methods of each built-in family SGLang can run (the first is the default); `custom` names its plugin's."""

_EAGLE_LIKE = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "FROZEN_KV_MTP"})
_NEEDS_PROPOSER = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DSPARK", "UNO"})
_BLOCK = frozenset({"DFLASH", "DSPARK"})
_BUILTIN = frozenset(SGLANG_METHOD_ALGORITHMS.values()) | {"NONE"}
_TARGET_LAYERS = frozenset({"NEXTN", "FROZEN_KV_MTP"})
_COMMON_OPTIONS = frozenset(
    {
        "accept_threshold_single",
        "accept_threshold_acc",
        "adaptive",
        "adaptive_config",
        "use_rejection_sampling",
        "attention_mode",
        "draft_attention_backend",
        "draft_model_quantization",
        "draft_load_format",
        "moe_runner_backend",
        "moe_a2a_backend",
        "draft_kv_cache_dtype",
        "draft_sink_size",
        "dsa_topk_backend",
        "enable_w4a4_mxfp4_megamoe",
        "domino_candidate_pool_size",
    }
)
_ALGORITHM_OPTIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "eagle": frozenset({"num_steps", "eagle_topk", "token_map", "use_block_verification"}),
        "ngram": frozenset(
            {
                "ngram_min_match_window_size",
                "ngram_max_match_window_size",
                "ngram_min_bfs_breadth",
                "ngram_max_bfs_breadth",
                "ngram_match_type",
                "ngram_branch_length",
                "ngram_capacity",
                "ngram_max_trie_depth",
                "ngram_external_corpus_path",
                "ngram_external_sam_budget",
                "ngram_external_corpus_max_tokens",
            }
        ),
        "dflash": frozenset(
            {
                "eagle_topk",
                "dflash_block_size",
                "dflash_draft_window_size",
                "draft_window_size",
                "use_block_verification",
            }
        ),
        "dspark": frozenset(
            {
                "dspark_block_size",
                "dspark_sps_table_path",
                "dspark_confidence_sts_path",
                "dspark_align_verify_tokens_to_graph_tier",
                "draft_window_size",
                "use_block_verification",
            }
        ),
        "uno": frozenset({"eagle_topk", "num_steps"}),
        "plugin": frozenset(),
    }
)
"""Known SGLang speculative options per algorithm group (used when the probe's flag list is unavailable)."""
RETIRED_OPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "ngram_min_match_window_size": "0.5.2x matches n-grams by trie depth (ngram_max_trie_depth)",
        "ngram_max_match_window_size": "0.5.2x matches n-grams by trie depth (ngram_max_trie_depth)",
        "ngram_branch_length": "0.5.2x bounds n-gram branches by ngram_max_bfs_breadth",
        "dflash_draft_window_size": "0.5.2x names it draft_window_size",
    }
)
"""Options older SGLang releases declared and the newest recorded one (0.5.23) does not: kept for the older ones;
with a probed flag list a plan that sets them on a newer SGLang is refused, naming the missing flag."""
KNOWN_OPTIONS: frozenset[str] = _COMMON_OPTIONS.union(*_ALGORITHM_OPTIONS.values())
"""Every speculative option this module knows, under its `ServerArgs` name without the `speculative_` prefix."""

# vLLM's names for the same n-gram window, so a plan written for vLLM keeps its meaning on SGLang.
_VLLM_NAMES = MappingProxyType(
    {"prompt_lookup_min": "ngram_min_match_window_size", "prompt_lookup_max": "ngram_max_match_window_size"}
)
_RESERVED = MappingProxyType(
    {
        "algorithm": "set the candidate's family/method",
        "draft_model_path": "set the candidate's proposer",
        "draft_model": "set the candidate's proposer",
        "num_draft_tokens": "set num_speculative_tokens (SGLang gets it plus one)",
        "draft_model_revision": 'pin the proposer as proposer = "org/name@REVISION" (admission resolves it there)',
    }
)
RESERVED_OPTIONS: frozenset[str] = frozenset(_RESERVED)
"""Speculative fields a plan sets through the candidate itself, never through options."""
# Consumed before launch: `revision` selects the proposer snapshot that admission resolved to a local path.
_CONSUMED = frozenset({"revision"})


def sglang_flag(key: str) -> str:
    """The command-line flag of a `ServerArgs` field name: `speculative_eagle_topk` -> `--speculative-eagle-topk`."""
    return "--" + key.replace("_", "-")


_THRESHOLDS = ("accept_threshold_single", "accept_threshold_acc")
"""SGLang's relaxed acceptance: a draft token is accepted when its target probability exceeds `_single`, or with
probability min(1, p / `_acc`); anything but 1.0 (the default) changes which tokens are accepted."""


def lossy_verification(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """(option, why) when the options relax SGLang's verification (an accept threshold other than 1); None when
    exact."""
    for key, value in options.items():
        bare = key.removeprefix(_PREFIX)
        if bare in _THRESHOLDS and not isinstance(value, bool) and isinstance(value, int | float) and value != 1:
            return (
                key,
                f"{bare} {value} accepts draft tokens the target would not emit: the outputs are not the target's",
            )
    return None


def sglang_field(option: str) -> str:
    """The `ServerArgs` field of a plan option: `adaptive` -> `speculative_adaptive` (prefixed ones unchanged)."""
    return option if option.startswith(_PREFIX) else _PREFIX + option


def sglang_algorithm(family: str, method: str | None) -> str | None:
    """SGLang's algorithm for a family/method, or None when SGLang has none (or the method is another family's)."""
    try:
        canonical = classify_family(family).family
    except UnknownFamilyError:
        return None
    if canonical == PLUGIN_FAMILY:
        return _plugin_algorithm(method)
    methods = SGLANG_FAMILY_METHODS.get(canonical)
    if methods is None:
        return None
    chosen = methods[0] if method is None else method.strip().lower()
    if canonical == "mtp" and chosen.endswith("_mtp") and chosen != "frozen_kv_mtp":
        return "NEXTN"
    return SGLANG_METHOD_ALGORITHMS[chosen] if chosen in methods else None


def _plugin_algorithm(method: str | None) -> str | None:
    """A plugin's algorithm name (upper-cased, as SGLang looks it up); None when unnamed or a built-in's name."""
    name = (method or "").strip().upper()
    if not name or name in _BUILTIN or name in ("CUSTOM", "CUSTOM_CLASS", "PLUGIN", "NEXTN"):
        return None
    return name if name.replace("_", "").isalnum() else None


def supported_methods(algorithms: Collection[str]) -> tuple[str, ...]:
    """The specselect methods whose SGLang algorithm is in `algorithms` (as the probe found them)."""
    accepted = {a.upper() for a in algorithms}
    return tuple(m for m, algorithm in SGLANG_METHOD_ALGORITHMS.items() if algorithm in accepted)


def _positive_int(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be an integer >= 1, got {value!r}", location=where, fix="use a whole number")
    return value


def _option_value(key: str, value: Any, where: str) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and not (isinstance(value, float) and not math.isfinite(value)):
        return value
    raise ConfigError(
        f"option {key} must be a string, number or boolean, got {value!r}",
        location=where,
        fix="SGLang flags take one value each",
    )


def _group(algorithm: str) -> str:
    groups = {"NGRAM": "ngram", "DFLASH": "dflash", "DSPARK": "dspark", "UNO": "uno"}
    if algorithm in groups:
        return groups[algorithm]
    return "eagle" if algorithm in _BUILTIN else "plugin"


def _draft_tp_check(value: Any, tensor_parallel_size: int, where: str) -> None:
    # SGLang runs the draft with the target's tensor parallelism; there is no separate size.
    if _positive_int(value, where, "draft_tensor_parallel_size") != tensor_parallel_size:
        raise ConfigError(
            f"SGLang drafts with the target's tensor parallel size ({tensor_parallel_size}), not {value}",
            location=where,
            fix="remove draft_tensor_parallel_size or set it to the engine's tensor_parallel_size",
        )


def _unknown_option(
    raw_key: str, flag: str, *, algorithm: str, allowed: Collection[str], accepted: Collection[str] | None, where: str
) -> ConfigError:
    if accepted is None:
        listed = sorted(allowed)
    else:
        listed = sorted(
            f.removeprefix("--speculative-").replace("-", "_") for f in accepted if f.startswith("--speculative-")
        )
    return ConfigError(
        f"unknown SGLang option {raw_key!r} for {algorithm}"
        + (" (the installed SGLang has no " + flag + ")" if accepted is not None else ""),
        location=where,
        fix=f"use one of: {', '.join(listed)}",
    )


def _option_key(raw_key: str, algorithm: str, group: str, where: str) -> str:
    """The `ServerArgs` name of an option (vLLM's n-gram names translated); ConfigError for another group's."""
    key = raw_key.removeprefix(_PREFIX)
    if key in _VLLM_NAMES and group == "ngram":
        key = _VLLM_NAMES[key]
    other_group = next((g for g in ("ngram", "dflash", "dspark") if key.startswith(f"{g}_") and g != group), None)
    if other_group is not None:
        raise ConfigError(
            f"option {raw_key!r} belongs to {other_group.upper()}, not {algorithm}", location=where, fix="remove it"
        )
    return key


def _check_ngram_window(out: Mapping[str, Any], location: str) -> None:
    low = out.get(f"{_PREFIX}ngram_min_match_window_size")
    high = out.get(f"{_PREFIX}ngram_max_match_window_size")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ConfigError(
            f"the n-gram minimum match window ({low}) is larger than the maximum ({high})",
            location=f"{location}.options",
            fix="make the minimum <= the maximum",
        )


def _normalised_options(
    options: Mapping[str, Any],
    algorithm: str,
    *,
    tensor_parallel_size: int,
    accepted_flags: Collection[str] | None,
    location: str,
) -> dict[str, Any]:
    group = _group(algorithm)
    allowed = _COMMON_OPTIONS | _ALGORITHM_OPTIONS[group]
    out: dict[str, Any] = {}
    for raw_key, value in options.items():
        where = f"{location}.options.{raw_key}"
        bare = raw_key.removeprefix(_PREFIX)
        if bare in _RESERVED:
            raise ConfigError(f"{raw_key!r} cannot be set in options", location=where, fix=_RESERVED[bare])
        if bare in _CONSUMED:
            continue
        if bare == "draft_tensor_parallel_size":
            _draft_tp_check(value, tensor_parallel_size, where)
            continue
        key = _option_key(raw_key, algorithm, group, where)
        flag = sglang_flag(_PREFIX + key)
        known = flag in accepted_flags if accepted_flags is not None else key in allowed
        if not known:
            raise _unknown_option(
                raw_key, flag, algorithm=algorithm, allowed=allowed, accepted=accepted_flags, where=where
            )
        out[_PREFIX + key] = _option_value(raw_key, value, where)
    _check_ngram_window(out, location)
    return out


def _block_budget(
    algorithm: str, k: int | None, shape: tuple[int | None, int | None], opts: dict[str, Any], location: str
) -> dict[str, Any]:
    """DFLASH / DSPARK: one block verified in one step; their block-size option must agree with k."""
    topk, steps = shape
    if topk not in (None, 1) or steps not in (None, 1):
        raise ConfigError(
            f"{algorithm} drafts one block in one step (eagle_topk 1, num_steps 1), got {topk} and {steps}",
            location=f"{location}.options",
            fix="remove eagle_topk and num_steps",
        )
    # DFLASH's block is the verify window (tokens + 1); DSPARK's is the proposed tokens (gamma).
    name, width = ("dflash_block_size", 1) if algorithm == "DFLASH" else ("dspark_block_size", 0)
    block = opts.get(f"{_PREFIX}{name}")
    if k is not None and block is not None and block != k + width:
        rule = "block = tokens + 1" if width else "block = tokens"
        raise ConfigError(
            f"{name} {block} disagrees with num_speculative_tokens {k} ({rule})",
            location=f"{location}.options.{name}",
            fix=f"remove {name} or set it to {k + width}",
        )
    return {f"{_PREFIX}num_draft_tokens": k + 1} if k is not None else {}


def _eagle_shape(k: int | None, topk: int | None, steps: int | None, location: str) -> tuple[int | None, int | None]:
    """(num_steps, eagle_topk): a chain of k steps at top-k 1, or a tree whose depth the plan gives."""
    if k is None:
        return steps, topk
    if (topk or 1) == 1:
        if steps is not None and steps != k:
            raise ConfigError(
                f"with eagle_topk 1 (a chain) num_steps must equal num_speculative_tokens ({k}), got {steps}",
                location=f"{location}.options.num_steps",
                fix="remove num_steps",
            )
        return k, 1
    if steps is None:
        raise ConfigError(
            f"tree drafting (eagle_topk {topk}) needs its depth",
            location=f"{location}.options.num_steps",
            fix="set options.num_steps (the tree depth)",
        )
    return steps, topk


def _budget(algorithm: str, k: int | None, opts: dict[str, Any], location: str) -> dict[str, Any]:
    """num_steps / eagle_topk / num_draft_tokens for a proposal budget of k tokens per step."""
    topk_key, steps_key = f"{_PREFIX}eagle_topk", f"{_PREFIX}num_steps"
    topk = opts.pop(topk_key, None)
    steps = opts.pop(steps_key, None)
    if topk is not None:
        topk = _positive_int(topk, f"{location}.options.eagle_topk", "eagle_topk")
    if steps is not None:
        steps = _positive_int(steps, f"{location}.options.num_steps", "num_steps")
    if algorithm == "NGRAM" and (topk is not None or steps is not None):
        raise ConfigError(
            "NGRAM takes no eagle_topk or num_steps (its draft tree is num_speculative_tokens + 1 wide)",
            location=f"{location}.options",
            fix="remove eagle_topk/num_steps; tune the ngram_* options instead",
        )
    if algorithm in _BLOCK:
        return _block_budget(algorithm, k, (topk, steps), opts, location)
    out: dict[str, Any] = {}
    if algorithm in _EAGLE_LIKE:
        steps, topk = _eagle_shape(k, topk, steps, location)
        if steps is not None:
            out[steps_key] = steps
        if topk is not None:
            out[topk_key] = topk
    elif algorithm not in ("NGRAM",):
        # UNO and plugins take the tree shape as given (UNO's chain needs none).
        out.update({key: v for key, v in ((steps_key, steps), (topk_key, topk)) if v is not None})
    if k is not None:
        out[f"{_PREFIX}num_draft_tokens"] = k + 1
    return out


def _algorithm(proposal: Proposal, accepted: Collection[str] | None, location: str) -> str:
    """SGLang's `--speculative-algorithm` for the proposal; ConfigError when SGLang (or this version) has none."""
    algorithm = sglang_algorithm(proposal.family, proposal.method)
    if algorithm is None:
        families = ", ".join(f"{f} ({'/'.join(m)})" for f, m in SGLANG_FAMILY_METHODS.items())
        families += f", {PLUGIN_FAMILY} (the algorithm name a plugin registers)"
        raise ConfigError(
            f"SGLang has no algorithm for family {proposal.family!r} with method {proposal.method!r}",
            location=f"{location}.method",
            fix=f"use one of: {families}",
        )
    if accepted is not None and algorithm in _BUILTIN and algorithm not in {a.upper() for a in accepted}:
        raise ConfigError(
            f"the installed SGLang does not accept --speculative-algorithm {algorithm}",
            location=f"{location}.method",
            fix=f"use one of {', '.join(accepted) or '(none)'} or upgrade SGLang",
        )
    return algorithm


def _draft_path(
    algorithm: str, proposer_path: str | Path | None, target_path: str | Path | None, location: str
) -> str | Path | None:
    """The draft model path SGLang loads: the proposer, the target for MTP layers, or none (UNO's proposer is
    its LoRA adapter, passed as `uno_lora_path` by the caller)."""
    if algorithm in _NEEDS_PROPOSER:
        if proposer_path is None or not str(proposer_path).strip():
            raise ConfigError(
                f"{algorithm} needs a proposer checkpoint",
                location=f"{location}.proposer",
                fix="give the proposer's local directory or model id",
            )
        return proposer_path
    if proposer_path is not None:
        why = "uses the target's own layers" if algorithm in _TARGET_LAYERS else "needs no checkpoint"
        raise ConfigError(
            f"{algorithm} {why} but a proposer was given", location=f"{location}.proposer", fix="remove it"
        )
    return target_path if algorithm in _TARGET_LAYERS else None


def build_sglang_speculative_args(
    proposal: Proposal,
    *,
    target_path: str | Path | None = None,
    tensor_parallel_size: int = 1,
    accepted_algorithms: Collection[str] | None = None,
    accepted_flags: Collection[str] | None = None,
    location: str = "speculative",
) -> dict[str, Any]:
    """SGLang's speculative arguments (keyed by `ServerArgs` field) for a candidate; ConfigError on bad input.

    `accepted_algorithms` / `accepted_flags` come from the probe (`SglangCapabilities`); without them the
    known option names of each algorithm are used. MTP (NEXTN) loads its layers from the target, so the
    target's path is passed as the draft model path when given.
    """
    algorithm = _algorithm(proposal, accepted_algorithms, location)
    k = None
    if proposal.num_speculative_tokens is not None:
        where = f"{location}.num_speculative_tokens"
        k = _positive_int(proposal.num_speculative_tokens, where, "num_speculative_tokens")
    config: dict[str, Any] = {f"{_PREFIX}algorithm": algorithm}
    draft = _draft_path(algorithm, proposal.proposer_path, target_path, location)
    if draft is not None:
        config[UNO_LORA_KEY if algorithm == "UNO" else DRAFT_PATH_KEY] = str(draft)
    opts = _normalised_options(
        proposal.options,
        algorithm,
        tensor_parallel_size=tensor_parallel_size,
        accepted_flags=accepted_flags,
        location=location,
    )
    config.update(_budget(algorithm, k, opts, location))
    config.update(opts)
    return config
