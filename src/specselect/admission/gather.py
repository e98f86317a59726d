"""Gather the facts of admission gates 2-5 for one candidate from the engine probe and the model assets.

`specselect.core.admission.admit` applies the gate order; this module only finds the facts. Once a
gate fails, later gates are not evaluated (no proposer is resolved or converted for a candidate the
backend cannot run) and are reported as passing placeholders, which `admit` never reaches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field

from specselect.admission.compat import check_compatibility
from specselect.assets.memory import estimate_memory
from specselect.assets.refs import ResolvedModel, resolve_model
from specselect.core.admission import AdmissionInput, FactValue, GateCheck
from specselect.core.families import AssetKind, classify_family
from specselect.engines.vllm.envsetup import EngineEnv
from specselect.engines.vllm.probe import EngineCapabilities
from specselect.errors import EngineSetupError

__all__ = [
    "ARCTIC_INFERENCE_REQUIREMENT",
    "DEFAULT_METHODS",
    "CandidateLike",
    "EngineSettings",
    "Gathered",
    "capacity_check",
    "gather_admission",
    "gather_admission_input",
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


class EngineSettings(BaseModel):
    """The plan's engine settings that change what a server needs (dtype, parallelism, KV cache)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "vllm"
    dtype: str = "auto"
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    """Variables the server gets on top of specselect's own environment (plan engine env + group env)."""

    @classmethod
    def from_engine_args(
        cls,
        args: Sequence[str] = (),
        *,
        kind: str = "vllm",
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> EngineSettings:
        """Settings from plan fields plus `--gpu-memory-utilization` / `--kv-cache-memory-bytes` in extra args."""
        values: dict[str, str] = {}
        items = list(args)
        for i, arg in enumerate(items):
            for flag in ("--gpu-memory-utilization", "--kv-cache-memory-bytes"):
                if arg == flag and i + 1 < len(items):
                    values[flag] = items[i + 1]
                elif arg.startswith(flag + "="):
                    values[flag] = arg.split("=", 1)[1]
        util = values.get("--gpu-memory-utilization")
        kv_bytes = values.get("--kv-cache-memory-bytes")
        return cls(
            kind=kind,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            gpu_memory_utilization=float(util) if util else None,
            kv_cache_memory_bytes=int(float(kv_bytes)) if kv_bytes else None,
            env=dict(env or {}),
        )

    def cpu_kvcache_gib(self) -> float | None:
        """VLLM_CPU_KVCACHE_SPACE as the server will see it (plan env first, then specselect's own)."""
        raw = self.env.get("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", ""))
        try:
            return float(raw) if raw.strip() else None
        except ValueError:
            return None


class Gathered(BaseModel):
    """The admission input plus what the launcher needs afterwards (the method and the proposer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: AdmissionInput
    method: str
    proposer: ResolvedModel | None = None


def _not_evaluated(after: str) -> GateCheck:
    return GateCheck.ok(evaluated=False, after_failed_gate=after)


def _plain_version(text: str) -> Version:
    return Version(Version(text).public)  # local labels such as +cpu do not order releases


def _backend_check(method: str, candidate: CandidateLike, caps: EngineCapabilities, kind: str) -> GateCheck:
    facts: dict[str, FactValue] = {
        "engine_kind": caps.kind,
        "engine_version": caps.engine_version,
        "method": method,
        "device_kind": caps.device_kind,
    }
    if kind != caps.kind:
        return GateCheck.fail("engine_kind_unsupported", requested_engine_kind=kind, **facts)
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


def capacity_check(
    target: ResolvedModel, proposer: ResolvedModel | None, caps: EngineCapabilities, settings: EngineSettings
) -> GateCheck:
    """Gate 5 alone: also usable for the target-only baseline, which has no family to admit."""
    estimate = estimate_memory(
        target,
        proposer,
        device_kind=caps.device_kind,
        budget_mb=caps.memory_budget_mb,
        dtype=settings.dtype,
        tensor_parallel_size=settings.tensor_parallel_size,
        pipeline_parallel_size=settings.pipeline_parallel_size,
        cpu_kvcache_gib=settings.cpu_kvcache_gib(),
        kv_cache_memory_bytes=settings.kv_cache_memory_bytes,
        gpu_memory_utilization=settings.gpu_memory_utilization,
    )
    facts: dict[str, FactValue] = {
        key: value for key, value in estimate.model_dump().items() if key != "fits" and not isinstance(value, dict)
    }
    facts["estimate_known"] = estimate.fits is not None
    if estimate.fits is False:
        return GateCheck.fail("memory_over_budget", **facts)
    return GateCheck.ok(**facts)


def gather_admission(
    candidate: CandidateLike,
    target: ResolvedModel,
    caps: EngineCapabilities | None,
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
    method = (candidate.method or DEFAULT_METHODS[family]).strip().lower()
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
        backend = _backend_check(method, candidate, caps, settings.kind)
    if not backend.passed or caps is None:
        rest = _not_evaluated("backend")
        return Gathered(
            input=AdmissionInput(enabled=True, backend=backend, asset=rest, compatibility=rest, capacity=rest),
            method=method,
        )
    asset, proposer = _asset_check(method, family, candidate, target, home=home, env=env, prepare=prepare)
    if not asset.passed:
        rest = _not_evaluated("asset")
        return Gathered(
            input=AdmissionInput(enabled=True, backend=backend, asset=asset, compatibility=rest, capacity=rest),
            method=method,
        )
    compatibility = check_compatibility(method, target, proposer, candidate.options)
    if not compatibility.passed:
        rest = _not_evaluated("compatibility")
        return Gathered(
            input=AdmissionInput(
                enabled=True, backend=backend, asset=asset, compatibility=compatibility, capacity=rest
            ),
            method=method,
            proposer=proposer,
        )
    capacity = capacity_check(target, proposer, caps, settings)
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
    caps: EngineCapabilities | None,
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
