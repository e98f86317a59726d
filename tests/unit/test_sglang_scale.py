"""Engine arguments for scale: parallel sizes, executor backend and draft TP reach both engines' command
lines, and the capacity gate accounts for them (data parallel replicas, device count, draft TP, SGLang's
static memory fraction).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specselect._admission import capacity_check
from specselect._assets.memory_estimate import (
    GPU_RUNTIME_OVERHEAD_MB,
    MemoryTerms,
    estimate_memory,
    sglang_default_mem_fraction,
)
from specselect._core.gates import AdmissionInput, GateCheck, admit
from specselect._core.gates import GateCheck as Check
from specselect._core.status import RunStatus
from specselect._engines.base import EngineSetup, GroupContext, LaunchSpec, Proposal
from specselect._engines.settings import memory_flags
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.launch import build_sglang_argv
from specselect._engines.sglang.specargs import build_sglang_speculative_args
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.launch import build_vllm_argv
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect._plan import Candidate, EngineConfig, TargetConfig
from specselect.errors import ConfigError
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import DeviceInfo, EngineCapabilities, SglangCapabilities, VllmCapabilities

PY = "/envs/engine/bin/python"
GPU_MB = 81_920


def spec(tmp_path: Path, **kw: Any) -> LaunchSpec:
    fields: dict[str, Any] = {
        "group": "c1",
        "model_path": Path("/models/target"),
        "served_model_name": "target",
        "log_path": tmp_path / "g.log",
        "run_dir": tmp_path / "run",
    }
    fields.update(kw)
    return LaunchSpec(**fields)


def value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def target(num_params: int = 8_000_000_000) -> ResolvedModel:
    return ResolvedModel(
        ref="org/target",
        path=Path("/models/target"),
        snapshot="c" * 40,
        source="hf_cache",
        config={"model_type": "llama"},
        vocab_size=128_256,
        tokenizer_sha256="t" * 64,
        num_params=num_params,
        num_params_source="safetensors",
        weights_bytes=num_params * 2,
        has_native_mtp=False,
        architectures=("LlamaForCausalLM",),
        model_type="llama",
        num_hidden_layers=32,
        hidden_size=4096,
        dtype="bfloat16",
    )


def sglang_caps(gpus: int) -> SglangCapabilities:
    devices = tuple(DeviceInfo(index=i, name="H100", memory_mb=GPU_MB) for i in range(gpus))
    return SglangCapabilities(
        engine_version="0.5.4",
        python=PY,
        device_kind="cuda",
        devices=devices,
        memory_budget_mb=GPU_MB,
        memory_budget_basis="test",
        spec_methods=("eagle",),
        method_hardware={"eagle": "cuda"},
        versions={"sglang": "0.5.4"},
        speculative_algorithms=("EAGLE",),
        algorithm_source="registry",
        speculative_flags=(),
        launch_flags={},
        server_endpoints=(),
        probed_in_s=0.0,
    )


def gate(
    model: ResolvedModel,
    caps: EngineCapabilities,
    candidate: Candidate | None = None,
    *,
    env: dict[str, str] | None = None,
    **engine: Any,
) -> Check:
    """The capacity gate for `candidate` (default: an n-gram candidate) under the engine of `caps`' kind."""
    ctx = GroupContext(
        candidate=candidate or Candidate(name="c1", family="ngram", num_speculative_tokens=4),
        engine=EngineConfig(kind=caps.kind, python=PY, env=env or {}, **engine),
        target_config=TargetConfig(model="org/target"),
        target=model,
        setup=EngineSetup(kind=caps.kind, caps=caps, python=Path(PY)),
    )
    launcher = SglangEngine(python=PY) if caps.kind == "sglang" else VllmEngine(python=PY)
    return capacity_check(model, None, launcher.capacity_terms(ctx, None))


def test_parallel_sizes_reach_both_engines(tmp_path: Path) -> None:
    launch = spec(tmp_path, tensor_parallel_size=2, pipeline_parallel_size=2, data_parallel_size=2)
    vllm = build_vllm_argv(launch, 8000, python=PY)
    assert [value(vllm, f"--{n}-parallel-size") for n in ("tensor", "pipeline", "data")] == ["2", "2", "2"]
    sglang = build_sglang_argv(launch, 8000, python=PY)
    assert [value(sglang, f"--{n}-size") for n in ("tp", "pp", "dp")] == ["2", "2", "2"]
    single = build_sglang_argv(spec(tmp_path), 8000, python=PY)
    assert value(single, "--tp-size") == "1" and "--pp-size" not in single and "--dp-size" not in single


