"""The plan's engine settings that change what a server needs: dtype, parallel sizes, memory flags.

Each launching engine reads its own memory flags from the engine arguments (vLLM:
`--gpu-memory-utilization`, `--kv-cache-memory-bytes`; SGLang: `--mem-fraction-static`) and turns the settings
into the memory gate's `CapacityTerms`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from specselect._engines.base import GroupContext
from specselect.errors import ConfigError

__all__ = ["EngineSettings", "group_settings", "memory_flags"]


class EngineSettings(BaseModel):
    """The plan's engine settings that change what a server needs (dtype, parallelism, KV cache)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: str = "auto"
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    """The engine's share of each GPU's memory (its own flag); None = the engine's default."""
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    """Variables the server gets on top of specselect's own environment (plan engine env + group env)."""

    def env_value(self, name: str) -> str | None:
        """A variable as the server will see it (plan env first, then specselect's own); None when unset."""
        raw = self.env.get(name, os.environ.get(name, ""))
        return raw if raw.strip() else None


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


def memory_flags(
    args: Sequence[str], utilization_flag: str, kv_bytes_flag: str | None = None
) -> tuple[float | None, int | None]:
    """The engine's share of GPU memory and KV cache bytes given in `args` (None where not given).

    `utilization_flag` is the engine's flag for its share (in (0, 1]); `kv_bytes_flag` its KV cache size flag
    in bytes, when it has one (vLLM's `4G`-style suffixes are read). A flag with an unreadable value raises
    ConfigError.
    """
    flags = (utilization_flag, kv_bytes_flag) if kv_bytes_flag else (utilization_flag,)
    values: dict[str, str] = {}
    items = list(args)
    for i, arg in enumerate(items):
        for flag in flags:
            if arg == flag and i + 1 < len(items):
                values[flag] = items[i + 1]
            elif arg.startswith(flag + "="):
                values[flag] = arg.split("=", 1)[1]
    share = _number(values.get(utilization_flag), utilization_flag, low=0.0, high=1.0)
    kv_bytes = _number(values.get(kv_bytes_flag), kv_bytes_flag, low=0.0) if kv_bytes_flag else None
    return share, None if kv_bytes is None else int(kv_bytes)


def group_settings(ctx: GroupContext, *, utilization_flag: str, kv_bytes_flag: str | None = None) -> EngineSettings:
    """The settings of one group: the plan's engine section, the group's own args and env, its track's dtype."""
    eng, cand = ctx.engine, ctx.candidate
    share, kv_bytes = memory_flags((*eng.args, *cand.engine_args), utilization_flag, kv_bytes_flag)
    return EngineSettings(
        dtype=ctx.target_config.dtype,
        tensor_parallel_size=eng.tensor_parallel_size,
        pipeline_parallel_size=eng.pipeline_parallel_size,
        data_parallel_size=eng.data_parallel_size,
        gpu_memory_utilization=share,
        kv_cache_memory_bytes=kv_bytes,
        env={**eng.env, **cand.env},
    )
