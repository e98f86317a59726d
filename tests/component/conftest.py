"""The component tier: tests that start stand-in servers or subprocesses (fakes for what no real engine can show
here), with the unit tier's test support on the path and its guarantee that nothing reaches a model hub."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for path in (_TESTS.parent, _TESTS / "unit", _TESTS / "unit" / "data"):
    sys.path.insert(0, str(path))  # tests.fakegpu, the unit tier's helpers and its fake engines are test support


@pytest.fixture(autouse=True)
def no_model_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No component test reaches a model hub: offline, the endpoint a closed port on 127.0.0.1 and no token."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
