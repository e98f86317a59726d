"""Static peak-memory estimate of one engine server (admission gate 5).

estimate = target weights + proposer weights + KV cache + runtime overhead, then compared with the
device budget of `EngineCapabilities`:

- CPU: every rank lives in the same host RAM, so the whole estimate is compared with the host budget.
  The KV cache is what vLLM's CPU backend allocates: `VLLM_CPU_KVCACHE_SPACE` GiB per rank (or
  `--kv-cache-memory-bytes`). When neither is set, vLLM 0.32 would reserve `gpu_memory_utilization`
  (0.92) of all RAM; specselect's launcher sets `VLLM_CPU_KVCACHE_SPACE=DEFAULT_CPU_KVCACHE_GIB` then,
  and the estimate assumes the same.
  With data parallelism each replica is a full copy in the same host memory, so the whole estimate is
  multiplied by `data_parallel_size`.
- CUDA: target weights are split across tensor x pipeline parallel devices; vLLM gives the KV cache what
  is left of `gpu_memory_utilization` x device memory (SGLang: `--mem-fraction-static`, see
  `sglang_default_mem_fraction`), so the check is that at least `GPU_MIN_KV_CACHE_MB` remains for it on
  each device. Data parallel replicas run on their own devices: per-device memory is unchanged and the
  server needs tensor x pipeline x data parallel devices (the gatherer checks there are that many).

The proposer is split over `draft_tensor_parallel_size` devices, not over the target's ranks: vLLM 0.32
builds the draft's parallel config with that tensor size and pipeline size 1, and loads the drafter on
the last pipeline stage only (`gpu_model_runner`: `get_pp_group().is_last_rank`). Unset, vLLM uses the
target's tensor parallel size (1 for `mlp_speculator` checkpoints); SGLang always drafts at the target's.

The overheads are measured: a 135M-parameter bf16 model with a 2 GiB KV cache peaks at 4.7-5.0 GB RSS
on CPU (front-end + engine-core processes, torch, compiled kernels).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from specselect.records.assets import ResolvedModel

__all__ = [
    "CPU_RUNTIME_OVERHEAD_MB",
    "DEFAULT_CPU_KVCACHE_GIB",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DTYPE_BYTES",
    "GPU_MIN_KV_CACHE_MB",
    "GPU_RUNTIME_OVERHEAD_MB",
    "MemoryEstimate",
    "MemoryTerms",
    "estimate_memory",
    "serving_dtype",
    "sglang_default_mem_fraction",
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
    """Devices (CPU: ranks) one replica spans: tensor x pipeline parallel size."""
    draft_tensor_parallel_size: int
    """Devices the proposer's weights are split over."""
    data_parallel_size: int = 1
    devices_needed: int = 1
    """Devices the whole server needs: parallel_devices x data_parallel_size."""
    memory_utilization: float | None = None
    """CUDA: the share of device memory the engine may use (None on CPU)."""
    estimated_memory_mb: float | None
    """CPU: the whole server (every rank of every replica); CUDA: one device."""
    budget_mb: float
    """CPU: host budget; CUDA: memory_utilization x the smallest device's memory."""
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


def sglang_default_mem_fraction(
    gpu_memory_mb: float,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    speculative_algorithm: str | None = None,
) -> float:
    """SGLang's `--mem-fraction-static` when the flag is not given (weights + KV pool / device memory).

    Source: SGLang's `python/sglang/srt/server_args.py`, `ServerArgs._handle_gpu_memory_settings` (the same
    heuristic in the 0.5.x releases). It reserves, in MB of the smallest GPU's memory G:
    512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024,
    at least 10240 when G > 60 GiB, plus 6144 for a STANDALONE draft or 2048 for any other algorithm
    but NGRAM; the fraction is round((G - reserved) / G, 3). chunked_prefill_size / cuda_graph_max_bs
    are SGLang's tiers by G (below). Not modelled: DP attention, piecewise CUDA graphs, NPU tiers and
    the multimodal adjustment, which all reserve more (this is then an upper bound of the fraction).
    """
    gib = 1024.0
    small_tp = tensor_parallel_size < 4
    if gpu_memory_mb < 20 * gib:
        chunk, graph_bs = 2048, 8
    elif gpu_memory_mb < 35 * gib:
        chunk, graph_bs = 2048, 24 if small_tp else 80
    elif gpu_memory_mb < 60 * gib:
        chunk, graph_bs = 4096, 32 if small_tp else 160
    elif gpu_memory_mb < 160 * gib:
        chunk, graph_bs = 8192, 256 if small_tp else 512
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tensor_parallel_size * pipeline_parallel_size / 8 * gib
    if gpu_memory_mb > 60 * gib:
        reserved = max(reserved, 10 * gib)
    algorithm = (speculative_algorithm or "").upper()
    if algorithm == "STANDALONE":
        reserved += 6 * gib
    elif algorithm not in ("", "NGRAM"):
        reserved += 2 * gib
    if gpu_memory_mb <= 0:
        return 0.0
    return max(round((gpu_memory_mb - reserved) / gpu_memory_mb, 3), 0.0)


