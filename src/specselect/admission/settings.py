"""The plan's engine settings that change what a server needs: dtype, parallel sizes, memory flags."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from specselect.errors import ConfigError

__all__ = ["EngineSettings"]

_UTILIZATION_FLAGS: Mapping[str, str] = MappingProxyType(
    {"vllm": "--gpu-memory-utilization", "sglang": "--mem-fraction-static"}
)
"""The engine flag that sets the share of GPU memory the engine may use."""


class EngineSettings(BaseModel):
    """The plan's engine settings that change what a server needs (dtype, parallelism, KV cache)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = "vllm"
    dtype: str = "auto"
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    """vLLM's `--gpu-memory-utilization` or SGLang's `--mem-fraction-static`; None = the engine's default."""
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
        data_parallel_size: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> EngineSettings:
        """Settings from plan fields plus the memory flags in extra args.

        vLLM: `--gpu-memory-utilization`, `--kv-cache-memory-bytes`; SGLang: `--mem-fraction-static`.
        A flag with an unreadable value raises ConfigError.
        """
        util_flag = _UTILIZATION_FLAGS.get(kind, _UTILIZATION_FLAGS["vllm"])
        flags = (util_flag, "--kv-cache-memory-bytes") if kind != "sglang" else (util_flag,)
        values: dict[str, str] = {}
        items = list(args)
        for i, arg in enumerate(items):
            for flag in flags:
                if arg == flag and i + 1 < len(items):
                    values[flag] = items[i + 1]
                elif arg.startswith(flag + "="):
                    values[flag] = arg.split("=", 1)[1]
        util = _number(values.get(util_flag), util_flag, low=0.0, high=1.0)
        kv_bytes = _number(values.get("--kv-cache-memory-bytes"), "--kv-cache-memory-bytes", low=0.0)
        return cls(
            kind=kind,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            data_parallel_size=data_parallel_size,
            gpu_memory_utilization=util,
            kv_cache_memory_bytes=None if kv_bytes is None else int(kv_bytes),
            env=dict(env or {}),
        )

    def cpu_kvcache_gib(self) -> float | None:
        """VLLM_CPU_KVCACHE_SPACE as the server will see it (plan env first, then specselect's own)."""
        raw = self.env.get("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", ""))
        try:
            return float(raw) if raw.strip() else None
        except ValueError:
            return None


_SIZE_SUFFIX: Mapping[str, int] = MappingProxyType(
    {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
)
"""vLLM's human-readable integers (`--kv-cache-memory-bytes 4G`): lower case decimal, upper case binary."""


def _number(raw: str | None, flag: str, *, low: float, high: float | None = None) -> float | None:
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    scale = 1
    if high is None and text[-1:] in _SIZE_SUFFIX:
        text, scale = text[:-1], _SIZE_SUFFIX[text[-1]]
    try:
        value = float(text) * scale
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > low and (high is None or value <= high)):
        bound = f"in ({low:g}, {high:g}]" if high is not None else f"> {low:g}"
        raise ConfigError(
            f"{flag} {raw!r} is not a number {bound}",
            location=f"engine args {flag}",
            fix=f"give {flag} a number {bound}",
        )
    return value
