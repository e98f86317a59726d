"""Gate 4 (compatibility) checks between a target and a proposer checkpoint (pure functions)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from specselect._core.gates import FactValue, GateCheck
from specselect.records.assets import ResolvedModel

__all__ = ["PAIRED_METHODS", "check_compatibility", "proposer_base_model"]

PAIRED_METHODS = frozenset({"eagle", "eagle3", "dflash", "dspark", "medusa", "mlp_speculator"})
"""Methods whose proposer is trained on one target's hidden features."""

_DRAFT_METHODS = frozenset({"draft_model", "standalone"})
"""An independent small LM as the proposer (`standalone` is SGLang's name for it)."""

_BASE_MODEL_KEYS = ("base_model_name_or_path", "base_model", "target_model", "target_model_name_or_path")
_LAYER_ID_KEYS = ("eagle_aux_hidden_state_layer_ids", "target_layer_ids", "dspark_target_layer_ids")


def proposer_base_model(config: Mapping[str, Any]) -> str | None:
    """The target model a proposer checkpoint says it was trained for, if it says so."""
    speculators = config.get("speculators_config")
    if isinstance(speculators, Mapping):
        verifier = speculators.get("verifier")
        if isinstance(verifier, Mapping) and isinstance(verifier.get("name_or_path"), str):
            return str(verifier["name_or_path"])
    for key in _BASE_MODEL_KEYS:
        if isinstance(config.get(key), str) and config[key]:
            return str(config[key])
    return None


def _verifier_architectures(config: Mapping[str, Any]) -> tuple[str, ...]:
    speculators = config.get("speculators_config")
    verifier = speculators.get("verifier") if isinstance(speculators, Mapping) else None
    archs = verifier.get("architectures") if isinstance(verifier, Mapping) else None
    return tuple(str(a) for a in archs) if isinstance(archs, list) else ()


def _layer_ids(config: Mapping[str, Any]) -> list[int]:
    for scope in (config, config.get("dflash_config"), config.get("eagle_config")):
        if not isinstance(scope, Mapping):
            continue
        for key in _LAYER_ID_KEYS:
            value = scope.get(key)
            if isinstance(value, list) and all(isinstance(v, int) for v in value):
                return [int(v) for v in value]
    return []


def _eagle_generation(proposer: ResolvedModel) -> str | None:
    """`eagle3` or `eagle` when the checkpoint's architecture names it, else None."""
    names = " ".join(proposer.architectures).lower()
    speculators = proposer.config.get("speculators_config")
    algo = speculators.get("algorithm") if isinstance(speculators, Mapping) else None
    if "eagle3" in names or algo == "eagle3" or proposer.config.get("eagle_aux_hidden_state_layer_ids"):
        return "eagle3"
    if "eagle" in names:
        return "eagle"
    return None


def _same_model_id(a: str, b: str) -> bool:
    return a.strip().rstrip("/").lower() == b.strip().rstrip("/").lower()


def _tokenizers_differ(target: ResolvedModel, proposer: ResolvedModel) -> bool:
    """Fingerprints (what every token id means) decide when both sides have one; file hashes otherwise.

    Converted tokenizer files of one vocabulary can differ in bytes (a name, a path, special-token roles), so
    raw hashes would refuse a compatible pair; they are only the fallback for tokenizers without a fingerprint.
    """
    if target.tokenizer_fingerprint is not None and proposer.tokenizer_fingerprint is not None:
        return target.tokenizer_fingerprint != proposer.tokenizer_fingerprint
    both = target.tokenizer_sha256 is not None and proposer.tokenizer_sha256 is not None
    return both and target.tokenizer_sha256 != proposer.tokenizer_sha256


