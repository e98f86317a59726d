"""What `specselect doctor` found on this host: one line per check (ok / warn / fail, the reason and the fix) and
the facts behind them (the driver, the devices with their free memory and processes, the hub, the host's load).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.records.document import ResultsDocument

__all__ = [
    "CHECK_NAMES",
    "CheckStatus",
    "DeviceUsage",
    "DoctorCheck",
    "DoctorReport",
    "GpuDevice",
    "GpuProcess",
    "HostSample",
    "HubAnswer",
    "ProcessCpu",
    "worst",
]

CheckStatus = Literal["ok", "warn", "fail"]
CHECK_NAMES = ("devices", "engine", "audit", "hub", "disk", "host_load")
"""The checks in the order they are shown (`audit` only with a plan)."""
_RANK: dict[CheckStatus, int] = {"ok": 0, "warn": 1, "fail": 2}


def worst(statuses: tuple[CheckStatus, ...] | list[CheckStatus]) -> CheckStatus:
    """The most severe of `statuses` (ok when there are none)."""
    return max(statuses, key=_RANK.__getitem__, default="ok")


class DoctorCheck(BaseModel):
    """One check: its status, a one-line reason, the fix when it is not ok, and the facts shown under it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    status: CheckStatus
    reason: str
    fix: str | None = None
    details: tuple[str, ...] = ()


class GpuProcess(BaseModel):
    """A process NVML lists on a device (compute or graphics)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    name: str | None = None
    used_mb: float | None = None
    """Its device memory; None when the driver does not say (as inside some containers)."""


class GpuDevice(BaseModel):
    """A GPU or MIG instance with its memory now and the processes on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    uuid: str | None = None
    index: int | None = None
    parent_uuid: str | None = None
    total_mb: float
    free_mb: float | None = None
    """None when only nvidia-smi answered (it gives no free memory per MIG instance)."""
    processes: tuple[GpuProcess, ...] = ()


class DeviceUsage(BaseModel):
    """The host's NVIDIA devices as doctor reads them, and why none were found when none were."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    driver: str | None = None
    devices: tuple[GpuDevice, ...] = ()
    source: Literal["nvml", "nvidia-smi", "none"] = "none"
    problem: str | None = None


class HubAnswer(BaseModel):
    """What the model hub said about one repository a plan needs (never the token)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str
    revision: str
    outcome: Literal["ok", "gated", "not_found", "unreachable", "error"]
    http_status: int | None = None
    size_bytes: int | None = None
    """What a fetch downloads (weights, config and tokenizer files), when the hub listed the sizes."""
    detail: str = ""


class ProcessCpu(BaseModel):
    """A process and its share of the CPU over the sample (1.0 = one whole core)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    name: str
    cores: float


class HostSample(BaseModel):
    """The host's CPU over a short sample: the share other processes took of the scope, and the busiest ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seconds: float
    scope_cpus: float
    foreign_share: float
    busiest: tuple[ProcessCpu, ...] = ()


class DoctorReport(ResultsDocument):
    """`specselect doctor [PLAN] --json`: every check, the verdict, and the facts read."""

    plan: str | None
    """The plan checked (`builtin:NAME` or its path); None: the host and the managed engine environment only."""
    status: CheckStatus
    verdict: str
    checks: tuple[DoctorCheck, ...]
    devices: DeviceUsage
    hub: tuple[HubAnswer, ...] = ()
    host: HostSample | None = None
