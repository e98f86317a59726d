"""Session fixtures for tests that start real vLLM servers on CPU (one server at a time).

`engine_env` sets up (or reuses) the managed CPU vLLM environment in $SPECSELECT_HOME and `target_model`
resolves the bundled SmolLM2-135M model; both are slow only the first time on a machine. `recorded_run` is the
one run of the recorded plan that several test modules read (a server start costs ~50 s here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _reduced_plan import RecordedRun, run_recorded_plan

from specselect._assets import resolve_model
from specselect._engines.base import LaunchSpec
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.envsetup import EngineEnv, ensure_managed_vllm_env
from specselect.records.assets import ResolvedModel

CPU_SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
"""A 2 GiB KV cache keeps one server near 5 GB RSS."""
CPU_ENGINE_ARGS = ("--enforce-eager",)
"""Eager start-up is ~35 s instead of ~100 s; float32 keeps temperature-0 outputs identical under speculation."""

LaunchSpecFactory = Callable[..., LaunchSpec]


@pytest.fixture(scope="session")
def engine_env() -> EngineEnv:
    """The managed CPU vLLM environment (built on first use)."""
    return ensure_managed_vllm_env()


@pytest.fixture(scope="session")
def target_model(engine_env: EngineEnv) -> ResolvedModel:
    """The bundled SmolLM2-135M-Instruct model, converted for vLLM on first use."""
    return resolve_model("builtin:smollm2-135m", python=engine_env.python)


@pytest.fixture(scope="session")
def vllm_engine(engine_env: EngineEnv) -> VllmEngine:
    """The vLLM engine of the managed environment."""
    return VllmEngine(env=engine_env)


@pytest.fixture(scope="session")
def cpu_launch_spec(target_model: ResolvedModel, tmp_path_factory: pytest.TempPathFactory) -> LaunchSpecFactory:
    """Build a CPU launch spec for the bundled model: float32, eager, 2 GiB KV cache, files in a fresh temp dir."""

    def make(group: str, **overrides: Any) -> LaunchSpec:
        base: Path = tmp_path_factory.mktemp(group)
        fields: dict[str, Any] = {
            "group": group,
            "model_path": target_model.path,
            "served_model_name": "smollm2-135m",
            "dtype": "float32",
            "max_model_len": 2048,
            "engine_args": CPU_ENGINE_ARGS,
            "env": dict(CPU_SERVER_ENV),
            "startup_timeout_s": 420.0,
            "log_path": base / "logs" / f"{group}.log",
            "run_dir": base / "run",
        }
        fields.update(overrides)
        return LaunchSpec(**fields)

    return make


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> RecordedRun:
    """The recorded plan's run on the real engine (baseline, n-gram, the target as its own draft, a candidate
    refused at admission and one failing at launch: 4 server starts), read by test_run_recorded.py,
    test_report_browser.py and test_handoff_real_engine.py."""
    return run_recorded_plan(tmp_path_factory.mktemp("recorded"))
