"""Gather the facts of admission gates 1-5 for one candidate: the engine's backend gate, then the shared ones.

`specselect._core.gates.admit` applies the gate order; this module only finds the facts. The backend gate
(2) and the terms of the capacity gate (5) are the engine's answers (each engine's `admit` calls
`gather_admission` with them); the asset (3) and compatibility (4) gates are the same for every engine. Once a
gate fails, later gates are not evaluated (no proposer is resolved or converted for a candidate the backend
cannot run) and are reported as passing placeholders, which `admit` never reaches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from specselect._admission.capacity import CapacityTerms, capacity_check
from specselect._admission.compat import check_compatibility
from specselect._assets.refs import resolve_model
from specselect._core.families import AssetKind, classify_family
from specselect._core.gates import GATE_ORDER, LOSSY_FACT, LOSSY_REFUSED, AdmissionInput, FactValue, GateCheck
from specselect._plan import Candidate
from specselect.errors import EngineSetupError
from specselect.records.assets import ResolvedModel

__all__ = [
    "ADMISSION_OPTION_KEYS",
    "Gathered",
    "Resolving",
    "disabled",
    "gather_admission",
    "not_evaluated",
    "stopped",
]

ADMISSION_OPTION_KEYS = frozenset({"revision", "use_heterogeneous_vocab", "draft_tensor_parallel_size"})
"""The candidate options whose values gathering reads (asset, compatibility, capacity gates). Nothing else of a
candidate's option values, nor its `num_speculative_tokens`, changes any gate (the engine's option check reads
only the keys, which the sub-candidates of a sweep share): candidates that differ only there have the same
admission."""


class Gathered(BaseModel):
    """The admission input plus what the launcher needs afterwards (the method and the proposer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: AdmissionInput
    method: str
    proposer: ResolvedModel | None = None


@dataclass(frozen=True)
class Resolving:
    """How a proposer reference is resolved: the home, the engine python that converts a builtin the first
    time (`prepare=False` never converts one: checks then use its known facts), and whether a local directory's
    weights are hashed in full (`verify_weights`; else files and headers identify big checkpoints)."""

    home: Path | None = None
    python: Path | None = None
    prepare: bool = True
    verify_weights: bool = False


def not_evaluated(after: str) -> GateCheck:
    """The placeholder of a gate that was not evaluated because gate `after` decided."""
    return GateCheck.ok(evaluated=False, after_failed_gate=after)


def disabled(method: str) -> Gathered:
    """A candidate switched off in the plan: no gate is evaluated."""
    skipped = not_evaluated("enabled")
    return Gathered(
        input=AdmissionInput(enabled=False, backend=skipped, asset=skipped, compatibility=skipped, capacity=skipped),
        method=method,
    )


def stopped(method: str, proposer: ResolvedModel | None, **ran: GateCheck) -> Gathered:
    """The gates that ran, in order, up to the one that failed; the later ones are not evaluated because of it."""
    failed = next((name for name in GATE_ORDER if name in ran and not ran[name].passed), "backend")
    rest = not_evaluated(failed)
    checks = {name: ran.get(name, rest) for name in GATE_ORDER}
    return Gathered(input=AdmissionInput(enabled=True, **checks), method=method, proposer=proposer)


def _target_ships_dspark(target: ResolvedModel) -> bool:
    """DeepSeek checkpoints can carry DSpark stages inside the target (vLLM then needs no proposer)."""
    return target.model_type in ("deepseek_v4", "deepseek_v41") or any("dspark" in k for k in target.config)


def _asset_check(
    method: str,
    family: str,
    candidate: Candidate,
    target: ResolvedModel,
    resolving: Resolving,
) -> tuple[GateCheck, ResolvedModel | None]:
    asset_kind = classify_family(family).asset_kind
    facts: dict[str, FactValue] = {"asset_kind": asset_kind.value, "method": method}
    if asset_kind is AssetKind.NONE:
        return GateCheck.ok(**facts), None
    if asset_kind is AssetKind.TARGET_NATIVE:
        facts["target_model_type"] = target.model_type
        facts["target_snapshot"] = target.snapshot or None
        if not target.has_native_mtp:
            return GateCheck.fail("no_native_mtp", **facts), None
        return GateCheck.ok(**facts), None
    if candidate.proposer is None:
        if method == "dspark" and _target_ships_dspark(target):
            return GateCheck.ok(proposer_source="target_checkpoint", **facts), None
        return GateCheck.fail("proposer_not_given", **facts), None
    facts["proposer"] = candidate.proposer
    revision = candidate.options.get("revision")
    try:
        proposer = resolve_model(
            candidate.proposer,
            revision=revision if isinstance(revision, str) else None,
            home=resolving.home,
            python=resolving.python,
            prepare=resolving.prepare,
            verify_weights=resolving.verify_weights,
        )
    except EngineSetupError as exc:
        return GateCheck.fail("proposer_not_found", detail=exc.one_line(), **facts), None
    facts.update(
        proposer_path=str(proposer.path),
        proposer_snapshot=proposer.snapshot or None,
        proposer_source=proposer.source,
        proposer_prepared=proposer.present,
    )
    return GateCheck.ok(**facts), proposer


CapacityFor = Callable[[ResolvedModel | None], CapacityTerms]
"""The engine's capacity terms for a server with the given proposer (None: target only)."""


def _with_lossy(options: GateCheck | None, lossy: tuple[str, str] | None, *, allowed: bool) -> GateCheck | None:
    """The option check with the lossy verdict: refused unless allowed, else a fact of the passing check."""
    if lossy is None or (options is not None and not options.passed):
        return options
    key, why = lossy
    facts = {**(options.facts if options is not None else {}), LOSSY_FACT: why, "lossy_option": key}
    if not allowed:
        return GateCheck.fail(
            LOSSY_REFUSED,
            detail=f"{why}; set allow_lossy = true on the candidate to measure it anyway",
            **facts,
        )
    return GateCheck.ok(**facts)


def gather_admission(
    candidate: Candidate,
    target: ResolvedModel,
    *,
    method: str,
    backend: GateCheck,
    capacity: CapacityFor,
    options: GateCheck | None = None,
    resolving: Resolving | None = None,
    lossy: tuple[str, str] | None = None,
) -> Gathered:
    """Facts of every gate for `candidate` after the engine's backend gate, plus its method and proposer.

    `options` is the engine's check of the candidate's option keys: part of gate 4, decided before the
    proposer's compatibility. `resolving` says how the proposer is found (`Resolving`). `lossy` is the engine's
    word on which option makes the candidate's verification inexact and why (None: exact): gate 4 refuses it
    unless the plan opts in (`allow_lossy`), and records it as a fact either way.
    """
    if not candidate.enabled:
        return disabled(method)
    if not backend.passed:
        return stopped(method, None, backend=backend)
    family = classify_family(candidate.family).family
    asset, proposer = _asset_check(method, family, candidate, target, resolving or Resolving())
    if not asset.passed:
        return stopped(method, None, backend=backend, asset=asset)
    options = _with_lossy(options, lossy, allowed=candidate.allow_lossy)
    if options is not None and not options.passed:
        return stopped(method, proposer, backend=backend, asset=asset, compatibility=options)
    compatibility = check_compatibility(method, target, proposer, candidate.options)
    if options is not None and compatibility.passed:
        compatibility = compatibility.model_copy(update={"facts": {**compatibility.facts, **options.facts}})
    if not compatibility.passed:
        return stopped(method, proposer, backend=backend, asset=asset, compatibility=compatibility)
    checks = {"backend": backend, "asset": asset, "compatibility": compatibility}
    return Gathered(
        input=AdmissionInput(enabled=True, **checks, capacity=capacity_check(target, proposer, capacity(proposer))),
        method=method,
        proposer=proposer,
    )
