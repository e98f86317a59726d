"""A server's peak memory over a scenario (what `measure.memory` samples; the memory budget compares it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DevicePeak", "PeakMemory"]


class DevicePeak(BaseModel):
    """One device's highest sampled used memory, in MiB."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str
    """The NVML id it was opened by: a `GPU-`/`MIG-` UUID or an index."""
    peak_mb: float


class PeakMemory(BaseModel):
    """The highest sampled memory use, in MiB, and where the number came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mb: float | None
    """The figure the memory budget is compared with: the largest device's peak (nvml), else the RSS peak."""
    source: Literal["nvml", "process_tree_rss"]
    n_samples: int
    interval_s: float
    devices: tuple[DevicePeak, ...] = ()
    """Per-device peaks (nvml)."""
    host_rss_mb: float | None = None
    """The process tree's RSS peak, sampled next to the devices (nvml); with `process_tree_rss` it is `mb`."""
