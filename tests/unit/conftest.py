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
