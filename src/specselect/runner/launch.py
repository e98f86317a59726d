"""A launched group: build the launch spec, start the server, measure every scenario, stop it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from specselect.admission.capacity import Capabilities
from specselect.admission.gather import Gathered
from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import LaunchRecord
from specselect.assets.memory import DEFAULT_CPU_KVCACHE_GIB
from specselect.assets.refs import ResolvedModel
from specselect.engines.base import LaunchSpec, RunningServer, SanityResult
from specselect.engines.openai.engine import OpenAIEndpointEngine
from specselect.engines.registry import get_engine
from specselect.engines.server import ServerProcess
from specselect.engines.telemetry import MetricsSnapshot, SpecDecodeCounters, spec_decode_delta
from specselect.engines.vllm.envsetup import EngineEnv
from specselect.engines.vllm.specconfig import build_speculative_config
from specselect.errors import ConfigError
from specselect.measure.types import Endpoint
from specselect.plan import Candidate, EngineConfig, LoadedPlan, TargetConfig
from specselect.runner.scenario import Serving

__all__ = [
    "LaunchingEngine",
    "build_launch_spec",
    "launch_record",
    "make_engine",
    "served_model_name",
    "serving_of",
]


@runtime_checkable
class LaunchingEngine(Protocol):
    """What the runner needs from an engine that starts servers (vLLM; SGLang through the registry).

    An engine may also offer `spec_counters(before, after, served_model) -> SpecDecodeCounters` to read its
    own acceptance counters; without it vLLM's counter names are read.
    """

    def launch(self, spec: LaunchSpec) -> ServerProcess: ...
    def snapshot(self, server: RunningServer) -> MetricsSnapshot: ...
    def sanity(self, server: RunningServer) -> SanityResult: ...


def make_engine(eng: EngineConfig, env: EngineEnv | None) -> LaunchingEngine | OpenAIEndpointEngine:
    """The engine of the plan's kind from the registry (vLLM built on the environment preflight found)."""
    factory = get_engine(eng.kind)
    if eng.kind == "openai":
        return OpenAIEndpointEngine()
    if eng.kind == "vllm":
        engine = factory(env=env) if env is not None else factory(command=eng.command)
    else:
        engine = factory(python=eng.python, command=eng.command)
    if not isinstance(engine, LaunchingEngine):
        raise ConfigError(
            f"engine kind {eng.kind!r} cannot launch servers for specselect (no launch/snapshot/sanity)",
            location="engine.kind",
            fix="use an engine kind that launches servers, or kind = 'openai' for servers you run",
        )
    return engine


def served_model_name(target: ResolvedModel) -> str:
    """One served name for every group of a track, so requests are identical across its groups."""
    ref = target.ref.removeprefix("builtin:")
    return Path(ref).name or "target"


def _server_env(loaded: LoadedPlan, cand: Candidate, caps: Capabilities | None) -> dict[str, str]:
    env = {**loaded.plan.engine.env, **cand.env}
    cpu = caps is not None and caps.device_kind == "cpu"
    if cpu and "VLLM_CPU_KVCACHE_SPACE" not in env and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        # Unset, vLLM 0.32 on CPU tries to reserve 92% of RAM and refuses to start; admission assumed this.
        env["VLLM_CPU_KVCACHE_SPACE"] = str(DEFAULT_CPU_KVCACHE_GIB)
    return env


def _speculative_config(loaded: LoadedPlan, cand: Candidate, gathered: Gathered | None) -> dict[str, object] | None:
    if cand.is_baseline:
        return None
    proposer = gathered.proposer.path if gathered and gathered.proposer else None
    return build_speculative_config(
        cand.family,
        gathered.method if gathered else cand.method,
        cand.num_speculative_tokens,
        proposer,
        cand.options,
        location=f"{loaded.source}: candidates.{cand.name}",
        tensor_parallel_size=loaded.plan.engine.tensor_parallel_size,
    )


def build_launch_spec(
    loaded: LoadedPlan,
    cand: Candidate,
    gathered: Gathered | None,
    *,
    target: ResolvedModel,
    target_config: TargetConfig,
    caps: Capabilities | None,
    layout: RunLayout,
) -> LaunchSpec:
    """The launch spec of one group on its track's target (ConfigError for an impossible speculative config)."""
    eng = loaded.plan.engine
    spec_config = _speculative_config(loaded, cand, gathered)
    return LaunchSpec(
        group=cand.name,
        model_path=target.path,
        served_model_name=served_model_name(target),
        dtype=target_config.dtype,
        max_model_len=target_config.max_model_len,
        engine_args=(*eng.args, *cand.engine_args),
        tensor_parallel_size=eng.tensor_parallel_size,
        pipeline_parallel_size=eng.pipeline_parallel_size,
        data_parallel_size=eng.data_parallel_size,
        distributed_executor_backend=eng.distributed_executor_backend,
        env=_server_env(loaded, cand, caps),
        host=eng.host,
        port=eng.port,
        speculative_config=spec_config,
        per_request_spec_metrics=bool(spec_config) and bool(caps and caps.per_request_spec_metrics_flag),
        disable_prefix_caching=loaded.plan.run.prefix_cache == "disabled",
        api_key_env=eng.api_key_env,
        startup_timeout_s=eng.startup_timeout_s,
        log_path=layout.group_log(cand.name),
        run_dir=layout.work_dir / cand.name,
    )


def launch_record(server: RunningServer) -> LaunchRecord:
    """How the group's server was started (secrets already redacted by the server layer)."""
    return LaunchRecord(
        command=server.command,
        speculative_config=server.spec_config,
        served_model=server.served_model,
        base_url=server.base_url,
        startup_s=server.startup_s,
    )


def serving_of(engine: LaunchingEngine, proc: ServerProcess, server: RunningServer) -> Serving:
    """A launched server as the measuring code sees it (process memory sampled, no traffic check)."""
    reader: Callable[[MetricsSnapshot, MetricsSnapshot, str], SpecDecodeCounters] = getattr(
        engine, "spec_counters", spec_decode_delta
    )
    return Serving(
        endpoint=Endpoint(base_url=server.base_url, model=server.served_model, api_key_env=server.api_key_env),
        snapshot=lambda: engine.snapshot(server),
        spec_counters=lambda before, after: reader(before, after, server.served_model),
        check_alive=proc.raise_if_dead,
        log_location=str(server.log_path),
        log_tail=proc.log_tail,
        pid=server.pid,
    )
