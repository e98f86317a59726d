"""What a launch can hold and what it held: the KV cache the engine reserved (`KvCapacity`, per launch), its use
under load (`KvLoad`, per scenario), and what the devices it ran on did besides (`DeviceLoad`, per scenario).

vLLM reserves its KV cache up front, so peak memory barely moves between a baseline and a candidate whose
proposer takes part of that cache: the capacity is read from the engine's own report instead.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DeviceLoad", "ForeignProcess", "KvCapacity", "KvLoad", "LaunchCapacity", "concurrency_for"]

_Count = Annotated[int, Field(ge=0)]


def concurrency_for(
    tokens: int, request_tokens: int, *, blocks: int | None = None, block_size: int | None = None
) -> float:
    """Requests of `request_tokens` each that `tokens` of KV cache hold at once: with blocks, whole blocks per
    request (as the engine allocates them), else tokens / request length."""
    if request_tokens <= 0:
        raise ValueError(f"request_tokens must be positive, got {request_tokens}")
    if blocks is not None and block_size:
        return blocks / math.ceil(request_tokens / block_size)
    return tokens / request_tokens


class KvCapacity(BaseModel):
    """The KV cache a server reserved at start-up, as its engine reported it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: _Count
    """KV-cache size in tokens (the target's and, for a draft model, the proposer's layers share it)."""
    blocks: _Count | None = None
    block_size: Annotated[int, Field(gt=0)] | None = None
    """Tokens per block (None when the engine does not say)."""
    max_model_len: Annotated[int, Field(gt=0)] | None = None
    """The request length the engine states its own maximum concurrency for."""
    engine_max_concurrency: Annotated[float, Field(ge=0)] | None = None
    """Requests of `max_model_len` tokens the engine says it holds at once."""
    source: str = Field(min_length=1)
    """Where the figures were read (e.g. `start-up log + cache_config_info`)."""

    def concurrency_at(self, request_tokens: int) -> float:
        """Requests of `request_tokens` this cache holds at once (see `concurrency_for`)."""
        return concurrency_for(self.tokens, request_tokens, blocks=self.blocks, block_size=self.block_size)


class LaunchCapacity(BaseModel):
    """One launch's KV capacity and its maximum concurrency at the plan's longest request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kv: KvCapacity | None = None
    """None when the engine reported none (`problem` says why)."""
    longest_request_tokens: Annotated[int, Field(gt=0)] | None = None
    """The longest request the launch served: its prompt plus the plan's max_tokens."""
    max_concurrency: Annotated[float, Field(ge=0)] | None = None
    """Requests of `longest_request_tokens` the cache holds at once."""
    problem: str | None = None


class KvLoad(BaseModel):
    """The KV cache under one scenario's load (warm-up included), from the engine's metrics."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    peak_usage: Annotated[float, Field(ge=0)] | None = None
    """The highest share of the KV cache in use seen (1.0 = full); None when the engine exports no gauge."""
    preemptions: _Count | None = None
    """Requests the engine preempted (evicted for lack of KV cache) during the scenario; None when not exported."""
    samples: _Count = 0
    """Scrapes the peak was taken over."""


class ForeignProcess(BaseModel):
    """A process on one of a launch's devices that is neither the server nor specselect."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    device: str
    name: str | None = None
    used_mb: float | None = None


class DeviceLoad(BaseModel):
    """What a launch's devices ran besides its server during a scenario (NVML), read before it and during it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    devices: tuple[str, ...]
    samples: _Count = 0
    foreign: tuple[ForeignProcess, ...] = ()
    """Every other process seen on the devices (one entry per pid and device)."""
    max_utilization_pct: Annotated[float, Field(ge=0, le=100)] | None = None
    """The devices' highest utilisation seen (the server's own work included)."""
    problem: str | None = None
    """Why the devices could not be read (then nothing is known about other processes)."""

    @property
    def busy(self) -> bool:
        """True when another process shared a device with the server."""
        return bool(self.foreign)

    def describe(self) -> str:
        """`pid 4242 (python) on GPU-ab.. (1200 MB)`, for each foreign process."""
        parts = []
        for p in self.foreign:
            name = f" ({p.name})" if p.name else ""
            used = f", {p.used_mb:.0f} MB" if p.used_mb is not None else ""
            parts.append(f"pid {p.pid}{name} on {p.device}{used}")
        return "; ".join(parts)
