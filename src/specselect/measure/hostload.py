"""How much of the host's CPU went to other processes while a scenario was measured.

Groups run one after another, so anything else busy on the machine during one group and not the other skews
their ratio: on a 2-core CPU host a second engine turned a 1.0x candidate into "1.15x". The meter takes the
host's busy CPU time over the scenario (all cores) and subtracts what the server's process tree and this
process (the load client) used; the rest is foreign work, reported as a share of all cores' wall time.
"""

from __future__ import annotations

import os
import time
from types import TracebackType

import psutil
from pydantic import BaseModel, ConfigDict

__all__ = ["HOST_LOAD_RULE", "HostLoad", "HostLoadMeter"]

HOST_LOAD_RULE = (
    "foreign_share = (host busy CPU seconds - CPU seconds of the server's process tree and of specselect itself) "
    "/ (wall seconds x logical CPUs), over the whole scenario (warm-up included); busy = all CPU time but idle "
    "and iowait"
)


class HostLoad(BaseModel):
    """CPU time over one scenario: the host's, specselect's and the server's own, and the foreign rest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_s: float
    logical_cpus: int
    host_busy_cpu_s: float
    own_cpu_s: float
    """The server's process tree plus specselect's own process."""
    foreign_cpu_s: float
    foreign_share: float
    """foreign_cpu_s / (wall_s x logical_cpus): 0 on a quiet host, 0.5 = half of every core went elsewhere."""
    rule: str = HOST_LOAD_RULE


def _host_busy_s() -> float:
    t = psutil.cpu_times()
    return float(sum(t)) - float(t.idle) - float(getattr(t, "iowait", 0.0))


def _tree_cpu_s(pid: int) -> dict[int, float]:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    out: dict[int, float] = {}
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = float(t.user + t.system)
    return out


def _self_cpu_s() -> float:
    t = os.times()
    return float(t.user + t.system)


class HostLoadMeter:
    """`with HostLoadMeter(server_pid) as meter: ...` then `meter.result` (None if it could not be measured)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self.result: HostLoad | None = None

    def __enter__(self) -> HostLoadMeter:
        self._t0 = time.monotonic()
        self._busy0 = _host_busy_s()
        self._self0 = _self_cpu_s()
        self._tree0 = _tree_cpu_s(self._pid)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        wall = time.monotonic() - self._t0
        cpus = psutil.cpu_count(logical=True) or 1
        if wall <= 0 or exc_type is not None:
            return
        busy = max(0.0, _host_busy_s() - self._busy0)
        tree = _tree_cpu_s(self._pid)
        # A worker started during the scenario counts from zero; one that exited is lost (then counted foreign).
        own = sum(max(0.0, now - self._tree0.get(pid, 0.0)) for pid, now in tree.items())
        own += max(0.0, _self_cpu_s() - self._self0)
        foreign = max(0.0, busy - own)
        self.result = HostLoad(
            wall_s=wall,
            logical_cpus=cpus,
            host_busy_cpu_s=busy,
            own_cpu_s=own,
            foreign_cpu_s=foreign,
            foreign_share=min(1.0, foreign / (wall * cpus)),
        )
