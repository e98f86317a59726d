"""A launch sharing its device with another process is not trusted: `DeviceWatch` reads the processes and
utilisation on a launch's devices through the fake NVML (`tests/fakegpu.py`; this machine has no GPU), and the
evidence leaves such a round out and names it, as it does for a busy host. Nothing is started: the "foreign"
process is pytest's parent, a real process of this host that is neither the server nor specselect."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest
from tests.fakegpu import FakeGpu, FakeProcess, fake_nvml

from specselect._engines.devices import DeviceWatch, own_processes
from specselect._evidence.pipeline.sides import excluded_rounds
from specselect.records.capacity import DeviceLoad, ForeignProcess

SERVER = os.getpid()
"""Stands in for the server's pid: `own()` below claims it."""
NEIGHBOUR = os.getppid()
GONE = 4_194_000 + 7
"""A pid above Linux's default pid_max: no process of this namespace has it."""


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    card = FakeGpu("GPU-0h100", "NVIDIA H100 80GB HBM3", 81559, processes=[FakeProcess(SERVER, 60_000)])
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([card]))
    return card


def watch(reads: int, gpu: FakeGpu, *, later: list[FakeProcess] | None = None) -> DeviceLoad:
    with DeviceWatch(("GPU-0h100",), lambda: {SERVER}) as w:
        for n in range(reads):
            if later is not None and n == reads - 1:
                gpu.processes = later  # a neighbour arrives during the scenario
            w()
    return w.result


def test_a_device_only_the_server_uses_is_quiet(gpu: FakeGpu) -> None:
    load = watch(3, gpu)
    assert (load.busy, load.foreign, load.samples, load.problem) == (False, (), 3, None)


def test_a_process_arriving_during_the_scenario_makes_the_launch_busy_and_is_named(gpu: FakeGpu) -> None:
    gpu.utilization_pct = 97
    load = watch(3, gpu, later=[FakeProcess(SERVER, 60_000), FakeProcess(NEIGHBOUR, 1200)])
    assert load.busy
    assert load.foreign == (ForeignProcess(pid=NEIGHBOUR, device="GPU-0h100", name=load.foreign[0].name, used_mb=1200),)
    assert load.describe().startswith(f"pid {NEIGHBOUR}")
    assert "on GPU-0h100, 1200 MB" in load.describe()
    assert load.max_utilization_pct == 97


def test_a_pid_of_another_namespace_is_not_called_foreign_but_said(gpu: FakeGpu) -> None:
    gpu.processes = [FakeProcess(GONE, 10)]
    load = watch(1, gpu)
    assert not load.busy
    assert load.problem is not None and f"pid {GONE}" in load.problem


def test_without_nvml_nothing_is_vouched_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error="Driver Not Loaded"))
    with DeviceWatch(("0",), lambda: {SERVER}) as w:
        w()
    assert not w.result.busy
    assert w.result.problem == "NVML could not read the devices: Driver Not Loaded"


def test_own_processes_are_specselect_and_the_servers_tree() -> None:
    assert own_processes(None) == {os.getpid()}
    assert NEIGHBOUR in own_processes(NEIGHBOUR)


@dataclass
class Run:
    """The fields of a scenario run `excluded_rounds` reads."""

    scenario: str
    launch: int
    device_load: DeviceLoad | None = None
    traffic: None = None
    host_load: None = None
    response_cache: None = None


def test_the_busy_round_is_left_out_and_named_like_a_busy_host() -> None:
    busy = DeviceLoad(devices=("GPU-0h100",), foreign=(ForeignProcess(pid=4242, device="GPU-0h100", name="python"),))
    quiet = DeviceLoad(devices=("GPU-0h100",))
    sides = [
        ("baseline", Run("chat-c1", 0, quiet)),
        ("candidate", Run("chat-c1", 0, quiet)),
        ("baseline", Run("chat-c1", 1, quiet)),
        ("candidate", Run("chat-c1", 1, busy)),
    ]
    assert excluded_rounds(sides, None) == {
        1: "candidate: device busy: another process shared the server's device (pid 4242 (python) on GPU-0h100) "
        "during chat-c1 (round 2)"
    }
