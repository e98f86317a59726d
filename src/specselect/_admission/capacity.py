"""Admission gate 5 (capacity): enough devices and memory for one server.

The estimate itself is `specselect._assets.memory_estimate.estimate_memory`. Its inputs that depend on the engine --
where the server runs, the engine's share of device memory (vLLM's `--gpu-memory-utilization`, SGLang's
`--mem-fraction-static` or SGLang's own default), the runtime overhead inside that share, the devices the
draft is split over -- come from the engine as `CapacityTerms`; this module turns them into a `GateCheck`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from specselect._assets.memory_estimate import MemoryTerms, estimate_memory
from specselect._core.gates import FactValue, GateCheck
from specselect.records.assets import ResolvedModel

__all__ = ["CapacityTerms", "capacity_check"]


class CapacityTerms(BaseModel):
    """The engine's answer to "where and how would this server run" for the memory gate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory: MemoryTerms
    devices_available: int
    """Visible devices (CUDA: GPUs; CPU: the host, 1)."""
    utilization_source: str = ""
    """Where the engine's memory share comes from (`engine_args`, `vllm_default`, `sglang_default`); CUDA only."""


def capacity_check(target: ResolvedModel, proposer: ResolvedModel | None, terms: CapacityTerms) -> GateCheck:
    """Gate 5 alone: also usable for the target-only baseline, which has no family to admit.

    Fails `too_few_devices` on CUDA when tensor x pipeline x data parallel size exceeds the visible GPUs,
    else `memory_over_budget` when one device (CPU: the host) cannot hold the estimate.
    """
    estimate = estimate_memory(target, proposer, terms.memory)
    facts: dict[str, FactValue] = {
        key: value for key, value in estimate.model_dump().items() if key != "fits" and not isinstance(value, dict)
    }
    facts["estimate_known"] = estimate.fits is not None
    if terms.memory.on_gpu:
        facts["memory_utilization_source"] = terms.utilization_source
        facts["devices_available"] = terms.devices_available
        if estimate.devices_needed > terms.devices_available:
            return GateCheck.fail("too_few_devices", **facts)
    if estimate.fits is False:
        return GateCheck.fail("memory_over_budget", **facts)
    return GateCheck.ok(**facts)
