"""Peak memory: a process tree's summed RSS (real child processes) and the NVML path (a fake module).

No wall-clock bound: every allocation is acknowledged by the process that made it, and the tests then wait
for the sampler to have taken two more samples (a busy or stolen CPU only makes that wait longer).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from specselect._measure import PeakMemorySampler, process_tree_rss_bytes
from specselect.errors import ConfigError, MissingDependencyError

# A process that allocates (and touches) N MiB per "grow N" line; with "spawn", it first starts a child
# running the same program so that the tree has two levels.
_GROWER = r"""
import subprocess, sys
held = []
child = None
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "spawn":
        child = subprocess.Popen(
            [sys.executable, "-c", sys.argv[1], sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    elif cmd == "grow":
        held.append(bytearray(b"x" * (int(arg) << 20)))
    elif cmd == "childgrow":
        child.stdin.write(f"grow {arg}\n"); child.stdin.flush()
        assert child.stdout.readline().strip() == "ok"  # the grandchild holds the memory now
    print("ok", flush=True)
if child:
    child.stdin.close(); child.wait()
"""


class _Grower:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _GROWER, _GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def _two_more_samples(sampler: PeakMemorySampler) -> None:
    """Wait until the sampler thread has sampled twice more (so at least once after the caller's last change)."""
    target = sampler.result.n_samples + 2
    deadline = time.monotonic() + 120  # a hang guard, not a bound on anything measured
    while sampler.result.n_samples < target:
        assert time.monotonic() < deadline, "the sampler thread stopped sampling"
        time.sleep(0.01)


@pytest.fixture
def grower() -> Iterator[_Grower]:
    g = _Grower()
    try:
        yield g
    finally:
        g.close()


def test_the_sampler_sees_a_child_process_grow(grower: _Grower) -> None:
    grower.send("noop")
    before = process_tree_rss_bytes([grower.proc.pid])
    assert before is not None
    with PeakMemorySampler(grower.proc.pid, interval_s=0.02) as sampler:
        grower.send("grow 150")
        _two_more_samples(sampler)
    peak = sampler.result
    assert peak.source == "process_tree_rss"
    assert peak.n_samples >= 3
    assert peak.mb is not None
    assert peak.mb >= before / 2**20 + 140


def test_the_tree_includes_grandchildren_started_during_the_block(grower: _Grower) -> None:
    grower.send("noop")
    before = process_tree_rss_bytes([grower.proc.pid])
    assert before is not None
    with PeakMemorySampler(grower.proc.pid, interval_s=0.02) as sampler:
        grower.send("spawn")
        grower.send("childgrow 120")
        _two_more_samples(sampler)
    assert sampler.result.mb is not None
    assert sampler.result.mb >= before / 2**20 + 110


def test_a_vanished_process_gives_no_number() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with PeakMemorySampler(proc.pid, interval_s=0.01) as sampler:
        time.sleep(0.03)
    assert sampler.result.mb is None
    assert sampler.result.n_samples == 0


def test_nvml_is_used_for_gpus_and_reports_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    used = iter([1 << 30, 3 << 30, 2 << 30] + [2 << 30] * 1000)
    calls: list[str] = []
    fake = SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=next(used)),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with PeakMemorySampler(gpu_devices=[0], interval_s=0.01) as sampler:
        time.sleep(0.05)
    assert sampler.result.source == "nvml"
    assert sampler.result.mb == pytest.approx(3 * 1024)
    assert calls == ["init", "shutdown"]


def test_missing_nvml_bindings_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'specselect\[gpu\]'"):
        PeakMemorySampler(gpu_devices=[0]).__enter__()


def test_nothing_to_sample_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="root_pid"):
        PeakMemorySampler()
    with pytest.raises(ConfigError, match="interval_s"):
        PeakMemorySampler(1, interval_s=0)
