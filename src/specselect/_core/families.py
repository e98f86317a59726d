"""The proposer-family registry of the selection contract (section 1).

Names match case-insensitively ignoring `-` and `_`; unknown names raise with the known ones and a
"did you mean". Lookups return frozen values, so callers can never change the registry.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

__all__ = [
    "FAMILIES",
    "AssetKind",
    "Dependency",
    "FamilySpec",
    "UnknownFamilyError",
    "classify_family",
    "family_names",
    "normalize_family_name",
]


class AssetKind(StrEnum):
    """What extra asset a proposer family needs."""

    NONE = "none"
    DRAFT_CHECKPOINT = "draft_checkpoint"
    TARGET_NATIVE = "target_native"
    PAIRED_CHECKPOINT = "paired_checkpoint"


class Dependency(StrEnum):
    """How tokens inside a proposed block depend on each other."""

    RETRIEVAL = "retrieval"
    AUTOREGRESSIVE = "autoregressive"
    MODEL_NATIVE = "model_native"
    FEATURE_AUTOREGRESSIVE = "feature_autoregressive"
    PARALLEL_BLOCK = "parallel_block"
    SEMI_AUTOREGRESSIVE = "semi_autoregressive"
    PARALLEL_HEADS = "parallel_heads"
    USER_DEFINED = "user_defined"


class FamilySpec(BaseModel):
    """One proposer family: where candidates come from and what it needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str
    asset_kind: AssetKind
    dependency: Dependency
    telemetry: tuple[str, ...]
    description: str
    aliases: tuple[str, ...] = ()


class UnknownFamilyError(ValueError):
    """An unknown proposer family; the message names the known ones (a ValueError, as the contract says)."""


_BASIC = ("proposed_tokens", "accepted_tokens")

_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        family="ngram",
        asset_kind=AssetKind.NONE,
        dependency=Dependency.RETRIEVAL,
        telemetry=_BASIC,
        description="repeated spans in the prompt / generated history",
        aliases=("prompt_lookup", "ngram_gpu"),
    ),
    FamilySpec(
        family="suffix",
        asset_kind=AssetKind.NONE,
        dependency=Dependency.RETRIEVAL,
        telemetry=_BASIC,
        description="suffix trees over prompt, output and past requests",
        aliases=("suffix_decoding",),
    ),
    FamilySpec(
        family="draft_model",
        asset_kind=AssetKind.DRAFT_CHECKPOINT,
        dependency=Dependency.AUTOREGRESSIVE,
        telemetry=_BASIC,
        description="a separate small model with the target's vocabulary",
        aliases=("draft", "standalone"),
    ),
    FamilySpec(
        family="mtp",
        asset_kind=AssetKind.TARGET_NATIVE,
        dependency=Dependency.MODEL_NATIVE,
        telemetry=_BASIC,
        description="the target's own multi-token-prediction layers",
        aliases=("nextn",),
    ),
    FamilySpec(
        family="eagle",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.FEATURE_AUTOREGRESSIVE,
        telemetry=_BASIC,
        description="target hidden features + a matching EAGLE/EAGLE-3 head",
        aliases=("eagle3",),
    ),
    FamilySpec(
        family="dflash",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.PARALLEL_BLOCK,
        telemetry=_BASIC,
        description="target features + a matching block-diffusion drafter",
    ),
    FamilySpec(
        family="dspark",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.SEMI_AUTOREGRESSIVE,
        telemetry=(*_BASIC, "verified_tokens"),
        description="parallel backbone + light sequential module + confidence head",
    ),
    FamilySpec(
        family="medusa",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.PARALLEL_HEADS,
        telemetry=_BASIC,
        description="extra decoding heads trained on the target",
    ),
    FamilySpec(
        family="mlp_speculator",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.FEATURE_AUTOREGRESSIVE,
        telemetry=_BASIC,
        description="a small MLP speculator conditioned on target hidden states",
    ),
    FamilySpec(
        family="uno",
        asset_kind=AssetKind.PAIRED_CHECKPOINT,
        dependency=Dependency.PARALLEL_BLOCK,
        telemetry=_BASIC,
        description="the target itself with a draft LoRA adapter trained for it, proposing a block per forward "
        "(SGLang's UNO)",
    ),
    FamilySpec(
        family="custom",
        asset_kind=AssetKind.NONE,
        dependency=Dependency.USER_DEFINED,
        telemetry=_BASIC,
        description="a proposer the user supplies as code: vLLM's custom_class, an algorithm an SGLang plugin "
        "registers",
        aliases=("custom_class", "plugin"),
    ),
)

FAMILIES: Mapping[str, FamilySpec] = MappingProxyType({spec.family: spec for spec in _SPECS})
"""Canonical family name -> spec (read-only)."""


def normalize_family_name(name: str) -> str:
    """Lower-case and drop `-`, `_` and spaces: `EAGLE-3` -> `eagle3`."""
    return "".join(ch for ch in name.strip().lower() if ch not in "-_ ")


def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for spec in _SPECS:
        for name in (spec.family, *spec.aliases):
            index[normalize_family_name(name)] = spec.family
    return index


_INDEX: Mapping[str, str] = MappingProxyType(_index())


def family_names() -> tuple[str, ...]:
    """The canonical family names, in registry order."""
    return tuple(FAMILIES)


def classify_family(name: str) -> FamilySpec:
    """Return the (frozen) spec of a family name or alias; raise UnknownFamilyError otherwise."""
    if not isinstance(name, str):
        raise UnknownFamilyError(f"family must be a string, got {type(name).__name__}")
    key = normalize_family_name(name)
    canonical = _INDEX.get(key)
    if canonical is None:
        known = ", ".join(family_names())
        close = difflib.get_close_matches(key, list(_INDEX), n=1, cutoff=0.6)
        hint = f" did you mean {_INDEX[close[0]]!r}?" if close else ""
        raise UnknownFamilyError(f"unknown proposer family {name!r};{hint} known families: {known}")
    return FAMILIES[canonical]
