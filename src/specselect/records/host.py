"""The host: the machine a run happens on (`HostInfo`, in `preflight.json`, collected by `measure.hostfacts`) and
the CPU time a scenario's host spent elsewhere (what `measure.hostload` measures; evidence reads it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["HOST_LOAD_RULE", "HostInfo", "HostLoad"]

HOST_LOAD_RULE = (
    "foreign_share = (busy CPU seconds of the scope - CPU seconds of the server's process tree and of specselect "
    "itself) / (wall seconds x the scope's CPUs), over the whole scenario (warm-up included); scope = "
    "specselect's cgroup when it has a CPU limit of its own (its usage, its limit in cores), else the host (all "
    "CPU time but idle and iowait, logical CPUs)"
)


class HostLoad(BaseModel):
    """CPU time over one scenario: the host's, specselect's and the server's own, and the foreign rest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_s: float
    logical_cpus: int
    """The host's logical CPUs."""
    host_busy_cpu_s: float
    """Busy CPU seconds of the scope (the host's, or the cgroup's: see `scope`)."""
    own_cpu_s: float
    """The server's process tree plus specselect's own process."""
    foreign_cpu_s: float
    foreign_share: float
    """foreign_cpu_s / (wall_s x scope_cpus): 0 on a quiet host, 0.5 = half of every core went elsewhere."""
    scope: Literal["host", "cgroup"] = "host"
    scope_cpus: float | None = None
    """The scope's capacity in cores (None in results written before the scope was recorded: logical_cpus)."""
    scope_detail: str | None = None
    """Why this scope: the cgroup limit found, or that there was none."""
    rule: str = HOST_LOAD_RULE


class HostInfo(BaseModel):
    """The host: OS, Python, CPU, memory and (when present) the NVIDIA driver."""

    model_config = ConfigDict(frozen=True)

    tool_version: str
    python_version: str
    python_executable: str
    os: str
    kernel: str
    machine: str
    cpu_model: str | None
    logical_cpus: int | None
    physical_cpus: int | None
    memory_total_mb: float
    nvidia_driver: str | None
    hostname: str | None = None
    """The host's network name (None in results written before it was recorded)."""
