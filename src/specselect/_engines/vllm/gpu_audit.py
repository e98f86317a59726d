"""The audit of a vLLM plan that will run on CUDA devices: settings that measure the wrong thing on a GPU.

The built-in plans are CPU plans (float32, `--enforce-eager`, `VLLM_CPU_KVCACHE_SPACE`); copied to a GPU host
they would run and measure a configuration nobody deploys. On CUDA the audit warns about:
- eager mode: `--enforce-eager`, `-O0` / `--optimization-level 0`, or a compilation config with compilation or
  CUDA graphs off (decoding then pays Python and kernel-launch overhead that speculation partly hides, so the
  speedups measured do not carry over to a compiled server);
- float32 weights (`dtype = "float32"`, or `auto` on a float32 checkpoint): twice bf16's memory, slower kernels;
- CPU-only environment variables (`VLLM_CPU_*`): a GPU server ignores them, so the plan is not what it says;
- a `--gpu-memory-utilization` that leaves no room for a candidate's drafter: per device, target weights +
  proposer weights + runtime overhead + the smallest useful KV cache must fit under utilization x device memory
  (the admission memory estimate, `assets.memory_estimate`); the candidate would be refused `memory_over_budget`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from specselect._admission.capacity import CapacityTerms
from specselect._admission.plan_admission import shared_admission_key
from specselect._assets.memory_estimate import GPU_MIN_KV_CACHE_MB, MemoryEstimate, estimate_memory
from specselect._assets.refs import resolve_model
from specselect._engines.base import EngineSetup, Finding, GroupContext
from specselect._plan import Candidate, Plan
from specselect.errors import SpecselectError
from specselect.records.assets import ResolvedModel

__all__ = [
    "CPU_ONLY_PREFIX",
    "Sizer",
    "TermsFor",
    "cpu_only_variables",
    "cuda_findings",
    "drafter_room_findings",
    "eager_flags",
    "plan_sizer",
]

CPU_ONLY_PREFIX = "VLLM_CPU_"
"""vLLM's CPU backend reads these (`VLLM_CPU_KVCACHE_SPACE`, `VLLM_CPU_OMP_THREADS_BIND`, ...); CUDA ignores them."""

_OFF = ("0", "none", "NONE", "None")
_COMPILE_KEYS = ("level", "mode", "cudagraph_mode")

Sizer = Callable[[str, str | None], ResolvedModel | None]
"""A model reference (and revision) -> its description with sizes, or None when it cannot be read."""
TermsFor = Callable[[GroupContext, ResolvedModel | None], CapacityTerms]
"""The engine's capacity terms of a group with a proposer (`VllmEngine.capacity_terms`)."""


def _compilation_off(text: str) -> bool:
    """A `--compilation-config` value (JSON or a bare level) that turns compilation or CUDA graphs off."""
    stripped = text.strip()
    if stripped in _OFF:
        return True
    try:
        config = json.loads(stripped)
    except ValueError:
        return False
    return isinstance(config, dict) and any(str(config.get(key)) in _OFF for key in _COMPILE_KEYS if key in config)


def eager_flags(args: Sequence[str]) -> list[str]:
    """The arguments of `args` that run vLLM eagerly (no compilation or no CUDA graphs), as written."""
    found: list[str] = []
    items = list(args)
    for i, arg in enumerate(items):
        following = items[i + 1] if i + 1 < len(items) else ""
        name, _, value = arg.partition("=")
        if name == "--enforce-eager" and value.lower() not in ("false", "0"):
            found.append(arg)
        elif arg in ("-O0", "-O=0") or (arg == "-O" and following == "0"):
            found.append(arg if arg != "-O" else "-O 0")
        elif name == "--optimization-level" and (value or following) == "0":
            found.append(arg if value else f"{arg} 0")
        elif name == "--compilation-config" and _compilation_off(value or following):
            found.append(arg if value else f"{arg} {following}")
        elif name.split(".")[0] in ("-O", "-cc") and name.split(".")[-1] in _COMPILE_KEYS and value in _OFF:
            found.append(arg)
    return found


def cpu_only_variables(plan: Plan) -> list[str]:
    """`NAME in [where]` for every CPU-only vLLM variable the plan sets."""
    found = [f"{name} in [engine.env]" for name in plan.engine.env if name.startswith(CPU_ONLY_PREFIX)]
    found += [
        f"{name} in candidates.{cand.name}.env"
        for cand in plan.groups
        for name in cand.env
        if name.startswith(CPU_ONLY_PREFIX)
    ]
    return found


def _eager_finding(plan: Plan) -> Finding | None:
    where = [(f"[engine].args {flag}") for flag in eager_flags(plan.engine.args)]
    where += [f"candidates.{c.name}.engine_args {flag}" for c in plan.groups for flag in eager_flags(c.engine_args)]
    where += [f"candidates.{c.name}.options.enforce_eager" for c in plan.groups if c.options.get("enforce_eager")]
    if not where:
        return None
    return (
        "warning",
        "cuda_eager_mode",
        f"eager mode on a GPU ({', '.join(where)}): no torch.compile and no CUDA graphs, so every step pays Python "
        "and kernel-launch overhead a deployed server does not, and the speedups measured will not carry over; "
        "remove it (the built-in plans set it for the CPU)",
    )