def check_compatibility(
    method: str, target: ResolvedModel, proposer: ResolvedModel | None, options: Mapping[str, Any]
) -> GateCheck:
    """Vocabulary, tokenizer and pairing checks; methods without a proposer pass."""
    if proposer is None:
        return GateCheck.ok(method=method, proposer_checked=False)
    facts: dict[str, FactValue] = {
        "method": method,
        "target_vocab_size": target.vocab_size,
        "proposer_vocab_size": proposer.vocab_size,
        "target_snapshot": target.snapshot or None,
        "proposer_snapshot": proposer.snapshot or None,
    }
    heterogeneous = bool(options.get("use_heterogeneous_vocab", False))
    facts["use_heterogeneous_vocab"] = heterogeneous
    vocab_known = target.vocab_size is not None and proposer.vocab_size is not None
    if vocab_known and target.vocab_size != proposer.vocab_size and not heterogeneous:
        return GateCheck.fail("vocab_size_mismatch", **facts)
    if method in _DRAFT_METHODS:
        return _draft_check(target, proposer, facts, heterogeneous)
    if method in PAIRED_METHODS:
        return _paired_check(method, target, proposer, facts)
    return GateCheck.ok(**facts)


def _draft_check(
    target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue], heterogeneous: bool
) -> GateCheck:
    facts["target_tokenizer_sha256"] = target.tokenizer_sha256
    facts["proposer_tokenizer_sha256"] = proposer.tokenizer_sha256
    facts["target_tokenizer_fingerprint"] = target.tokenizer_fingerprint
    facts["proposer_tokenizer_fingerprint"] = proposer.tokenizer_fingerprint
    if _tokenizers_differ(target, proposer) and not heterogeneous:
        return GateCheck.fail("tokenizer_mismatch", **facts)
    return GateCheck.ok(**facts)


_Mismatch = Callable[[str, ResolvedModel, ResolvedModel, dict[str, FactValue]], str | None]
"""One pairing check: the mismatch it found (None if none), recording what it compared in the facts."""


def _hidden_size_mismatch(
    method: str, target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue]
) -> str | None:
    expected_hidden = proposer.config.get("target_hidden_size")
    if not isinstance(expected_hidden, int):
        expected_hidden = proposer.hidden_size if method in ("eagle", "eagle3") else None
    facts["target_hidden_size"] = target.hidden_size
    facts["proposer_target_hidden_size"] = expected_hidden
    known = expected_hidden is not None and target.hidden_size is not None
    return "hidden_size" if known and expected_hidden != target.hidden_size else None


def _base_model_mismatch(
    method: str, target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue]
) -> str | None:
    base = proposer_base_model(proposer.config)
    facts["proposer_base_model"] = base
    facts["target_ref"] = target.ref
    differs = base is not None and target.source == "hf_cache" and not _same_model_id(base, target.ref)
    return "base_model" if differs else None


def _architecture_mismatch(
    method: str, target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue]
) -> str | None:
    verifier_archs = _verifier_architectures(proposer.config)
    if not (verifier_archs and target.architectures) or set(verifier_archs) & set(target.architectures):
        return None
    facts["proposer_verifier_architectures"] = ",".join(verifier_archs)
    facts["target_architectures"] = ",".join(target.architectures)
    return "architecture"


def _layer_ids_mismatch(
    method: str, target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue]
) -> str | None:
    layer_ids = _layer_ids(proposer.config)
    # Lenient by one: some drafters count the embedding output as an extra layer.
    if not layer_ids or target.num_hidden_layers is None or max(layer_ids) <= target.num_hidden_layers:
        return None
    facts["proposer_max_target_layer_id"] = max(layer_ids)
    facts["target_num_hidden_layers"] = target.num_hidden_layers
    return "target_layer_ids"


_PAIRING_CHECKS: tuple[_Mismatch, ...] = (
    _hidden_size_mismatch,
    _base_model_mismatch,
    _architecture_mismatch,
    _layer_ids_mismatch,
)
"""In this order: the first mismatch found is the one reported."""


def _paired_check(
    method: str, target: ResolvedModel, proposer: ResolvedModel, facts: dict[str, FactValue]
) -> GateCheck:
    for check in _PAIRING_CHECKS:
        mismatch = check(method, target, proposer, facts)
        if mismatch is not None:
            return GateCheck.fail("proposer_target_mismatch", mismatch=mismatch, **facts)
    if method in ("eagle", "eagle3"):
        generation = _eagle_generation(proposer)
        facts["proposer_eagle_generation"] = generation
        if generation is not None and generation != method:
            return GateCheck.fail("proposer_method_mismatch", fix=f"set method = {generation!r}", **facts)
    return GateCheck.ok(**facts)
