"""The component tier: tests that start processes, stand-in servers (tests/stubs, the fake vLLM of
test_fault_harness.py, tests/standin_docker.py, the fake SGLang) or wait on a clock; no real engine.
Their helpers may come from unit-tier modules (tests/unit is on the path)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_TESTS.parent))  # tests.* is test support, not in the package
sys.path.insert(0, str(_TESTS / "unit"))  # helpers shared with the unit tier (e.g. test_report_sample.build_run)
sys.path.insert(0, str(_TESTS / "unit" / "data"))  # the fake engines (sglang_fake_install, ...)
from tests.fixtures import no_model_hub, one_gpu  # noqa: E402  (after the path is set)

__all__ = ["no_model_hub", "one_gpu"]
