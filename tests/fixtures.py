"""Fixtures the unit and component tiers share (their conftests import them, which registers them there)."""

from __future__ import annotations

import sys

import pytest
from tests.fakegpu import FakeGpu, fake_nvml

__all__ = ["no_model_hub", "one_gpu"]


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML module: one 80 GiB GPU (its used memory is what the groups' peak memory reads)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([FakeGpu("GPU-0h100", "NVIDIA H100 80GB HBM3", 81559)]))


@pytest.fixture(autouse=True)
def no_model_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test of these tiers reaches a model hub: offline, the endpoint a closed port on 127.0.0.1 and no token
    (the stand-in hub's tests in tests/component/test_hub_fetch.py point HF_ENDPOINT at their own server)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
