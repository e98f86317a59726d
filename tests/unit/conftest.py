"""The unit tier is pure: `purity_guard` fails a unit test that starts a process, sleeps or starts a thread
(such tests belong in tests/component, which `make test` runs after this tier)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.* is test support, not in the package
from tests.fixtures import no_model_hub, one_gpu

__all__ = ["no_model_hub", "one_gpu", "purity_guard"]


def _refuse(what: str) -> Any:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a unit test {what}: move it to tests/component (the unit tier is pure)")

    return refused


@pytest.fixture(scope="module", autouse=True)
def purity_guard() -> Iterator[None]:
    """Processes, sleeps and threads are refused in this tier, in module fixtures as in tests (module scope: the
    guard is lifted before any other tier's module runs in the same session). test_unit_tier_is_pure.py shows
    that it refuses."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", _refuse("starts a process"))
        patch.setattr(os, "fork", _refuse("forks"))
        patch.setattr(time, "sleep", _refuse("sleeps"))
        patch.setattr(threading.Thread, "start", _refuse("starts a thread"))
        yield
