"""Gather the facts of admission gates 2-5 for one candidate from the engine probe and the model assets.

`specselect.core.admission.admit` applies the gate order; this module only finds the facts. Once a
gate fails, later gates are not evaluated (no proposer is resolved or converted for a candidate the
backend cannot run) and are reported as passing placeholders, which `admit` never reaches.

The engine kind of the settings picks the backend gate: vLLM's here, SGLang's in
`specselect.engines.sglang.gate`; the capacity gate (memory, device count) is shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from specselect.admission.capacity import Capabilities, capacity_check
from specselect.admission.compat import check_compatibility
from specselect.admission.settings import EngineSettings
from specselect.assets.refs import ResolvedModel, resolve_model
from specselect.core.admission import AdmissionInput, FactValue, GateCheck
from specselect.core.families import AssetKind, classify_family
from specselect.engines.sglang.gate import backend_gate
from specselect.engines.sglang.probe import SglangCapabilities
from specselect.engines.sglang.specargs import SGLANG_FAMILY_METHODS, sglang_algorithm
from specselect.engines.vllm.envsetup import EngineEnv
from specselect.engines.vllm.probe import EngineCapabilities
from specselect.errors import EngineSetupError

__all__ = [
    "ADMISSION_OPTION_KEYS",
    "ARCTIC_INFERENCE_REQUIREMENT",
    "DEFAULT_METHODS",
    "CandidateLike",
    "Capabilities",
    "EngineSettings",
    "Gathered",
    "capacity_check",
    "gather_admission",
    "gather_admission_input",
    "method_for",
]

DEFAULT_METHODS: Mapping[str, str] = MappingProxyType(
    {
        "ngram": "ngram",
        "suffix": "suffix",
        "draft_model": "draft_model",
        "mtp": "mtp",
        "eagle": "eagle",
        "dflash": "dflash",
        "dspark": "dspark",
        "medusa": "medusa",
        "mlp_speculator": "mlp_speculator",
    }
)
"""The backend method of a family when the candidate names none (`eagle3` must be given explicitly)."""

ADMISSION_OPTION_KEYS = frozenset({"revision", "use_heterogeneous_vocab", "draft_tensor_parallel_size"})
"""The candidate options gathering reads (asset, compatibility, capacity gates). Nothing else of a
candidate's options, nor its `num_speculative_tokens`, changes any gate: candidates that differ only there
(the sub-candidates of a sweep) have the same admission."""

ARCTIC_INFERENCE_REQUIREMENT = "arctic-inference==0.1.1"
"""vLLM's suffix decoding imports this package (it builds from source, ~2.5 min)."""


class CandidateLike(Protocol):
    """What the gatherer reads from a plan candidate."""

    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def method(self) -> str | None: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def num_speculative_tokens(self) -> int | None: ...
    @property
    def proposer(self) -> str | None: ...
    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def min_engine_version(self) -> str | None: ...


class Gathered(BaseModel):
    """The admission input plus what the launcher needs afterwards (the method and the proposer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: AdmissionInput
    method: str
    proposer: ResolvedModel | None = None


def _not_evaluated(after: str) -> GateCheck:
    return GateCheck.ok(evaluated=False, after_failed_gate=after)


_GATE_ORDER = ("backend", "asset", "compatibility", "capacity")


def _stopped(method: str, proposer: ResolvedModel | None, **ran: GateCheck) -> Gathered:
    """The gates that ran, in order, up to the one that failed; the later ones are not evaluated because of it."""
    failed = next((name for name in _GATE_ORDER if name in ran and not ran[name].passed), "backend")
    rest = _not_evaluated(failed)
    checks = {name: ran.get(name, rest) for name in _GATE_ORDER}
    return Gathered(input=AdmissionInput(enabled=True, **checks), method=method, proposer=proposer)


def _plain_version(text: str) -> Version:
    return Version(Version(text).public)  # local labels such as +cpu do not order releases


def method_for(candidate: CandidateLike, kind: str = "vllm") -> str:
    """The backend method of a candidate: the one it names, else its family's default on engine `kind`."""
    if candidate.method:
        return candidate.method.strip().lower()
    family = classify_family(candidate.family).family
    if kind == "sglang" and family in SGLANG_FAMILY_METHODS:
        return SGLANG_FAMILY_METHODS[family][0]
    return DEFAULT_METHODS[family]


def _backend_gate(method: str, candidate: CandidateLike, caps: Capabilities, kind: str) -> GateCheck:
    """Gate 2 on the engine the plan asks for; a probe of another engine kind cannot admit anything."""
    if kind != caps.kind:
        return GateCheck.fail(
            "engine_kind_unsupported",
            requested_engine_kind=kind,
            engine_kind=caps.kind,
            engine_version=caps.engine_version,
            method=method,
            device_kind=caps.device_kind,
        )
    if isinstance(caps, SglangCapabilities):
        return backend_gate(candidate.family, candidate.method, caps, min_engine_version=candidate.min_engine_version)
    return _vllm_backend_check(method, candidate, caps)


