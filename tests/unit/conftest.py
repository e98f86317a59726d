"""Fixtures shared by the unit tests' stand-in engines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.fakegpu is test support, not in the package
from tests.fakegpu import FakeGpu, fake_nvml


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML module: one 80 GiB GPU (its used memory is what the groups' peak memory reads)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([FakeGpu("GPU-0h100", "NVIDIA H100 80GB HBM3", 81559)]))


@pytest.fixture(autouse=True)
def no_model_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No unit test reaches a model hub: offline, the endpoint a closed port on 127.0.0.1 and no token (the
    stand-in hub's tests in test_hub_fetch.py point HF_ENDPOINT at their own server)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
