"""The vLLM audit on CUDA devices: a CPU plan copied to a GPU host is warned about eager mode, float32 and CPU-only
variables, and a memory share that leaves no room for a candidate's drafter is warned with its numbers. The
devices come from the fake NVML module (tests/fakegpu.py: this machine has no GPU); the models are config-only
directories whose parameter counts are those of an 8B target and a 1B draft (no weights). Nothing is started."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_admission_gather import caps
from tests.fakegpu import FakeGpu, fake_nvml

from specselect._engines import EngineSetup
from specselect._engines.devices import scan_devices
from specselect._engines.probing import device_budget
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.gpu_audit import cpu_only_variables, eager_flags
from specselect._plan import Plan, load_plan, parse_plan_text

L4 = "GPU-1a2b3c4d-0000-4000-8000-000000000024"


def cuda_setup(monkeypatch: pytest.MonkeyPatch, memory_mb: int = 24_576) -> EngineSetup:
    """A GPU build of vLLM 0.32 on one GPU of `memory_mb`, its devices read through the fake NVML module."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([FakeGpu(L4, "NVIDIA L4", memory_mb)]))
    budget = device_budget(scan_devices(), None, cuda_basis="gpu", cpu_basis="cpu")
    capabilities = caps(engine_version="0.32.0", **budget.caps_fields())
    assert capabilities.device_kind == "cuda"
    return EngineSetup(kind="vllm", caps=capabilities, python=Path(capabilities.python))


def cpu_setup() -> EngineSetup:
    return EngineSetup(kind="vllm", caps=caps(), python=Path("/envs/vllm/bin/python"))


def codes(findings: list[Any]) -> list[str]:
    return [code for _, code, _ in findings]


def test_eager_flags_are_every_spelling_that_turns_compilation_or_cuda_graphs_off() -> None:
    off = ["--enforce-eager", "-O0", "--optimization-level", "0", "--compilation-config", '{"level": 0}']
    off += ["-cc.cudagraph_mode=NONE", "-O.mode=0"]
    assert eager_flags(off) == [
        "--enforce-eager",
        "-O0",
        "--optimization-level 0",
        '--compilation-config {"level": 0}',
        "-cc.cudagraph_mode=NONE",
        "-O.mode=0",
    ]
    on = ["-O2", "--enforce-eager=false", "--compilation-config", '{"level": 3}', "--optimization-level=3"]
    assert eager_flags(on) == []


def test_the_cpu_smoke_plan_on_a_gpu_is_warned_about_eager_mode_float32_and_cpu_only_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = load_plan("builtin:cpu-smoke").plan
    found = VllmEngine().audit(plan, cuda_setup(monkeypatch))
    assert {"cuda_eager_mode", "cuda_float32", "cuda_cpu_only_env"} <= set(codes(found))
    messages = {code: message for _, code, message in found}
    assert "[engine].args --enforce-eager" in messages["cuda_eager_mode"]
    assert "VLLM_CPU_KVCACHE_SPACE in [engine.env]" in messages["cuda_cpu_only_env"]
    assert 'dtype = "bfloat16"' in messages["cuda_float32"]


def test_the_same_plan_on_the_cpu_is_not_warned_about_any_of_them() -> None:
    plan = load_plan("builtin:cpu-smoke").plan
    found = codes(VllmEngine().audit(plan, cpu_setup()))
    assert not {"cuda_eager_mode", "cuda_float32", "cuda_cpu_only_env"} & set(found)


def test_cpu_only_variables_are_named_where_the_plan_sets_them() -> None:
    plan = gpu_plan(Path("/nowhere"), Path("/nowhere"), engine_env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"})
    assert cpu_only_variables(plan) == ["VLLM_CPU_OMP_THREADS_BIND in [engine.env]"]


def llama_config(root: Path, *, hidden: int, layers: int, intermediate: int, kv_heads: int = 8) -> Path:
    """A model directory with only its config: the parameter count is estimated from it (no weights)."""
    root.mkdir(parents=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": intermediate,
        "num_attention_heads": 32,
        "num_key_value_heads": kv_heads,
        "vocab_size": 128_256,
        "torch_dtype": "bfloat16",
    }
    (root / "config.json").write_text(json.dumps(config))
    return root


def gpu_plan(target: Path, draft: Path, *, utilization: str | None = None, **extra: Any) -> Plan:
    data: dict[str, Any] = {
        "schema_version": 1,
        "label": "gpu",
        "target": {"model": str(target), "dtype": "bfloat16"},
        "engine": {
            "python": "/envs/vllm/bin/python",
            "args": ["--gpu-memory-utilization", utilization] if utilization else [],
        },
        "workloads": {"general": "builtin:general"},
        "candidates": [
            {"name": "ngram", "family": "ngram", "num_speculative_tokens": 4},
            {"name": "draft_1b", "family": "draft_model", "proposer": str(draft), "num_speculative_tokens": 4},
        ],
    }
    if "engine_env" in extra:
        data["engine"]["env"] = extra["engine_env"]
    return parse_plan_text(tomli_w.dumps(copy.deepcopy(data)), source="gpu.toml", base_dir=Path(".")).plan


@pytest.fixture(name="models")
def models_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """An 8B target (Llama-3.1-8B's shape: 15,316 MB in bfloat16) and a 1B draft (Llama-3.2-1B's shape with its
    embeddings untied: 2,858 MB)."""
    target = llama_config(tmp_path / "llama-8b", hidden=4096, layers=32, intermediate=14_336)
    draft = llama_config(tmp_path / "llama-1b", hidden=2048, layers=16, intermediate=8192)
    return target, draft


def test_a_memory_share_with_room_for_the_target_alone_warns_that_the_drafter_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, models: tuple[Path, Path]
) -> None:
    plan = gpu_plan(*models, utilization="0.8")
    found = [f for f in VllmEngine().audit(plan, cuda_setup(monkeypatch)) if f[1] == "gpu_memory_no_room_for_drafter"]
    assert len(found) == 1  # the draft model only: n-gram loads no weights
    message = found[0][2]
    assert message.startswith("draft_1b: --gpu-memory-utilization 0.8 leaves 19661 MB of the device's 24576 MB")
    assert "memory_over_budget" in message
    # 15,316.5 + 2,858 + 1,536 runtime + 512 KV cache = 20,223 MB = 0.823 of 24,576 MB
    assert "target 15316 MB + proposer 2858 MB + runtime 1536 MB + KV cache 512 MB at the least = 20223 MB" in message
    assert "raise --gpu-memory-utilization to 0.83 or more" in message


def test_a_share_that_holds_target_and_drafter_is_not_warned(
    monkeypatch: pytest.MonkeyPatch, models: tuple[Path, Path]
) -> None:
    plan = gpu_plan(*models, utilization="0.85")
    assert "gpu_memory_no_room_for_drafter" not in codes(VllmEngine().audit(plan, cuda_setup(monkeypatch)))


def test_a_device_too_small_for_target_and_drafter_at_any_share_says_so(
    monkeypatch: pytest.MonkeyPatch, models: tuple[Path, Path]
) -> None:
    setup = cuda_setup(monkeypatch, memory_mb=20_000)  # the target alone fits in vLLM's default 0.92 of it
    found = {code: message for _, code, message in VllmEngine().audit(gpu_plan(*models), setup)}
    message = found["gpu_memory_no_room_for_drafter"]
    assert "--gpu-memory-utilization 0.92 (vLLM's default) leaves 18400 MB" in message
    assert "the device cannot hold both" in message
