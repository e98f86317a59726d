"""Admission gate 5 (capacity): enough devices and memory for one server of the plan's engine.

The estimate itself is `specselect.assets.memory.estimate_memory`; this module picks its inputs from the
probe and the settings (the engine's memory share: vLLM's `--gpu-memory-utilization`, SGLang's
`--mem-fraction-static` or SGLang's own default) and turns it into a `GateCheck`.
"""

from __future__ import annotations

from specselect.admission.settings import EngineSettings
from specselect.assets.memory import GPU_RUNTIME_OVERHEAD_MB, estimate_memory, sglang_default_mem_fraction
from specselect.assets.refs import ResolvedModel
from specselect.core.admission import FactValue, GateCheck
from specselect.engines.sglang.probe import SglangCapabilities
from specselect.engines.vllm.probe import EngineCapabilities

__all__ = ["Capabilities", "capacity_check"]

Capabilities = EngineCapabilities | SglangCapabilities
"""A probed engine (vLLM or SGLang): the fields admission reads have the same names in both."""


def _utilization(
    caps: Capabilities, settings: EngineSettings, speculative_algorithm: str | None
) -> tuple[float | None, str]:
    """The memory share the engine may use on each GPU and where it comes from."""
    if settings.gpu_memory_utilization is not None:
        return settings.gpu_memory_utilization, "engine_args"
    if settings.kind == "sglang":
        fraction = sglang_default_mem_fraction(
            caps.memory_budget_mb,
            tensor_parallel_size=settings.tensor_parallel_size,
            pipeline_parallel_size=settings.pipeline_parallel_size,
            speculative_algorithm=speculative_algorithm,
        )
        return fraction, "sglang_default"
    return None, "vllm_default"


def capacity_check(
    target: ResolvedModel,
    proposer: ResolvedModel | None,
    caps: Capabilities,
    settings: EngineSettings,
    *,
    speculative_algorithm: str | None = None,
    draft_tensor_parallel_size: int | None = None,
) -> GateCheck:
    """Gate 5 alone: also usable for the target-only baseline, which has no family to admit.

    Fails `too_few_devices` on CUDA when tensor x pipeline x data parallel size exceeds the probed GPUs,
    else `memory_over_budget` when one device (CPU: the host) cannot hold the estimate.
    `speculative_algorithm` (SGLang's, None for the baseline) only changes SGLang's default memory
    fraction; `draft_tensor_parallel_size` None means the target's tensor parallel size.
    """
    cuda = caps.device_kind == "cuda"
    utilization, utilization_source = _utilization(caps, settings, speculative_algorithm) if cuda else (None, "")
    estimate = estimate_memory(
        target,
        proposer,
        device_kind=caps.device_kind,
        budget_mb=caps.memory_budget_mb,
        dtype=settings.dtype,
        tensor_parallel_size=settings.tensor_parallel_size,
        pipeline_parallel_size=settings.pipeline_parallel_size,
        data_parallel_size=settings.data_parallel_size,
        draft_tensor_parallel_size=draft_tensor_parallel_size,
        cpu_kvcache_gib=settings.cpu_kvcache_gib(),
        kv_cache_memory_bytes=settings.kv_cache_memory_bytes,
        gpu_memory_utilization=utilization,
        # SGLang's fraction already leaves activations and CUDA graphs outside the budget.
        gpu_runtime_overhead_mb=0.0 if settings.kind == "sglang" else GPU_RUNTIME_OVERHEAD_MB,
    )
    facts: dict[str, FactValue] = {
        key: value for key, value in estimate.model_dump().items() if key != "fits" and not isinstance(value, dict)
    }
    facts["estimate_known"] = estimate.fits is not None
    if cuda:
        facts["memory_utilization_source"] = utilization_source
        facts["devices_available"] = len(caps.devices)
        if estimate.devices_needed > len(caps.devices):
            return GateCheck.fail("too_few_devices", **facts)
    if estimate.fits is False:
        return GateCheck.fail("memory_over_budget", **facts)
    return GateCheck.ok(**facts)
