"""Admission gatherer: every reason of gates 2-5, from constructed probes and models, through `admit`."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from test_assets_files import tiny_llama

from specselect._admission import Gathered, capacity_check
from specselect._assets.memory_estimate import CPU_RUNTIME_OVERHEAD_MB, MemoryTerms, estimate_memory
from specselect._core.gates import AdmissionResult, admit
from specselect._core.status import RunStatus
from specselect._engines import EngineSetup, GroupContext
from specselect._engines.settings import memory_flags
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.gate import sglang_method
from specselect._engines.sglang.specargs import lossy_verification, supported_methods
from specselect._engines.vllm.controllers import KNOWN_CONTROLLERS
from specselect._engines.vllm.engine import VllmEngine
from specselect._plan import EngineConfig, TargetConfig, load_plan
from specselect._plan.candidates import Candidate
from specselect.errors import ConfigError
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import DeviceInfo, EngineCapabilities, SglangCapabilities, VllmCapabilities

METHODS = (
    "ngram",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    "eagle",
    "eagle3",
    "deepseek_mtp",
    "mtp",
    "dflash",
    "ngram_gpu",
    "dspark",
)


@dataclass(frozen=True)
class Cand:
    name: str
    family: str
    method: str | None = None
    enabled: bool = True
    num_speculative_tokens: int | None = 4
    proposer: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    min_engine_version: str | None = None
    engine_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    schedule_of: str | None = None
    allow_lossy: bool = False


def caps(**changes: Any) -> VllmCapabilities:
    values: dict[str, Any] = {
        "engine_version": "0.32.0+cpu",
        "python": "/envs/vllm/bin/python",
        "device_kind": "cpu",
        "devices": (DeviceInfo(name="host RAM", memory_mb=24_000),),
        "memory_budget_mb": 22_000,
        "memory_budget_basis": "test",
        "spec_methods": METHODS,
        "mtp_methods": ("deepseek_mtp", "mtp"),
        "per_request_spec_metrics_flag": True,
        "method_hardware": {"ngram_gpu": "cuda", "dspark": "cuda"},
        "optional_modules": {"arctic_inference": False},
        "versions": {},
        "probed_in_s": 0.1,
    }
    values.update(changes)
    return VllmCapabilities(**values)


def model(**changes: Any) -> ResolvedModel:
    values: dict[str, Any] = {
        "ref": "org/target",
        "path": Path("/models/target"),
        "snapshot": "c" * 40,
        "source": "hf_cache",
        "config": {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 3, "vocab_size": 32},
        "vocab_size": 32,
        "tokenizer_sha256": "t" * 64,
        "num_params": 135_000_000,
        "num_params_source": "safetensors",
        "weights_bytes": 270_000_000,
        "has_native_mtp": False,
        "architectures": ("LlamaForCausalLM",),
        "model_type": "llama",
        "num_hidden_layers": 3,
        "hidden_size": 8,
        "dtype": "bfloat16",
    }
    values.update(changes)
    return ResolvedModel(**values)


def context(
    candidate: Any,
    target: ResolvedModel | None = None,
    capabilities: EngineCapabilities | None = None,
    *,
    probe_error: str | None = None,
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
    **engine: Any,
) -> GroupContext:
    """`candidate` on the track of `target`, under a probed engine of the kind of `capabilities`."""
    kind = capabilities.kind if capabilities is not None else "vllm"
    python = capabilities.python if capabilities is not None else "/envs/vllm/bin/python"
    return GroupContext(
        candidate=candidate,
        engine=EngineConfig(kind=kind, python=python, **engine),
        target_config=TargetConfig(model="org/target", dtype=dtype),
        target=target or model(),
        setup=EngineSetup(kind=kind, caps=capabilities, python=Path(python), probe_error=probe_error),
    )


def gather(candidate: Any, target: ResolvedModel | None = None, **kwargs: Any) -> Gathered:
    capabilities = kwargs.pop("capabilities", caps())
    home = kwargs.pop("home", None)
    ctx = context(candidate, target, capabilities, **kwargs)
    engine = SglangEngine(python=ctx.setup.python) if ctx.engine.kind == "sglang" else VllmEngine()
    return engine.admit(ctx, home=home)


def decide(candidate: Any, target: ResolvedModel | None = None, **kwargs: Any) -> AdmissionResult:
    return admit(candidate.name, candidate.family, gather(candidate, target, **kwargs).input)


def proposer_dir(tmp_path: Path, name: str, **config_changes: Any) -> str:
    root = tiny_llama(tmp_path / name, layers=2)
    config = json.loads((root / "config.json").read_text())
    config.update(config_changes)
    (root / "config.json").write_text(json.dumps(config))
    return str(root)


def test_disabled_candidate_is_skipped_without_any_lookup() -> None:
    result = decide(Cand("off", "draft_model", enabled=False, proposer="/does/not/exist"))
    assert (result.run_status, result.reason) == (RunStatus.SKIPPED, "disabled")


@pytest.mark.parametrize(
    ("candidate", "capabilities", "reason"),
    [
        (Cand("gpu-ngram", "ngram", method="ngram_gpu"), caps(), "requires_cuda"),
        (Cand("ds", "dspark"), caps(), "requires_cuda"),
        (Cand("lookahead", "ngram", method="lookahead"), caps(), "method_not_in_backend"),
        (Cand("md", "medusa"), caps(spec_methods=("ngram",)), "method_not_in_backend"),
        (Cand("new", "ngram", min_engine_version="0.33"), caps(), "engine_version_too_old"),
        (Cand("sfx", "suffix"), caps(), "suffix_needs_arctic_inference"),
        (Cand("g1.schedule", "ngram", schedule_of="g1"), caps(), "runtime_controller_not_in_backend"),
        (
            Cand("adaptive", "ngram", options={"enable_adaptive_verification": True}),
            caps(runtime_controllers=KNOWN_CONTROLLERS),
            "runtime_controller_not_for_method",
        ),
    ],
)
def test_backend_gate_reasons(candidate: Cand, capabilities: VllmCapabilities, reason: str) -> None:
    result = decide(candidate, capabilities=capabilities)
    assert result.run_status is RunStatus.UNSUPPORTED
    assert result.gate == "backend"
    assert result.reason == reason
    assert result.facts["backend.engine_version"] == "0.32.0+cpu"


def test_a_schedule_candidate_runs_where_the_probe_found_the_batch_size_schedule() -> None:
    found = caps(runtime_controllers=KNOWN_CONTROLLERS, device_kind="cpu")
    result = decide(Cand("g1.schedule", "ngram", schedule_of="g1"), capabilities=found)
    assert result.run_status is RunStatus.RUNNABLE
    assert result.facts["backend.runtime_controller"] == "batch_size_schedule"


def test_a_schedule_is_refused_for_a_fixed_length_proposer_and_above_one_data_parallel_rank() -> None:
    found = caps(runtime_controllers=KNOWN_CONTROLLERS, device_kind="cpu", optional_modules={"arctic_inference": True})
    suffix = decide(Cand("g1.schedule", "suffix", schedule_of="g1"), capabilities=found)
    assert (suffix.run_status, suffix.reason) == (RunStatus.UNSUPPORTED, "runtime_controller_not_for_method")
    assert "suffix" in str(suffix.facts["backend.controller_excluded_methods"])
    on_two = decide(Cand("g1.schedule", "ngram", schedule_of="g1"), capabilities=found, data_parallel_size=2)
    assert on_two.reason == "runtime_controller_not_with_data_parallel"
    assert on_two.facts["backend.data_parallel_size"] == 2


def test_backend_facts_and_passing_cases() -> None:
    sfx = decide(Cand("sfx", "suffix"))
    assert sfx.facts["backend.install_command"] == (
        "/envs/vllm/bin/python -m pip install nanobind==2.9.2 'cmake>=3.18' && "
        "CMAKE_ARGS=-DPython_EXECUTABLE=/envs/vllm/bin/python /envs/vllm/bin/python -m pip install "
        "--no-build-isolation --no-deps arctic-inference==0.1.1"
    )
    ok = decide(Cand("sfx", "suffix"), capabilities=caps(optional_modules={"arctic_inference": True}))
    assert ok.run_status is RunStatus.RUNNABLE
    assert decide(Cand("same", "ngram", min_engine_version="0.32.0")).run_status is RunStatus.RUNNABLE  # +cpu ignored
    gpu = caps(
        device_kind="cuda", devices=(DeviceInfo(name="A10G", memory_mb=23_000, index=0),), memory_budget_mb=23_000
    )
    assert decide(Cand("g", "ngram", method="ngram_gpu"), capabilities=gpu).run_status is RunStatus.RUNNABLE


def test_a_failed_probe_refuses_every_candidate_with_its_error() -> None:
    failed = decide(Cand("n", "ngram"), capabilities=None, probe_error="engine probe failed (exit 1)")
    assert (failed.run_status, failed.reason) == (RunStatus.UNSUPPORTED, "backend_probe_failed")
    assert failed.facts["backend.probe_error"] == "engine probe failed (exit 1)"


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        (Cand("e3", "eagle", method="eagle3"), "proposer_not_given"),
        (Cand("e", "eagle"), "proposer_not_given"),
        (Cand("df", "dflash"), "proposer_not_given"),
        (Cand("mtp", "mtp"), "no_native_mtp"),
        (Cand("dm", "draft_model", proposer="/no/such/draft"), "proposer_not_found"),
        (Cand("hub", "eagle", proposer="nobody/no-such-eagle-head"), "proposer_not_found"),
    ],
)
def test_asset_gate_reasons(candidate: Cand, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    result = decide(candidate)
    assert (result.run_status, result.gate, result.reason) == (RunStatus.ASSET_MISSING, "asset", reason)


def test_native_mtp_and_target_shipped_dspark_pass_the_asset_gate() -> None:
    mtp_target = model(has_native_mtp=True, model_type="deepseek_v3")
    result = decide(Cand("mtp", "mtp"), mtp_target)
    assert result.run_status is RunStatus.RUNNABLE
    gpu = caps(device_kind="cuda", memory_budget_mb=80_000)
    dspark_target = model(model_type="deepseek_v41")
    assert decide(Cand("ds", "dspark"), dspark_target, capabilities=gpu).facts["asset.proposer_source"] == (
        "target_checkpoint"
    )


def test_draft_model_resolves_and_records_the_proposer(tmp_path: Path) -> None:
    draft = proposer_dir(tmp_path, "draft")
    target = model(tokenizer_sha256=None)
    gathered = gather(Cand("dm", "draft_model", proposer=draft), target, home=tmp_path / "home")
    result = admit("dm", "draft_model", gathered.input)
    assert result.run_status is RunStatus.RUNNABLE
    assert gathered.method == "draft_model"
    assert gathered.proposer is not None
    assert result.facts["asset.proposer_path"] == str(gathered.proposer.path)
    assert result.facts["asset.proposer_source"] == "local_dir"


def test_vocab_and_tokenizer_mismatch(tmp_path: Path) -> None:
    other_vocab = proposer_dir(tmp_path, "v", vocab_size=64)
    result = decide(Cand("dm", "draft_model", proposer=other_vocab))
    assert (result.run_status, result.reason) == (RunStatus.INCOMPATIBLE, "vocab_size_mismatch")
    assert result.facts["compatibility.proposer_vocab_size"] == 64
    hetero = Cand("dm", "draft_model", proposer=other_vocab, options={"use_heterogeneous_vocab": True})
    assert decide(hetero).run_status is RunStatus.RUNNABLE
    same_vocab = proposer_dir(tmp_path, "t")
    tok = decide(Cand("dm", "draft_model", proposer=same_vocab))  # target tokenizer hash is "ttt..."
    assert (tok.run_status, tok.reason) == (RunStatus.INCOMPATIBLE, "tokenizer_mismatch")


@pytest.mark.parametrize(
    ("config", "mismatch"),
    [
        ({"architectures": ["Eagle3LlamaForCausalLM"], "hidden_size": 16}, "hidden_size"),
        ({"architectures": ["Eagle3LlamaForCausalLM"], "target_hidden_size": 4096}, "hidden_size"),
        ({"architectures": ["EagleLlamaForCausalLM"], "base_model_name_or_path": "org/other"}, "base_model"),
        (
            {"speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "x/y", "architectures": []}}},
            "base_model",
        ),
        (
            {"speculators_config": {"verifier": {"name_or_path": "org/target", "architectures": ["Qwen3ForCausalLM"]}}},
            "architecture",
        ),
        (
            {"architectures": ["Eagle3LlamaForCausalLM"], "eagle_aux_hidden_state_layer_ids": [1, 20]},
            "target_layer_ids",
        ),
    ],
)
def test_paired_proposer_trained_for_another_target(tmp_path: Path, config: dict[str, Any], mismatch: str) -> None:
    head = proposer_dir(tmp_path, "head", **config)
    result = decide(Cand("e3", "eagle", method="eagle3", proposer=head))
    assert (result.run_status, result.reason) == (RunStatus.INCOMPATIBLE, "proposer_target_mismatch")
    assert result.facts["compatibility.mismatch"] == mismatch


def test_eagle_generation_must_match_the_method(tmp_path: Path) -> None:
    head = proposer_dir(tmp_path, "head", architectures=["Eagle3LlamaForCausalLM"], base_model="org/target")
    wrong = decide(Cand("e", "eagle", proposer=head))
    assert (wrong.run_status, wrong.reason) == (RunStatus.INCOMPATIBLE, "proposer_method_mismatch")
    assert wrong.facts["compatibility.fix"] == "set method = 'eagle3'"
    right = decide(Cand("e3", "eagle", method="eagle3", proposer=head))
    assert right.run_status is RunStatus.RUNNABLE


def test_memory_over_budget_and_its_facts() -> None:
    huge = model(num_params=70_000_000_000)
    result = decide(Cand("n", "ngram"), huge)
    assert (result.run_status, result.reason) == (RunStatus.CAPACITY_BLOCKED, "memory_over_budget")
    assert result.facts["capacity.estimated_memory_mb"] > result.facts["capacity.budget_mb"]
    assert result.facts["capacity.kv_cache_source"] == "default"
    fits = decide(Cand("n", "ngram"))
    assert fits.run_status is RunStatus.RUNNABLE
    expected = 135_000_000 * 2 / 2**20 + 4 * 1024 + CPU_RUNTIME_OVERHEAD_MB
    assert fits.facts["capacity.estimated_memory_mb"] == pytest.approx(expected, abs=0.1)


def test_kv_cache_setting_and_dtype_change_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    result = decide(Cand("n", "ngram"), dtype="float32", env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    assert result.facts["capacity.kv_cache_mb"] == 2048
    assert result.facts["capacity.kv_cache_source"] == "VLLM_CPU_KVCACHE_SPACE"
    assert result.facts["capacity.target_weights_mb"] == pytest.approx(135_000_000 * 4 / 2**20, abs=0.1)
    blocked = decide(Cand("n", "ngram"), env={"VLLM_CPU_KVCACHE_SPACE": "40"})
    assert blocked.reason == "memory_over_budget"


def test_gpu_estimate_splits_weights_across_devices() -> None:
    target = model(num_params=40_000_000_000)  # 80 GB of bf16 weights
    one = estimate_memory(target, None, MemoryTerms(device_kind="cuda", budget_mb=81_920))
    assert one.fits is False
    split = estimate_memory(target, None, MemoryTerms(device_kind="cuda", budget_mb=81_920, tensor_parallel_size=2))
    assert split.fits is True
    assert split.parallel_devices == 2
    args = ["--gpu-memory-utilization", "0.5", "--kv-cache-memory-bytes=1e9"]
    assert memory_flags(args, "--gpu-memory-utilization", "--kv-cache-memory-bytes") == (0.5, 1_000_000_000)


def test_refusals_are_fast_with_real_plan_candidates() -> None:
    candidates = [
        Candidate(name="e3", family="EAGLE-3", method="eagle3"),
        Candidate(name="mtp", family="mtp"),
        Candidate(name="df", family="dflash"),
        Candidate(name="ds", family="dspark"),
        Candidate(name="gpu", family="ngram", method="ngram_gpu"),
    ]
    started = time.monotonic()
    results = [decide(c) for c in candidates]
    assert time.monotonic() - started < 1.0
    assert [r.run_status for r in results] == [
        RunStatus.ASSET_MISSING,
        RunStatus.ASSET_MISSING,
        RunStatus.ASSET_MISSING,
        RunStatus.UNSUPPORTED,
        RunStatus.UNSUPPORTED,
    ]


def test_capacity_check_alone_serves_the_baseline() -> None:
    baseline = Candidate(name="g0_target_only")
    terms = VllmEngine().capacity_terms(context(baseline, capabilities=caps()), None)
    assert capacity_check(model(), None, terms).passed
    assert capacity_check(model(num_params=70_000_000_000), None, terms).reason == "memory_over_budget"


def sglang(
    device_kind: Literal["cpu", "cuda"] = "cuda",
    algorithms: tuple[str, ...] = ("NGRAM", "EAGLE", "EAGLE3", "STANDALONE"),
) -> SglangCapabilities:
    methods = supported_methods(algorithms)
    gpus = (DeviceInfo(name="H100", memory_mb=81_920, index=0),) if device_kind == "cuda" else ()
    return SglangCapabilities(
        engine_version="0.5.4",
        python="/envs/sglang/bin/python",
        device_kind=device_kind,
        devices=gpus or (DeviceInfo(name="host RAM", memory_mb=24_000),),
        memory_budget_mb=81_920 if gpus else 22_000,
        memory_budget_basis="test",
        spec_methods=methods,
        method_hardware=dict.fromkeys(methods, "cuda"),
        versions={"sglang": "0.5.4"},
        speculative_algorithms=algorithms,
        algorithm_source="registry",
        speculative_flags=(),
        launch_flags={},
        server_endpoints=(),
        probed_in_s=0.0,
    )


@pytest.mark.parametrize(
    ("candidate", "device", "reason"),
    [
        (Cand("sfx", "suffix"), "cuda", "family_not_in_engine"),
        (Cand("md", "medusa", proposer="/m"), "cuda", "family_not_in_engine"),
        (Cand("df", "dflash", proposer="/d"), "cuda", "method_not_in_backend"),
        (Cand("ng", "ngram"), "cpu", "requires_cuda"),
        (Cand("new", "ngram", min_engine_version="0.6"), "cuda", "engine_version_too_old"),
    ],
)
def test_sglang_candidates_use_the_sglang_backend_gate(
    candidate: Cand, device: Literal["cpu", "cuda"], reason: str
) -> None:
    result = decide(candidate, capabilities=sglang(device))
    assert (result.run_status, result.gate, result.reason) == (RunStatus.UNSUPPORTED, "backend", reason)
    assert result.facts["backend.engine_kind"] == "sglang"


def test_sglang_default_methods_and_a_runnable_candidate(tmp_path: Path) -> None:
    assert [sglang_method(f, None) for f in ("draft_model", "mtp", "eagle", "suffix")] == [
        "draft_model",
        "mtp",
        "eagle",
        "suffix",
    ]
    assert sglang_method("draft_model", "Standalone") == "standalone"
    draft = proposer_dir(tmp_path, "draft")
    gathered = gather(Cand("dm", "draft_model", proposer=draft), model(tokenizer_sha256=None), capabilities=sglang())
    result = admit("dm", "draft_model", gathered.input)
    assert result.run_status is RunStatus.RUNNABLE and gathered.method == "draft_model"
    assert result.facts["backend.sglang_algorithm"] == "STANDALONE"
    # SGLang's own default fraction for a standalone draft on an 80 GiB GPU, drafted at the target's TP.
    assert result.facts["capacity.memory_utilization_source"] == "sglang_default"
    assert result.facts["capacity.memory_utilization"] == 0.761
    assert result.facts["capacity.draft_tensor_parallel_size"] == 1


def test_sglang_standalone_gets_the_draft_model_tokenizer_check(tmp_path: Path) -> None:
    draft = proposer_dir(tmp_path, "draft")
    result = decide(Cand("sa", "draft_model", method="standalone", proposer=draft), capabilities=sglang())
    assert (result.run_status, result.reason) == (RunStatus.INCOMPATIBLE, "tokenizer_mismatch")


def test_draft_tensor_parallel_size_of_a_vllm_candidate(tmp_path: Path) -> None:
    gpus = tuple(DeviceInfo(name="A10G", memory_mb=23_000, index=i) for i in range(2))
    gpu = caps(device_kind="cuda", devices=gpus, memory_budget_mb=23_000)
    target = model(tokenizer_sha256=None)
    draft = proposer_dir(tmp_path, "draft")

    def draft_tp(candidate: Cand) -> Any:
        result = decide(candidate, target, capabilities=gpu, tensor_parallel_size=2)
        assert result.run_status is RunStatus.RUNNABLE, result.reason
        return result.facts["capacity.draft_tensor_parallel_size"]

    assert draft_tp(Cand("dm", "draft_model", proposer=draft)) == 2  # vLLM's default: the target's TP
    assert draft_tp(Cand("dm", "draft_model", proposer=draft, options={"draft_tensor_parallel_size": 1})) == 1
    speculator = proposer_dir(
        tmp_path, "mlp", model_type="mlp_speculator", architectures=["MLPSpeculatorPreTrainedModel"]
    )
    assert draft_tp(Cand("mlp", "mlp_speculator", proposer=speculator)) == 1  # vLLM drafts MLPSpeculator at TP 1


def test_engine_args_values_are_checked() -> None:
    vllm_flags = ("--gpu-memory-utilization", "--kv-cache-memory-bytes")
    assert memory_flags(["--kv-cache-memory-bytes", "4G"], *vllm_flags) == (None, 4 * 2**30)
    assert memory_flags(["--kv-cache-memory-bytes=2k"], *vllm_flags) == (None, 2000)
    assert memory_flags(["--mem-fraction-static", "0.8"], "--mem-fraction-static") == (0.8, None)
    for args in (
        ["--gpu-memory-utilization", "lots"],
        ["--gpu-memory-utilization=0"],
        ["--kv-cache-memory-bytes", "-1"],
        ["--kv-cache-memory-bytes", "inf"],
    ):
        with pytest.raises(ConfigError, match="is not a number"):
            memory_flags(args, *vllm_flags)


def test_the_plan_parallel_sizes_reach_the_capacity_gate() -> None:
    gpus = tuple(DeviceInfo(name="A10G", memory_mb=23_000, index=i) for i in range(2))
    gpu = caps(device_kind="cuda", devices=gpus, memory_budget_mb=23_000)
    result = decide(Cand("n", "ngram"), capabilities=gpu, data_parallel_size=3)
    assert (result.reason, result.facts["capacity.devices_needed"]) == ("too_few_devices", 3)


def test_an_option_key_the_installed_vllm_lacks_is_incompatible_with_a_close_match() -> None:
    read = caps(
        speculative_config_keys=("method", "num_speculative_tokens", "prompt_lookup_max", "kv_cache_dtype"),
        speculative_config_keys_source="engine_source",
    )
    typo = decide(Cand("ng", "ngram", options={"prompt_lookup_mx": 4}), capabilities=read)
    assert (typo.run_status, typo.gate, typo.reason) == (
        RunStatus.INCOMPATIBLE,
        "compatibility",
        "unknown_speculative_option",
    )
    assert typo.facts["compatibility.did_you_mean"] == "prompt_lookup_max"
    assert typo.facts["compatibility.option_keys_source"] == "engine_source"
    fine = decide(Cand("ng", "ngram", options={"kv_cache_dtype": "auto"}), capabilities=read)
    assert fine.run_status is RunStatus.RUNNABLE
    assert fine.facts["compatibility.option_keys_source"] == "engine_source"
    # The same key under an engine whose keys could not be read: the hand-kept list decides, and says so.
    fallback = decide(Cand("ng", "ngram", options={"prompt_lookup_mx": 4}))
    assert fallback.facts["compatibility.option_keys_source"] == "fallback_list"


def test_the_audit_says_when_option_keys_come_from_the_fallback_list() -> None:
    plan = load_plan("builtin:cpu-smoke").plan
    fallback = EngineSetup(kind="vllm", caps=caps(speculative_config_keys_source="fallback_list"))
    assert "option_keys_fallback" in [code for _, code, _ in VllmEngine().audit(plan, fallback)]
    read = EngineSetup(kind="vllm", caps=caps(speculative_config_keys_source="engine_source"))
    assert "option_keys_fallback" not in [code for _, code, _ in VllmEngine().audit(plan, read)]


def test_a_lossy_verification_setting_is_refused_unless_the_candidate_opts_in() -> None:
    synthetic = {"prompt_lookup_max": 4, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}
    refused = decide(Cand("syn", "ngram", options=synthetic))
    assert (refused.run_status, refused.gate, refused.reason) == (
        RunStatus.INCOMPATIBLE,
        "compatibility",
        "lossy_verification_not_allowed",
    )
    assert refused.lossy is not None and "synthetic" in refused.lossy
    assert "allow_lossy = true" in str(refused.detail)
    admitted = decide(Cand("syn", "ngram", options=synthetic, allow_lossy=True))
    assert admitted.run_status is RunStatus.RUNNABLE
    assert admitted.lossy == refused.lossy
    assert admitted.facts["compatibility.lossy_option"] == "rejection_sample_method"
    assert admitted.explained.startswith("admitted (lossy: rejection_sample_method 'synthetic'")
    # vLLM 0.32's CPU kernels assert synthetic mode off: the server would start, then die at the first request.
    on_cpu = decide(
        Cand("syn", "ngram", options=synthetic, allow_lossy=True), capabilities=caps(synthetic_rejection_on_cpu=False)
    )
    assert (on_cpu.run_status, on_cpu.reason) == (RunStatus.UNSUPPORTED, "requires_cuda")
    assert on_cpu.facts["backend.option"] == "rejection_sample_method"
    # Block verification keeps the target's outputs: exact, so nothing is marked.
    block = decide(Cand("blk", "ngram", options={"rejection_sample_method": "block"}))
    assert block.run_status is RunStatus.RUNNABLE and block.lossy is None


def test_sglang_relaxed_accept_thresholds_are_lossy() -> None:
    assert lossy_verification({"accept_threshold_single": 0.8})[0] == "accept_threshold_single"  # type: ignore[index]
    assert lossy_verification({"speculative_accept_threshold_acc": 0.5}) is not None
    assert lossy_verification({"accept_threshold_single": 1.0, "accept_threshold_acc": 1}) is None
