"""Whose CPU time counts as "this workload's neighbours": the host's, or the cgroup specselect runs in.

Inside a container with its own CPU limit on a shared node, every other tenant's work shows in the host-wide
`/proc/stat`, yet none of it competes for this container's CPU quota. So when specselect's cgroup has a CPU
limit of its own (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`, or a cpuset smaller than the host), busy time is
the cgroup's CPU usage (v2 `cpu.stat` usage_usec, v1 `cpuacct.usage`) and capacity is its limit in cores;
otherwise both are host-wide. The server is started by specselect, so it runs in the same cgroup.

A container without a cgroup namespace of its own (Docker and Kubernetes on cgroup v1 nodes) lists its host-side
path in /proc/self/cgroup (`/docker/<id>`, `/kubepods/...`), but has its own cgroup mounted at the controller's
mount point, where that path does not exist: then the mount point is the cgroup read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

__all__ = ["CpuScope", "detect_cpu_scope", "parse_cpu_list"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CpuScope:
    """Where busy CPU time is read and how many cores it may use."""

    kind: Literal["host", "cgroup"]
    cpus: float
    """Capacity in cores: the cgroup's quota or cpuset, else the host's logical CPUs."""
    detail: str
    """Why this scope: the limit that was found, or that none was."""
    busy_s: Callable[[], float]
    """Cumulative busy CPU seconds of the scope (differences over a window are what count)."""


def _host_busy_s() -> float:
    t = psutil.cpu_times()
    return float(sum(t)) - float(t.idle) - float(getattr(t, "iowait", 0.0))


def _host(detail: str) -> CpuScope:
    return CpuScope("host", float(psutil.cpu_count(logical=True) or 1), detail, _host_busy_s)


def parse_cpu_list(text: str) -> int:
    """How many CPUs a cpuset list names (`0-3,8` -> 5); 0 for an empty or unreadable list."""
    count = 0
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        if not low.strip().isdigit() or (high and not high.strip().isdigit()):
            continue
        count += (int(high) - int(low) + 1) if high else 1
    return count


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v2_usage(directory: Path) -> Callable[[], float]:
    def usage() -> float:
        for line in (_read(directory / "cpu.stat") or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        raise OSError(f"no usage_usec in {directory / 'cpu.stat'}")

    return usage


def _v1_usage(directory: Path) -> Callable[[], float]:
    def usage() -> float:
        text = _read(directory / "cpuacct.usage")
        if text is None:
            raise OSError(f"cannot read {directory / 'cpuacct.usage'}")
        return int(text) / 1e9

    return usage


def _limit(quota: float | None, cpuset: int, host_cpus: int) -> float | None:
    """The cores a cgroup may use, when that is less than the host's; None when it has no limit of its own."""
    candidates = [c for c in (quota, float(cpuset) if 0 < cpuset < host_cpus else None) if c is not None]
    return min(candidates) if candidates else None


def _cgroup_dir(mount: Path, path: str) -> Path:
    """The directory of cgroup `path` under a controller's mount point: the mount point itself when `path` is
    not there (a container that sees only its own cgroup)."""
    directory = mount / path.lstrip("/")
    return directory if directory.is_dir() else mount


def _v2_scope(root: Path, path: str, host_cpus: int) -> CpuScope | None:
    directory = _cgroup_dir(root, path)
    cpu_max = (_read(directory / "cpu.max") or "max").split()
    quota = int(cpu_max[0]) / int(cpu_max[1]) if len(cpu_max) == 2 and cpu_max[0].isdigit() else None
    cpuset = parse_cpu_list(_read(directory / "cpuset.cpus.effective") or "")
    cores = _limit(quota, cpuset, host_cpus)
    if cores is None or not (directory / "cpu.stat").exists():
        return None
    detail = f"cgroup v2 {directory}: cpu.max {' '.join(cpu_max)}, cpuset {cpuset or host_cpus} CPUs"
    return CpuScope("cgroup", cores, detail, _v2_usage(directory))


def _v1_dirs(root: Path, text: str) -> dict[str, Path]:
    dirs: dict[str, Path] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[1]:
            continue
        for controller in parts[1].split(","):
            dirs[controller] = _cgroup_dir(root / parts[1], parts[2])
    return dirs


def _v1_scope(root: Path, text: str, host_cpus: int) -> CpuScope | None:
    dirs = _v1_dirs(root, text)
    cpu, acct = dirs.get("cpu"), dirs.get("cpuacct")
    if cpu is None or acct is None:
        return None
    quota_us, period_us = _read(cpu / "cpu.cfs_quota_us") or "-1", _read(cpu / "cpu.cfs_period_us") or "100000"
    quota = int(quota_us) / int(period_us) if quota_us.isdigit() and period_us.isdigit() else None
    cpuset_dir = dirs.get("cpuset")
    cpuset = parse_cpu_list(_read(cpuset_dir / "cpuset.effective_cpus") or "") if cpuset_dir else 0
    cores = _limit(quota, cpuset, host_cpus)
    if cores is None or not (acct / "cpuacct.usage").exists():
        return None
    detail = f"cgroup v1 {cpu}: cfs quota {quota_us}/{period_us} us, cpuset {cpuset or host_cpus} CPUs"
    return CpuScope("cgroup", cores, detail, _v1_usage(acct))


def detect_cpu_scope(proc_cgroup: str | None = None, root: Path = _CGROUP_ROOT) -> CpuScope:
    """The scope for this process: its cgroup's when that has a CPU limit of its own, else the host's.

    `proc_cgroup` is the text of /proc/self/cgroup (read when None); `root` where cgroupfs is mounted.
    """
    text = proc_cgroup if proc_cgroup is not None else (_read(Path(f"/proc/{os.getpid()}/cgroup")) or "")
    host_cpus = psutil.cpu_count(logical=True) or 1
    unified = next((line[3:] for line in text.splitlines() if line.startswith("0::")), None)
    if unified is not None and (root / "cgroup.controllers").exists():
        scope = _v2_scope(root, unified, host_cpus)
    else:
        scope = _v1_scope(root, text, host_cpus)
    return scope if scope is not None else _host("no CPU limit of specselect's own cgroup: host-wide /proc/stat")
