"""The tests of test_devices that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import os
import sys

import pytest
from test_devices import A100, H100
from tests.fakegpu import FakeGpu, fake_nvml

from specselect._measure.memory import PeakMemorySampler


def test_memory_is_sampled_per_device_with_host_rss_as_its_own_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(A100, used_mb=(30000, 2000)), FakeGpu(H100, used_mb=(500, 45000))]
    nvml = fake_nvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with PeakMemorySampler(os.getpid(), gpu_devices=[A100, H100], interval_s=60) as sampler:
        pass  # samples at entry and exit only
    result = sampler.result
    assert result.source == "nvml"
    assert {d.device: d.peak_mb for d in result.devices} == {A100: 30000, H100: 45000}
    assert result.mb == 45000  # the largest device's peak: the figure a per-device budget is compared with
    assert result.host_rss_mb is not None and 0 < result.host_rss_mb < 45000
    assert nvml.calls == ["init", "shutdown"]  # type: ignore[attr-defined]