def _vllm_backend_check(method: str, candidate: CandidateLike, caps: EngineCapabilities) -> GateCheck:
    facts: dict[str, FactValue] = {
        "engine_kind": caps.kind,
        "engine_version": caps.engine_version,
        "method": method,
        "device_kind": caps.device_kind,
    }
    if method not in caps.spec_methods:
        known = ",".join(m for m in caps.spec_methods if m not in caps.mtp_methods or m == "mtp")
        return GateCheck.fail("method_not_in_backend", engine_methods=known, **facts)
    if candidate.min_engine_version:
        facts["min_engine_version"] = candidate.min_engine_version
        try:
            too_old = _plain_version(caps.engine_version) < _plain_version(candidate.min_engine_version)
        except InvalidVersion:
            return GateCheck.fail("backend_probe_failed", problem="unparseable engine version", **facts)
        if too_old:
            return GateCheck.fail("engine_version_too_old", **facts)
    required = caps.method_hardware.get(method)
    if required is not None:
        facts["method_requires_device"] = required
        if required != caps.device_kind:
            return GateCheck.fail(f"requires_{required}", **facts)
    if method == "suffix":
        available = caps.optional_modules.get("arctic_inference", False)
        facts["arctic_inference_installed"] = available
        if not available:
            return GateCheck.fail(
                "suffix_needs_arctic_inference",
                install_command=f"{caps.python} -m pip install {ARCTIC_INFERENCE_REQUIREMENT}",
                **facts,
            )
    return GateCheck.ok(**facts)


def _target_ships_dspark(target: ResolvedModel) -> bool:
    """DeepSeek checkpoints can carry DSpark stages inside the target (vLLM then needs no proposer)."""
    return target.model_type in ("deepseek_v4", "deepseek_v41") or any("dspark" in k for k in target.config)


def _asset_check(
    method: str,
    family: str,
    candidate: CandidateLike,
    target: ResolvedModel,
    *,
    home: Path | None,
    env: EngineEnv | None,
    prepare: bool,
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
            home=home,
            env=env,
            prepare=prepare,
        )
    except EngineSetupError as exc:
        return GateCheck.fail("proposer_not_found", error=exc.one_line(), **facts), None
    facts.update(
        proposer_path=str(proposer.path),
        proposer_snapshot=proposer.snapshot or None,
        proposer_source=proposer.source,
        proposer_prepared=proposer.present,
    )
    return GateCheck.ok(**facts), proposer


def _draft_tensor_parallel_size(
    candidate: CandidateLike, proposer: ResolvedModel | None, settings: EngineSettings
) -> int | None:
    """Devices the proposer is split over; None = the target's tensor parallel size."""
    if settings.kind == "sglang":
        return None  # SGLang drafts at the target's tensor parallel size (specargs refuses another)
    given = candidate.options.get("draft_tensor_parallel_size")
    if isinstance(given, int) and not isinstance(given, bool) and given >= 1:
        return given
    # vLLM 0.32 (`SpeculativeConfig._verify_and_get_draft_tp`): unset -> the target's TP, but 1 for MLPSpeculator.
    if proposer is not None and proposer.model_type == "mlp_speculator":
        return 1
    return None


def gather_admission(
    candidate: CandidateLike,
    target: ResolvedModel,
    caps: Capabilities | None,
    *,
    home: Path | None = None,
    env: EngineEnv | None = None,
    settings: EngineSettings | None = None,
    prepare: bool = True,
    probe_error: str | None = None,
) -> Gathered:
    """Facts of every gate for `candidate`, plus its method and resolved proposer.

    `caps=None` means the engine probe failed (`probe_error` says why): the backend gate fails.
    `prepare=False` never converts a builtin proposer (checks then use its known facts).
    """
    settings = settings or EngineSettings()
    family = classify_family(candidate.family).family
    method = method_for(candidate, settings.kind)
    if not candidate.enabled:
        skipped = _not_evaluated("enabled")
        return Gathered(
            input=AdmissionInput(
                enabled=False, backend=skipped, asset=skipped, compatibility=skipped, capacity=skipped
            ),
            method=method,
        )
    if caps is None:
        backend = GateCheck.fail("backend_probe_failed", method=method, probe_error=probe_error)
    else:
        backend = _backend_gate(method, candidate, caps, settings.kind)
    if not backend.passed or caps is None:
        return _stopped(method, None, backend=backend)
    asset, proposer = _asset_check(method, family, candidate, target, home=home, env=env, prepare=prepare)
    if not asset.passed:
        return _stopped(method, None, backend=backend, asset=asset)
    compatibility = check_compatibility(method, target, proposer, candidate.options)
    if not compatibility.passed:
        return _stopped(method, proposer, backend=backend, asset=asset, compatibility=compatibility)
    capacity = capacity_check(
        target,
        proposer,
        caps,
        settings,
        speculative_algorithm=sglang_algorithm(candidate.family, candidate.method)
        if settings.kind == "sglang"
        else None,
        draft_tensor_parallel_size=_draft_tensor_parallel_size(candidate, proposer, settings),
    )
    return Gathered(
        input=AdmissionInput(
            enabled=True, backend=backend, asset=asset, compatibility=compatibility, capacity=capacity
        ),
        method=method,
        proposer=proposer,
    )


def gather_admission_input(
    candidate: CandidateLike,
    target: ResolvedModel,
    caps: Capabilities | None,
    *,
    home: Path | None = None,
    env: EngineEnv | None = None,
    settings: EngineSettings | None = None,
    prepare: bool = True,
    probe_error: str | None = None,
) -> AdmissionInput:
    """The `AdmissionInput` of `candidate` (see `gather_admission`)."""
    return gather_admission(
        candidate, target, caps, home=home, env=env, settings=settings, prepare=prepare, probe_error=probe_error
    ).input
