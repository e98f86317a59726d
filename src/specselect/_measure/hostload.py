"""How much of the CPU this workload could use went to other processes while a scenario was measured.

Groups run one after another, so anything else busy during one group and not the other skews their ratio: on a
2-core CPU host a second engine turned a 1.0x candidate into "1.15x". The meter takes the busy CPU time of the
scope specselect runs in over the scenario (`measure.cpuscope`: its cgroup when that has a CPU limit of its own,
as in a container on a shared node, else the whole host) and subtracts what the server's process tree and this
process (the load client) used; the rest is foreign work, reported as a share of the scope's capacity.
"""

from __future__ import annotations

import os
import time
from types import TracebackType

import psutil

from specselect._measure.cpuscope import CpuScope, detect_cpu_scope
from specselect.records.host import HostLoad

__all__ = ["HostLoadMeter"]


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
    """`with HostLoadMeter(server_pid) as meter: ...` then `meter.result` (None if it could not be measured).

    `scope` defaults to the one this process runs in (`detect_cpu_scope`)."""

    def __init__(self, pid: int, scope: CpuScope | None = None) -> None:
        self._pid = pid
        self._scope = scope if scope is not None else detect_cpu_scope()
        self.result: HostLoad | None = None

    def __enter__(self) -> HostLoadMeter:
        self._t0 = time.monotonic()
        self._busy0 = self._scope.busy_s()
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
        try:
            busy = max(0.0, self._scope.busy_s() - self._busy0)
        except (OSError, ValueError):  # the cgroup's accounting went away: no number rather than a wrong one
            return
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
            foreign_share=min(1.0, foreign / (wall * self._scope.cpus)),
            scope=self._scope.kind,
            scope_cpus=self._scope.cpus,
            scope_detail=self._scope.detail,
        )