def test_executor_backend_is_vllm_only(tmp_path: Path) -> None:
    launch = spec(tmp_path, tensor_parallel_size=2, distributed_executor_backend="ray")
    assert value(build_vllm_argv(launch, 8000, python=PY), "--distributed-executor-backend") == "ray"
    with pytest.raises(ConfigError, match="vLLM setting"):
        build_sglang_argv(launch, 8000, python=PY)


def test_draft_tensor_parallel_size(tmp_path: Path) -> None:
    config = build_speculative_config(
        Proposal("draft_model", None, 4, "/models/draft", {"draft_tensor_parallel_size": 1})
    )
    vllm = build_vllm_argv(spec(tmp_path, tensor_parallel_size=2, speculative_config=config), 8000, python=PY)
    assert json.loads(value(vllm, "--speculative-config") or "{}")["draft_tensor_parallel_size"] == 1
    # SGLang drafts at the target's TP: the same size is accepted (and implied), another one refused.
    same = build_sglang_speculative_args(
        Proposal("draft_model", None, 4, "/models/draft", {"draft_tensor_parallel_size": 2}), tensor_parallel_size=2
    )
    assert "draft_tensor_parallel_size" not in json.dumps(same)
    with pytest.raises(ConfigError, match="target's tensor parallel size"):
        build_sglang_speculative_args(
            Proposal("draft_model", None, 4, "/models/draft", {"draft_tensor_parallel_size": 1}), tensor_parallel_size=2
        )


def test_memory_gate_splits_weights_over_tensor_and_pipeline_ranks() -> None:
    one = estimate_memory(target(), None, MemoryTerms(device_kind="cuda", budget_mb=GPU_MB))
    four = estimate_memory(
        target(),
        None,
        MemoryTerms(device_kind="cuda", budget_mb=GPU_MB, tensor_parallel_size=2, pipeline_parallel_size=2),
    )
    assert four.parallel_devices == 4
    weights = one.target_weights_mb or 0.0
    # Each device holds a quarter of the weights; vLLM gives what is freed to the KV cache.
    assert four.kv_cache_mb == pytest.approx(one.kv_cache_mb + weights * 3 / 4, abs=0.2)
    cpu = estimate_memory(
        target(135_000_000), None, MemoryTerms(device_kind="cpu", budget_mb=20_000, tensor_parallel_size=2)
    )
    assert cpu.parallel_devices == 2 and cpu.runtime_overhead_mb == 2 * 2800


def test_capacity_gate_reads_sglang_capabilities() -> None:
    check = gate(target(), sglang_caps(2), tensor_parallel_size=2)
    assert check.passed and check.facts["parallel_devices"] == 2
    too_big = gate(target(70_000_000_000), sglang_caps(1))
    assert too_big.reason == "memory_over_budget"


def test_data_parallel_replicas_count_in_the_memory_gate() -> None:
    kwargs: dict[str, Any] = {"device_kind": "cpu", "budget_mb": 40_000}
    one = estimate_memory(target(135_000_000), None, MemoryTerms(**kwargs))
    two = estimate_memory(target(135_000_000), None, MemoryTerms(data_parallel_size=2, **kwargs))
    # On CPU every replica is a full copy in the same host memory.
    assert two.estimated_memory_mb == pytest.approx(2 * (one.estimated_memory_mb or 0.0))
    assert (two.data_parallel_size, two.devices_needed, two.runtime_overhead_mb) == (2, 2, 2 * 2800)
    # On CUDA each replica has its own devices: per-device memory is unchanged, the device count grows.
    gpu: dict[str, Any] = {"device_kind": "cuda", "budget_mb": GPU_MB, "tensor_parallel_size": 2}
    single = estimate_memory(target(), None, MemoryTerms(**gpu))
    replicated = estimate_memory(target(), None, MemoryTerms(data_parallel_size=2, pipeline_parallel_size=2, **gpu))
    assert replicated.estimated_memory_mb == pytest.approx(
        estimate_memory(target(), None, MemoryTerms(pipeline_parallel_size=2, **gpu)).estimated_memory_mb
    )
    assert (single.devices_needed, replicated.parallel_devices, replicated.devices_needed) == (2, 4, 8)


