"""Which CPU time counts as foreign: the cgroup's when specselect's cgroup has a CPU limit of its own, else the
host's. Read from cgroupfs trees written here as the kernel lays them out (v2 unified, v1 split controllers)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from specselect._measure.cpuscope import detect_cpu_scope, parse_cpu_list
from specselect._measure.hostload import HostLoadMeter

HOST_CPUS = psutil.cpu_count(logical=True) or 1


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return root


def test_cpu_lists_are_counted_as_the_kernel_writes_them() -> None:
    assert parse_cpu_list("0-3,8") == 5
    assert parse_cpu_list("1") == 1
    assert parse_cpu_list("") == 0


def test_a_v2_cgroup_with_a_cpu_quota_is_the_scope(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "cgroup.controllers": "cpuset cpu io memory pids",
            "kubepods/pod1/cpu.max": "150000 100000",
            "kubepods/pod1/cpuset.cpus.effective": f"0-{HOST_CPUS - 1}",
            "kubepods/pod1/cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000",
        },
    )
    scope = detect_cpu_scope("0::/kubepods/pod1\n", root)
    assert (scope.kind, scope.cpus) == ("cgroup", 1.5)
    assert scope.busy_s() == 2.5
    assert "cpu.max 150000 100000" in scope.detail


def test_a_v2_cgroup_without_limits_is_the_host(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "cgroup.controllers": "cpu",
            "user.slice/cpu.max": "max 100000",
            "user.slice/cpuset.cpus.effective": f"0-{HOST_CPUS - 1}",
            "user.slice/cpu.stat": "usage_usec 1",
        },
    )
    scope = detect_cpu_scope("0::/user.slice\n", root)
    assert (scope.kind, scope.cpus) == ("host", float(HOST_CPUS))
    assert "host-wide" in scope.detail


def test_a_v1_quota_is_read_from_the_split_controllers(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
            "cpu,cpuacct/docker/abc/cpuacct.usage": "3000000000",
            "cpuset/docker/abc/cpuset.effective_cpus": "0",
        },
    )
    scope = detect_cpu_scope("4:cpuset:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n", root)
    assert (scope.kind, scope.cpus) == ("cgroup", 0.5)  # the quota is tighter than the one-CPU cpuset
    assert scope.busy_s() == 3.0
    # The same layout with no quota (-1) and the whole host's cpuset: host-wide.
    _write(tmp_path, {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1"})
    _write(tmp_path, {"cpuset/docker/abc/cpuset.effective_cpus": f"0-{HOST_CPUS - 1}"})
    assert detect_cpu_scope("4:cpuset:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", root).kind == "host"


def test_a_container_that_sees_only_its_own_cgroup_is_limited_by_it(tmp_path: Path) -> None:
    # Docker on cgroup v1 without a cgroup namespace: /proc/self/cgroup names the host-side path, while the
    # container's own cgroup is what is mounted at each controller's mount point.
    own = "4:cpuset:/docker/abc\n3:cpu,cpuacct:/docker/abc\n"
    root = _write(
        tmp_path,
        {
            "cpu,cpuacct/cpu.cfs_quota_us": "150000",
            "cpu,cpuacct/cpu.cfs_period_us": "100000",
            "cpu,cpuacct/cpuacct.usage": "4000000000",
            "cpuset/cpuset.effective_cpus": f"0-{HOST_CPUS - 1}",
        },
    )
    scope = detect_cpu_scope(own, root)
    assert (scope.kind, scope.cpus, scope.busy_s()) == ("cgroup", 1.5, 4.0)
    assert str(root / "cpu,cpuacct") + ":" in scope.detail
    _write(tmp_path, {"cpu,cpuacct/cpu.cfs_quota_us": "-1"})  # the same container without a quota: host-wide
    assert detect_cpu_scope(own, root).kind == "host"


def test_the_meter_records_its_scope_and_counts_only_the_cgroups_time(tmp_path: Path) -> None:
    usage = tmp_path / "pod" / "cpu.stat"
    root = _write(
        tmp_path, {"cgroup.controllers": "cpu", "pod/cpu.max": "100000 100000", "pod/cpu.stat": "usage_usec 0"}
    )
    scope = detect_cpu_scope("0::/pod\n", root)
    with HostLoadMeter(os.getpid(), scope=scope) as meter:
        usage.write_text("usage_usec 0\n")  # the container was idle: whatever the host did is not foreign
    load = meter.result
    assert load is not None
    assert (load.scope, load.scope_cpus, load.host_busy_cpu_s, load.foreign_share) == ("cgroup", 1.0, 0.0, 0.0)
    assert load.scope_detail is not None and "cgroup v2" in load.scope_detail
