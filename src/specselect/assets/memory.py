"""Static peak-memory estimate of one engine server (admission gate 5).

estimate = target weights + proposer weights + KV cache + runtime overhead, then compared with the
device budget of `EngineCapabilities`:

- CPU: every rank lives in the same host RAM, so the whole estimate is compared with the host budget.
  The KV cache is what vLLM's CPU backend allocates: `VLLM_CPU_KVCACHE_SPACE` GiB per rank (or
  `--kv-cache-memory-bytes`). When neither is set, vLLM 0.32 would reserve `gpu_memory_utilization`
  (0.92) of all RAM; specselect's launcher sets `VLLM_CPU_KVCACHE_SPACE=DEFAULT_CPU_KVCACHE_GIB` then,
  and the estimate assumes the same.
- CUDA: weights are split across tensor x pipeline parallel devices; vLLM gives the KV cache what is
  left of `gpu_memory_utilization` x device memory, so the check is that at least
  `GPU_MIN_KV_CACHE_MB` remains for it on each device.

The overheads are measured: a 135M-parameter bf16 model with a 2 GiB KV cache peaks at 4.7-5.0 GB RSS
on CPU (front-end + engine-core processes, torch, compiled kernels).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.assets.refs import ResolvedModel

__all__ = [
    "CPU_RUNTIME_OVERHEAD_MB",
    "DEFAULT_CPU_KVCACHE_GIB",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DTYPE_BYTES",
    "GPU_MIN_KV_CACHE_MB",
    "GPU_RUNTIME_OVERHEAD_MB",
    "MemoryEstimate",
    "estimate_memory",
    "serving_dtype",
    "weights_mb",
]

DEFAULT_CPU_KVCACHE_GIB = 4.0
"""KV cache of a CPU server when the plan sets none (the launcher passes it as VLLM_CPU_KVCACHE_SPACE)."""
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
"""vLLM 0.32's default share of GPU memory."""
CPU_RUNTIME_OVERHEAD_MB = 2800
"""Per-rank memory of a CPU vLLM server beyond weights and KV cache (measured ~2.5-2.7 GB)."""
GPU_RUNTIME_OVERHEAD_MB = 1536
"""Per-device CUDA context, activations and sampler buffers beyond weights and KV cache."""
GPU_MIN_KV_CACHE_MB = 512
"""Smallest KV cache worth starting a GPU server for."""

DTYPE_BYTES: Mapping[str, int] = MappingProxyType(
    {
        "float32": 4,
        "float": 4,
        "fp32": 4,
        "bfloat16": 2,
        "bf16": 2,
        "float16": 2,
        "half": 2,
        "fp16": 2,
        "float8": 1,
        "fp8": 1,
        "int8": 1,
    }
)
"""Bytes per parameter of the serving dtypes."""

_MB = 1024 * 1024


class MemoryEstimate(BaseModel):
    """The estimate and the numbers it is made of (all MB unless named otherwise)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device_kind: Literal["cpu", "cuda"]
    dtype: str
    target_weights_mb: float | None
    proposer_weights_mb: float
    kv_cache_mb: float
    kv_cache_source: str
    runtime_overhead_mb: float
    parallel_devices: int
    estimated_memory_mb: float | None
    """CPU: the whole server; CUDA: one device."""
    budget_mb: float
    """CPU: host budget; CUDA: gpu_memory_utilization x the smallest device's memory."""
    fits: bool | None
    """None when the target's size is unknown."""


def serving_dtype(requested: str, model: ResolvedModel) -> tuple[str, int]:
    """(dtype name, bytes per parameter) the engine serves `model` with; `auto` = the checkpoint's dtype."""
    name = requested.lower()
    if name == "auto":
        name = (model.dtype or "bfloat16").lower()
    return name, DTYPE_BYTES.get(name, 2)


def weights_mb(model: ResolvedModel, dtype_bytes: int) -> float | None:
    """Memory of a model's weights when served with `dtype_bytes` per parameter.

    Quantized checkpoints stay quantized in memory, so their on-disk tensor bytes are used instead.
    """
    quantized = isinstance(model.config.get("quantization_config"), dict)
    if quantized and model.weights_bytes is not None:
        return model.weights_bytes / _MB
    if model.num_params is not None:
        return model.num_params * dtype_bytes / _MB
    if model.weights_bytes is not None:
        return model.weights_bytes / _MB
    return None


def estimate_memory(
    target: ResolvedModel,
    proposer: ResolvedModel | None,
    *,
    device_kind: Literal["cpu", "cuda"],
    budget_mb: float,
    dtype: str = "auto",
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    cpu_kvcache_gib: float | None = None,
    kv_cache_memory_bytes: int | None = None,
    gpu_memory_utilization: float | None = None,
) -> MemoryEstimate:
    """Estimate the peak memory of a server for `target` (+ `proposer`) and compare it with the budget."""
    dtype_name, dtype_bytes = serving_dtype(dtype, target)
    target_mb = weights_mb(target, dtype_bytes)
    proposer_mb = (weights_mb(proposer, dtype_bytes) or 0.0) if proposer is not None else 0.0
    ranks = max(1, tensor_parallel_size * pipeline_parallel_size)
    if device_kind == "cpu":
        if kv_cache_memory_bytes is not None:
            kv_mb, source = kv_cache_memory_bytes / _MB, "kv_cache_memory_bytes"
        elif cpu_kvcache_gib is not None:
            kv_mb, source = cpu_kvcache_gib * 1024, "VLLM_CPU_KVCACHE_SPACE"
        else:
            kv_mb, source = DEFAULT_CPU_KVCACHE_GIB * 1024, "default"
        overhead = float(CPU_RUNTIME_OVERHEAD_MB * ranks)
        kv_total = kv_mb * ranks
        total = None if target_mb is None else target_mb + proposer_mb + kv_total + overhead
        return MemoryEstimate(
            device_kind="cpu",
            dtype=dtype_name,
            target_weights_mb=_round(target_mb),
            proposer_weights_mb=round(proposer_mb, 1),
            kv_cache_mb=round(kv_total, 1),
            kv_cache_source=source,
            runtime_overhead_mb=overhead,
            parallel_devices=ranks,
            estimated_memory_mb=_round(total),
            budget_mb=float(budget_mb),
            fits=None if total is None else total <= budget_mb,
        )
    utilization = gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
    usable = utilization * budget_mb
    overhead = float(GPU_RUNTIME_OVERHEAD_MB)
    if target_mb is None:
        per_device = None
        kv_left = 0.0
    else:
        per_device = (target_mb + proposer_mb) / ranks + overhead
        kv_left = max(usable - per_device, 0.0)
    if kv_cache_memory_bytes is not None and per_device is not None:
        kv_left, source = kv_cache_memory_bytes / _MB, "kv_cache_memory_bytes"
        per_device += kv_left
        fits: bool | None = per_device <= usable
    else:
        source = "gpu_memory_utilization_remainder"
        fits = None if per_device is None else usable - per_device >= GPU_MIN_KV_CACHE_MB
        if per_device is not None:
            per_device += max(kv_left, 0.0)
    return MemoryEstimate(
        device_kind="cuda",
        dtype=dtype_name,
        target_weights_mb=_round(target_mb),
        proposer_weights_mb=round(proposer_mb, 1),
        kv_cache_mb=round(kv_left, 1),
        kv_cache_source=source,
        runtime_overhead_mb=overhead,
        parallel_devices=ranks,
        estimated_memory_mb=_round(per_device),
        budget_mb=round(usable, 1),
        fits=fits,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