def test_cpu_host_budget_blocks_replicas() -> None:
    caps = sglang_caps(0).model_copy(update={"device_kind": "cpu", "memory_budget_mb": 12_000})
    one = gate(target(135_000_000), caps)
    assert one.passed and "devices_available" not in one.facts
    two = gate(target(135_000_000), caps, data_parallel_size=2)
    assert two.reason == "memory_over_budget" and two.facts["data_parallel_size"] == 2


def test_more_ranks_than_gpus_is_capacity_blocked() -> None:
    check = gate(target(), sglang_caps(1), tensor_parallel_size=2)
    assert check.reason == "too_few_devices"
    assert (check.facts["devices_needed"], check.facts["devices_available"]) == (2, 1)
    # Data parallel replicas need their own GPUs too: 2 x 1 x 2 = 4 devices.
    short = gate(target(), sglang_caps(3), tensor_parallel_size=2, data_parallel_size=2)
    assert (short.reason, short.facts["devices_needed"], short.facts["devices_available"]) == ("too_few_devices", 4, 3)
    assert gate(target(), sglang_caps(4), tensor_parallel_size=2, data_parallel_size=2).passed
    admitted = admit("c1", "ngram", _only_capacity(short))
    assert (admitted.run_status, admitted.gate, admitted.reason) == (
        RunStatus.CAPACITY_BLOCKED,
        "capacity",
        "too_few_devices",
    )


def _only_capacity(check: GateCheck) -> AdmissionInput:
    ok = GateCheck.ok()
    return AdmissionInput(enabled=True, backend=ok, asset=ok, compatibility=ok, capacity=check)


def test_sglang_static_memory_fraction_is_the_utilisation() -> None:
    assert memory_flags(("--mem-fraction-static", "0.7"), "--mem-fraction-static") == (0.7, None)
    assert memory_flags(("--mem-fraction-static=0.65",), "--mem-fraction-static") == (0.65, None)
    # vLLM's flag means nothing to SGLang (and SGLang's nothing to vLLM).
    assert gate(target(), sglang_caps(1), args=("--gpu-memory-utilization", "0.5")).facts["memory_utilization"] == 0.836
    check = gate(target(), sglang_caps(1), args=("--mem-fraction-static", "0.7"))
    assert check.facts["memory_utilization"] == 0.7
    assert check.facts["memory_utilization_source"] == "engine_args"
    assert check.facts["budget_mb"] == pytest.approx(0.7 * GPU_MB, abs=0.1)
    with pytest.raises(ConfigError, match="--mem-fraction-static"):
        memory_flags(("--mem-fraction-static", "1.5"), "--mem-fraction-static")


@pytest.mark.parametrize(
    ("gpu_mb", "tp", "algorithm", "fraction"),
    [
        # 80 GiB: chunked prefill 8192, CUDA-graph batch 256 -> 512 + 12288 + 512 + 128 = 13440 MB reserved.
        (GPU_MB, 1, None, 0.836),
        (GPU_MB, 1, "NGRAM", 0.836),
        (GPU_MB, 1, "EAGLE3", 0.811),  # + 2048 for the draft and its CUDA graphs
        (GPU_MB, 1, "STANDALONE", 0.761),  # + 6144 for a standalone draft model
        (GPU_MB, 4, None, 0.825),  # CUDA-graph batch 512 and 4/8 GiB for the parallel group
        # 24 GiB: 512 + 3072 + 48 + 128 = 3760 MB reserved, no 10 GiB floor.
        (24_576, 1, "EAGLE", 0.764),
    ],
)
def test_sglang_default_memory_fraction(gpu_mb: int, tp: int, algorithm: str | None, fraction: float) -> None:
    got = sglang_default_mem_fraction(gpu_mb, tensor_parallel_size=tp, speculative_algorithm=algorithm)
    assert got == fraction


