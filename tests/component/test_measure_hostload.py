"""The host-load meter: CPU burnt by the server's process tree is the run's own, anything else is foreign."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from specselect._measure.hostload import HostLoadMeter

BURN = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"
SERVER = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', {burn!r}])\n"  # a worker child, like vLLM's engine core
    "time.sleep({s})\n"
)


def _start(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_the_servers_workers_are_own_cpu_and_an_outsider_is_foreign() -> None:
    server = _start(SERVER.format(burn=BURN.format(s=6), s=8))
    outsider = _start(BURN.format(s=6))
    try:
        time.sleep(1.0)  # both are burning before the window opens
        with HostLoadMeter(server.pid) as meter:
            time.sleep(2.0)
    finally:
        for proc in (server, outsider):
            proc.kill()
            proc.wait()
    load = meter.result
    assert load is not None
    # Each burner gets up to 2 CPU-seconds in the window; on a loaded machine less, but never nothing.
    assert load.own_cpu_s > 0.4, load
    assert load.foreign_cpu_s > 0.4, load
    assert 0 < load.foreign_share <= 1
    assert load.foreign_share == pytest.approx(load.foreign_cpu_s / (load.wall_s * load.logical_cpus), rel=1e-6)


def test_no_result_when_the_scenario_raised() -> None:
    meter = HostLoadMeter(1)
    with pytest.raises(RuntimeError), meter:
        raise RuntimeError("scenario failed")
    assert meter.result is None


def test_a_vanished_server_still_measures_the_host() -> None:
    gone = _start("pass")
    gone.wait()
    with HostLoadMeter(gone.pid) as meter:
        time.sleep(0.2)
    assert meter.result is not None and meter.result.own_cpu_s >= 0
