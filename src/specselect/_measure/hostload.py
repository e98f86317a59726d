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
from specselect.records.doctor import HostSample, ProcessCpu
from specselect.records.host import HostLoad

__all__ = ["HostLoadMeter", "sample_host"]


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


def _process_cpu_s() -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:
            out[proc.pid] = (str(proc.info.get("name") or "?"), float(times.user + times.system))
    return out


def sample_host(seconds: float = 1.0, *, busiest: int = 5) -> HostSample:
    """The share of the CPU other processes took over `seconds` (the meter above, with specselect as the only own
    process), and the `busiest` of them by the cores they used."""
    before = _process_cpu_s()
    with HostLoadMeter(os.getpid()) as meter:
        time.sleep(seconds)
    after = _process_cpu_s()
    wall = meter.result.wall_s if meter.result is not None else seconds
    used = [
        ProcessCpu(pid=pid, name=name, cores=round((cpu - before[pid][1]) / wall, 3))
        for pid, (name, cpu) in after.items()
        if pid in before and pid != os.getpid() and cpu > before[pid][1]
    ]
    used.sort(key=lambda p: p.cores, reverse=True)
    load = meter.result
    return HostSample(
        seconds=round(wall, 3),
        scope_cpus=(load.scope_cpus or load.logical_cpus) if load is not None else float(psutil.cpu_count() or 1),
        foreign_share=load.foreign_share if load is not None else 0.0,
        busiest=tuple(used[:busiest]),
    )