def _float32_finding(plan: Plan, sizer: Sizer) -> Finding | None:
    where: list[str] = []
    for track in plan.tracks:
        if track.baseline.block_of is not None:
            continue
        if track.target.dtype == "float32":
            where.append(f'{track.target.model} (dtype = "float32")')
        elif track.target.dtype == "auto":
            model = sizer(track.target.model, track.target.revision)
            if model is not None and (model.dtype or "").lower() in ("float32", "float"):
                where.append(f"{track.target.model} (dtype auto: the checkpoint is float32)")
    if not where:
        return None
    return (
        "warning",
        "cuda_float32",
        f"float32 weights on a GPU: {', '.join(where)}: twice bfloat16's memory and far slower kernels than any "
        'deployment uses; set [target] dtype = "bfloat16" (the built-in plans use float32 for exact parity on CPU)',
    )


def cuda_findings(plan: Plan, setup: EngineSetup, sizer: Sizer) -> list[Finding]:
    """Eager mode, float32 and CPU-only variables, when the plan's servers run on CUDA devices (none otherwise)."""
    if setup.caps is None or setup.caps.device_kind != "cuda":
        return []
    found = [f for f in (_eager_finding(plan), _float32_finding(plan, sizer)) if f is not None]
    if variables := cpu_only_variables(plan):
        found.append(
            (
                "warning",
                "cuda_cpu_only_env",
                f"CPU-only vLLM variables in a plan that runs on GPUs: {', '.join(variables)}; a GPU server "
                "ignores them (its KV cache is --gpu-memory-utilization's remainder): remove them",
            )
        )
    return found


def _least_kv_mb(estimate: MemoryEstimate) -> float:
    """The KV cache a device needs at the least: the one given, else the smallest worth starting a server for."""
    return estimate.kv_cache_mb if estimate.kv_cache_source == "kv_cache_memory_bytes" else GPU_MIN_KV_CACHE_MB


def _room_message(cand: Candidate, estimate: MemoryEstimate, device_mb: float, source: str) -> str:
    target_mb = (estimate.target_weights_mb or 0.0) / estimate.parallel_devices
    proposer_mb = estimate.proposer_weights_mb / estimate.draft_tensor_parallel_size
    kv = _least_kv_mb(estimate)
    need = target_mb + proposer_mb + estimate.runtime_overhead_mb + kv
    share = estimate.memory_utilization or 0.0
    given = f"--gpu-memory-utilization {share:g}" + (" (vLLM's default)" if source != "engine_args" else "")
    per_device = " per device" if estimate.parallel_devices > 1 else ""
    sums = (
        f"target {target_mb:.0f} MB{per_device} + proposer {proposer_mb:.0f} MB + runtime "
        f"{estimate.runtime_overhead_mb:.0f} MB + KV cache {kv:.0f} MB at the least = {need:.0f} MB"
    )
    wanted = need / device_mb if device_mb > 0 else float("inf")
    fix = (
        f"raise --gpu-memory-utilization to {math.ceil(wanted * 100) / 100:.2f} or more"
        if wanted <= 1.0
        else "the device cannot hold both: use a larger device, tensor parallelism or a smaller proposer"
    )
    return (
        f"{cand.name}: {given} leaves {estimate.budget_mb:.0f} MB of the device's {device_mb:.0f} MB, but {sums}: "
        f"no room for the drafter, so admission will refuse it (memory_over_budget); {fix}"
    )


def drafter_room_findings(plan: Plan, setup: EngineSetup, sizer: Sizer, terms: TermsFor) -> list[Finding]:
    """A warning for each candidate whose proposer does not fit beside its target on a CUDA device when the
    target alone does (the memory estimate of admission, with the proposer's size as the plan names it)."""
    if setup.caps is None or setup.caps.device_kind != "cuda":
        return []
    found: list[Finding] = []
    seen: set[tuple[str, ...]] = set()
    for cand in plan.groups:
        shared = shared_admission_key(cand)
        if cand.proposer is None or cand.runs_target_only or not cand.enabled or shared in seen:
            continue
        if shared is not None:
            seen.add(shared)  # a sweep's sub-candidates share one admission: one warning for them all
        track = plan.track_of(cand.name)
        target = sizer(track.target.model, track.target.revision)
        revision = cand.options.get("revision")
        proposer = sizer(cand.proposer, revision if isinstance(revision, str) else None)
        if target is None or proposer is None:
            continue  # admission names what cannot be found
        ctx = GroupContext(candidate=cand, engine=plan.engine, target_config=track.target, target=target, setup=setup)
        with_drafter = terms(ctx, proposer)
        estimate = estimate_memory(target, proposer, with_drafter.memory)
        alone = estimate_memory(target, None, terms(ctx, None).memory)
        if estimate.fits is False and alone.fits:
            message = _room_message(cand, estimate, with_drafter.memory.budget_mb, with_drafter.utilization_source)
            found.append(("warning", "gpu_memory_no_room_for_drafter", message))
    return found


def plan_sizer(home: Path | None = None) -> Sizer:
    """Describes models as admission would, once each, without preparing a builtin or downloading anything; None
    when the reference cannot be read (admission then names what is missing)."""
    known: dict[tuple[str, str | None], ResolvedModel | None] = {}

    def sized(ref: str, revision: str | None) -> ResolvedModel | None:
        if (ref, revision) not in known:
            try:
                known[ref, revision] = resolve_model(ref, revision=revision, home=home, prepare=False)
            except SpecselectError:
                known[ref, revision] = None
        return known[ref, revision]

    return sized