class MemoryTerms(BaseModel):
    """Where and how one server runs, as far as its memory goes (every input of the estimate but the models)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device_kind: Literal["cpu", "cuda"]
    budget_mb: float
    """CPU: the host budget; CUDA: the smallest device's memory."""
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    draft_tensor_parallel_size: int | None = None
    """Devices the proposer is split over; None = the target's tensor parallel size (vLLM's default)."""
    cpu_kvcache_gib: float | None = None
    kv_cache_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    gpu_runtime_overhead_mb: float = GPU_RUNTIME_OVERHEAD_MB
    """What a device needs beyond weights and KV cache inside the budget (0 for SGLang, whose memory
    fraction already leaves activations and CUDA graphs outside it)."""

    @property
    def on_gpu(self) -> bool:
        """True when the server runs on CUDA devices (weights split over ranks, a KV cache per device)."""
        return self.device_kind != "cpu"


def estimate_memory(target: ResolvedModel, proposer: ResolvedModel | None, terms: MemoryTerms) -> MemoryEstimate:
    """Estimate the peak memory of a server for `target` (+ `proposer`) and compare it with the budget."""
    dtype_name, dtype_bytes = serving_dtype(terms.dtype, target)
    target_mb = weights_mb(target, dtype_bytes)
    proposer_mb = (weights_mb(proposer, dtype_bytes) or 0.0) if proposer is not None else 0.0
    tp, pp, dp = (
        max(1, n) for n in (terms.tensor_parallel_size, terms.pipeline_parallel_size, terms.data_parallel_size)
    )
    draft_tp = max(1, terms.draft_tensor_parallel_size or tp)
    shared: dict[str, Any] = {
        "dtype": dtype_name,
        "target_weights_mb": _round(target_mb),
        "proposer_weights_mb": round(proposer_mb, 1),
        "parallel_devices": tp * pp,
        "draft_tensor_parallel_size": draft_tp,
        "data_parallel_size": dp,
        "devices_needed": tp * pp * dp,
    }
    if terms.on_gpu:
        return _gpu_estimate(terms, target_mb, proposer_mb, shared)
    return _cpu_estimate(terms, target_mb, proposer_mb, shared)


def _cpu_estimate(
    terms: MemoryTerms, target_mb: float | None, proposer_mb: float, shared: dict[str, Any]
) -> MemoryEstimate:
    if terms.kv_cache_memory_bytes is not None:
        kv_mb, source = terms.kv_cache_memory_bytes / _MB, "kv_cache_memory_bytes"
    elif terms.cpu_kvcache_gib is not None:
        kv_mb, source = terms.cpu_kvcache_gib * 1024, "VLLM_CPU_KVCACHE_SPACE"
    else:
        kv_mb, source = DEFAULT_CPU_KVCACHE_GIB * 1024, "default"
    ranks, dp = shared["parallel_devices"], shared["data_parallel_size"]
    # Every process of every replica shares the host: sum them all.
    overhead = float(CPU_RUNTIME_OVERHEAD_MB * ranks * dp)
    kv_total = kv_mb * ranks * dp
    # The last pipeline stage's tensor ranks each hold 1/draft_tp of the proposer.
    tp = max(1, terms.tensor_parallel_size)
    proposer_total = proposer_mb * tp / shared["draft_tensor_parallel_size"]
    total = None if target_mb is None else (target_mb + proposer_total) * dp + kv_total + overhead
    return MemoryEstimate(
        device_kind="cpu",
        **shared,
        kv_cache_mb=round(kv_total, 1),
        kv_cache_source=source,
        runtime_overhead_mb=overhead,
        estimated_memory_mb=_round(total),
        budget_mb=float(terms.budget_mb),
        fits=None if total is None else total <= terms.budget_mb,
    )


def _gpu_estimate(
    terms: MemoryTerms, target_mb: float | None, proposer_mb: float, shared: dict[str, Any]
) -> MemoryEstimate:
    share = terms.gpu_memory_utilization
    utilization = DEFAULT_GPU_MEMORY_UTILIZATION if share is None else share
    usable = utilization * terms.budget_mb
    overhead = float(terms.gpu_runtime_overhead_mb)
    per_device: float | None = None
    kv_left = 0.0
    if target_mb is not None:
        per_device = target_mb / shared["parallel_devices"] + proposer_mb / shared["draft_tensor_parallel_size"]
        per_device += overhead
        kv_left = max(usable - per_device, 0.0)
    if terms.kv_cache_memory_bytes is not None and per_device is not None:
        kv_left, source = terms.kv_cache_memory_bytes / _MB, "kv_cache_memory_bytes"
        per_device += kv_left
        fits: bool | None = per_device <= usable
    else:
        source = "gpu_memory_utilization_remainder"
        fits = None if per_device is None else usable - per_device >= GPU_MIN_KV_CACHE_MB
        if per_device is not None:
            per_device += kv_left
    return MemoryEstimate(
        device_kind="cuda",
        **shared,
        kv_cache_mb=round(kv_left, 1),
        kv_cache_source=source,
        runtime_overhead_mb=overhead,
        memory_utilization=utilization,
        estimated_memory_mb=_round(per_device),
        budget_mb=round(usable, 1),
        fits=fits,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