def test_sglang_default_fraction_reaches_the_gate() -> None:
    baseline = gate(target(), sglang_caps(1), Candidate(name="g0_target_only"))
    eagle = gate(target(), sglang_caps(1), Candidate(name="e3", family="eagle", method="eagle3", proposer="/m/e3"))
    assert baseline.facts["memory_utilization_source"] == "sglang_default"
    assert (baseline.facts["memory_utilization"], eagle.facts["memory_utilization"]) == (0.836, 0.811)
    # SGLang's fraction already leaves activations and CUDA graphs outside: no extra runtime overhead.
    assert baseline.facts["runtime_overhead_mb"] == 0
    vllm_caps = VllmCapabilities(
        **sglang_caps(1).model_dump(include={"engine_version", "python", "device_kind", "devices", "versions"}),
        memory_budget_mb=GPU_MB,
        memory_budget_basis="test",
        spec_methods=("ngram",),
        per_request_spec_metrics_flag=True,
        method_hardware={},
        optional_modules={},
        probed_in_s=0.0,
    )
    vllm = gate(target(), vllm_caps)
    assert (vllm.facts["memory_utilization_source"], vllm.facts["memory_utilization"]) == ("vllm_default", 0.92)
    assert vllm.facts["runtime_overhead_mb"] == GPU_RUNTIME_OVERHEAD_MB


def test_proposer_weights_split_over_draft_tensor_parallel_size() -> None:
    draft = target(1_000_000_000)
    gpu: dict[str, Any] = {"device_kind": "cuda", "budget_mb": GPU_MB, "tensor_parallel_size": 2}
    default = estimate_memory(target(), draft, MemoryTerms(**gpu))
    whole = estimate_memory(target(), draft, MemoryTerms(draft_tensor_parallel_size=1, **gpu))
    assert default.draft_tensor_parallel_size == 2 and whole.draft_tensor_parallel_size == 1
    proposer_mb = draft.num_params * 2 / 2**20 if draft.num_params else 0.0
    # Each device holds half of the target; the proposer is whole on each device at draft TP 1.
    assert (whole.estimated_memory_mb or 0.0) - whole.kv_cache_mb == pytest.approx(
        (target().num_params or 0) * 2 / 2**20 / 2 + proposer_mb + GPU_RUNTIME_OVERHEAD_MB, abs=0.2
    )
    assert default.kv_cache_mb - whole.kv_cache_mb == pytest.approx(proposer_mb / 2, abs=0.2)
    # Pipeline stages do not split the proposer (vLLM loads it on the last stage at draft TP).
    staged = estimate_memory(target(), draft, MemoryTerms(pipeline_parallel_size=2, **gpu))
    alone = estimate_memory(target(), None, MemoryTerms(pipeline_parallel_size=2, **gpu))
    assert alone.kv_cache_mb - staged.kv_cache_mb == pytest.approx(proposer_mb / 2, abs=0.2)
    # On CPU the last stage's tensor ranks each hold 1/draft_tp of it, all in one host memory.
    cpu: dict[str, Any] = {"device_kind": "cpu", "budget_mb": 40_000, "tensor_parallel_size": 2}
    cpu_split = estimate_memory(target(135_000_000), draft, MemoryTerms(**cpu))
    cpu_whole = estimate_memory(target(135_000_000), draft, MemoryTerms(draft_tensor_parallel_size=1, **cpu))
    assert (cpu_whole.estimated_memory_mb or 0.0) - (cpu_split.estimated_memory_mb or 0.0) == pytest.approx(
        proposer_mb, abs=0.2
    )


def test_vllm_refuses_a_draft_tensor_parallel_size_it_cannot_run() -> None:
    for size in (1, 2):
        config = build_speculative_config(
            Proposal("draft_model", None, 4, "/d", {"draft_tensor_parallel_size": size}), tensor_parallel_size=2
        )
        assert config["draft_tensor_parallel_size"] == size
    with pytest.raises(ConfigError, match="must be 1 or the target's tensor_parallel_size") as info:
        build_speculative_config(
            Proposal("eagle", None, 4, "/d", {"draft_tensor_parallel_size": 2}), tensor_parallel_size=4, location="c.e"
        )
    assert info.value.location == "c.e.options.draft_tensor_parallel_size"
    assert "set it to 1 or 4" in (info.value.fix or "")
