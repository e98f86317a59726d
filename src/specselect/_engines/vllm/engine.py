"""The vLLM engine: starts OpenAI-compatible vLLM servers and reads their telemetry."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specselect._admission.capacity import CapacityTerms
from specselect._admission.gather import Gathered, Resolving, disabled, gather_admission
from specselect._assets.memory_estimate import DEFAULT_CPU_KVCACHE_GIB, GPU_RUNTIME_OVERHEAD_MB, MemoryTerms
from specselect._common.home import default_home
from specselect._engines.base import (
    USAGE_SCRAPE_TIMEOUT_S,
    EngineSetup,
    Finding,
    GroupContext,
    GroupIdentity,
    LaunchSpec,
    ProgressFn,
    Proposal,
    RunningServer,
    ServeOptions,
)
from specselect._engines.container import (
    ContainerCommand,
    container_deploy,
    container_launch,
    container_name,
    parse_container_command,
)
from specselect._engines.devices import group_budget_mb, visible_setting
from specselect._engines.http import sanity_check, server_api_key, server_get
from specselect._engines.launchargs import launch_api_key, python_or_command, server_options
from specselect._engines.launching import (
    LaunchedServing,
    controller_refusal,
    deploy_spec,
    group_devices,
    group_launch_spec,
    launched_identity,
    launcher_findings,
    lossy_plan_problems,
    nvml_ids,
    probe_failed,
    require_target,
    serve_flags_of,
)
from specselect._engines.probecommand import command_probe_runner
from specselect._engines.prometheus import MetricsSnapshot, parse_metrics_named, parse_prometheus
from specselect._engines.server import ServerProcess
from specselect._engines.settings import EngineSettings, group_settings
from specselect._engines.vllm import capacity as kv
from specselect._engines.vllm.controllers import BATCH_SCHEDULE_KEY
from specselect._engines.vllm.cpuruntime import PRELOAD_BY_DEFAULT, cpu_preload, ensure_intel_openmp, preload_findings
from specselect._engines.vllm.envsetup import EngineEnv, engine_env_from_python, ensure_managed_vllm_env
from specselect._engines.vllm.gate import backend_gate, engine_config_keys, options_gate, vllm_method
from specselect._engines.vllm.gpu_audit import cuda_findings, drafter_room_findings, plan_sizer
from specselect._engines.vllm.launch import VLLM_DEPLOY_PROGRAM, build_vllm_argv
from specselect._engines.vllm.probe import probe_vllm, probe_vllm_command
from specselect._engines.vllm.sharedcache import launch_cache_key, share_compile_cache, share_model_class_cache
from specselect._engines.vllm.specconfig import (
    build_speculative_config,
    lossy_verification,
    option_problem,
    response_cache_setting,
)
from specselect._engines.vllm.startuplog import read_startup
from specselect._engines.vllm.suffixsetup import read_suffix_setup
from specselect._engines.vllm.telemetry import request_spec_metrics, spec_decode_delta
from specselect._plan import EngineConfig, Plan
from specselect.errors import ConfigError, EngineSetupError, ProtocolError
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import EngineCapabilities, VllmCapabilities
from specselect.records.capacity import KvCapacity
from specselect.records.proposals import ScheduleRange
from specselect.records.server import SanityResult, ServeFlags
from specselect.records.telemetry import RequestSpecMetrics, SpecDecodeCounters

__all__ = ["BATCH_SCHEDULE_KEY", "VllmEngine"]

# Set for every vLLM server: no usage reporting from a measurement run.
_VLLM_ENV = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}
_KVCACHE_VAR = "VLLM_CPU_KVCACHE_SPACE"
_CPU_DEFAULT_ENV = {
    # Unset, vLLM 0.32 on CPU tries to reserve 92% of RAM and refuses to start; admission assumed this.
    _KVCACHE_VAR: str(DEFAULT_CPU_KVCACHE_GIB),
    # The model worker inside the engine-core process instead of a third process: on 2 cores that process's
    # message-queue polling competed with decoding. SmolLM2 float32 eager, 2-core AVX2 (2026-12-02): start-up
    # 32-35 s instead of 44-50 s, decode 11-13 tokens/s instead of 8-10, outputs token for token the same
    # (baseline, n-gram and draft model). Qwen2.5-Coder-1.5B float32 eager, same machine: start-up 66 s instead of
    # 103-110 s, decode 1.85-2.04 tokens/s instead of 1.09-1.41.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}
"""Set for a server on CPU unless the plan, the candidate or specselect's own environment sets the variable."""
_PRELOAD_VAR = "LD_PRELOAD"
_BEYOND = 1 << 20
"""Upper end of a schedule's last range (vLLM clips it to its own max batch size)."""


class VllmEngine:
    """Engine kind "vllm": `vllm serve` (as `python -m vllm.entrypoints.cli.main serve`), or a user's command prefix
    (`vllm serve`, a wrapper, a container's `docker run ... IMAGE`: see `engines.container`)."""

    kind = "vllm"
    launches_servers = True

    def __init__(
        self,
        python: str | Path | None = None,
        *,
        command: Sequence[str] | None = None,
        env: EngineEnv | None = None,
        term_grace_s: float = 30.0,
        poll_interval_s: float = 0.5,
    ) -> None:
        if python is None and env is not None:
            python = env.python
        self._python = Path(python) if python is not None else None
        self._command = tuple(command) if command else None
        self._env = env
        self._term_grace_s = term_grace_s
        self._poll_interval_s = poll_interval_s

    @classmethod
    def from_config(cls, config: EngineConfig) -> VllmEngine:
        """The engine a plan's `[engine]` names (a managed environment is located by `prepare`)."""
        managed = config.python is not None and config.python.startswith("managed:")
        python = None if managed or config.python is None else Path(config.python).expanduser()
        return cls(python, command=config.command)

    # -- preflight ----------------------------------------------------------------------------------------

    def _environment(self, config: EngineConfig, home: Path | None, progress: ProgressFn) -> EngineEnv | None:
        if self._env is not None:
            return self._env
        if config.python is not None and config.python.startswith("managed:"):
            progress("engine environment: managed CPU vLLM (installed on first use, ~2 min)")
            env = ensure_managed_vllm_env(home, progress=progress)
            if env.root is not None:
                ensure_intel_openmp(env, env.root.parent / f"{env.root.name}.install.log")
            return env
        if self._python is not None:
            return engine_env_from_python(self._python)
        return None

    def prepare(self, plan: Plan, *, home: Path | None, progress: ProgressFn) -> EngineSetup:
        """Install (managed) or locate the vLLM environment, then probe it without starting a server (behind a
        command: through that command's python, see `engines.probecommand`)."""
        env = self._environment(plan.engine, home, progress)
        if env is None:
            return self._prepare_command(plan, home=home, progress=progress)
        try:
            caps = probe_vllm(
                env, cache_dir=(home / "cache" / "probe") if home else None, visible=visible_setting(plan.engine.env)
            )
        except EngineSetupError as exc:
            return EngineSetup(kind=self.kind, python=env.python, probe_error=exc.one_line())
        suffix = read_suffix_setup(env.root) if env.managed and env.root is not None else None
        if suffix is not None:
            caps = caps.model_copy(update={"optional_module_setup": {"arctic_inference": suffix.line()}})
        return EngineSetup(
            kind=self.kind,
            caps=caps,
            python=env.python,
            engine_version=caps.engine_version,
            shared_cache=(home or default_home()) / "cache" / "vllm",
        )

    def _prepare_command(self, plan: Plan, *, home: Path | None, progress: ProgressFn) -> EngineSetup:
        cache_dir = (home or default_home()) / "cache" / "probe"
        try:
            runner = command_probe_runner(plan.engine, progress)
            progress(f"probing the engine behind engine.command: {' '.join(runner[:8])} ...")
            caps = probe_vllm_command(runner, cache_dir, visible=visible_setting(plan.engine.env))
        except (EngineSetupError, ConfigError) as exc:
            return EngineSetup(kind=self.kind, probe_error=exc.one_line())
        return EngineSetup(kind=self.kind, caps=caps, engine_version=caps.engine_version)

    def probe(self, cache_dir: Path | None = None) -> VllmCapabilities:
        """What this vLLM installation supports (read from its files; no server is started)."""
        env = self._env
        if env is None:
            if self._python is None:
                raise ConfigError(
                    "cannot probe vLLM behind a custom command here",
                    location="engine.command",
                    fix="run the preflight (it probes through the command) or give the engine python",
                )
            env = engine_env_from_python(self._python)
        return probe_vllm(env, cache_dir=cache_dir)

    def plan_problems(self, plan: Plan) -> list[str]:
        """Option keys that are wrong for any vLLM: reserved, another method's, or a near miss of a known key
        (`prompt_lookup_mx`). A key no vLLM 0.32 has and nothing resembles is left to the probe of the installed
        engine, which may be newer."""
        problems: list[str] = []
        try:
            parse_container_command(plan.engine.command)
        except ConfigError as exc:
            problems.append(exc.one_line())
        for cand in plan.candidates:
            if cand.is_baseline:
                continue
            method = vllm_method(cand.family, cand.method)
            for key in cand.options:
                problem = option_problem(method, key)
                if problem is not None and (problem.reason != "unknown_speculative_option" or problem.did_you_mean):
                    problems.append(f"{cand.option_location(key)}: {problem.message} (fix: {problem.fix})")
        problems += lossy_plan_problems(plan, lossy_verification)
        return list(dict.fromkeys(problems))  # a sweep's sub-candidates share their entry's mistakes

    def audit(self, plan: Plan, setup: EngineSetup) -> list[Finding]:
        """Launcher findings, the fallback list of option keys when the probe read none, bfloat16 in eager mode on
        CPU (it changes outputs under verification), and on CUDA what measures the wrong thing (`gpu_audit`)."""
        found = launcher_findings(plan, setup)
        caps = setup.caps
        if isinstance(caps, VllmCapabilities) and caps.speculative_config_keys_source == "fallback_list":
            found.append(
                (
                    "warning",
                    "option_keys_fallback",
                    "the installed vLLM's SpeculativeConfig keys could not be read: candidate options are checked "
                    "against specselect's list of vLLM 0.32's keys instead",
                )
            )
        eager = "--enforce-eager" in plan.engine.args
        if setup.caps is not None and setup.caps.on_cpu and eager and plan.target.dtype in ("bfloat16", "auto"):
            found.append(
                (
                    "warning",
                    "cpu_bf16_eager_parity",
                    "bfloat16 in eager mode on CPU changes outputs under batched verification: "
                    'use dtype = "float32" for exact parity',
                )
            )
        if setup.caps is not None and setup.caps.on_cpu and setup.python is not None and not self._command:
            found.extend(preload_findings(_env_root(setup.python)))
        sizer = plan_sizer()
        return [
            *found,
            *cuda_findings(plan, setup, sizer),
            *drafter_room_findings(plan, setup, sizer, self.capacity_terms),
        ]

    # -- admission ----------------------------------------------------------------------------------------

    def admit(self, ctx: GroupContext, *, home: Path | None) -> Gathered:
        """vLLM's backend gate, then the shared asset, compatibility (with vLLM's option-key check) and capacity
        gates."""
        cand = ctx.candidate
        method = vllm_method(cand.family, cand.method)
        if not cand.enabled:
            return disabled(method)
        caps = ctx.setup.caps
        dp = ctx.engine.data_parallel_size
        backend = (
            probe_failed(method, ctx.setup) if caps is None else backend_gate(method, cand, caps, data_parallel_size=dp)
        )
        return gather_admission(
            cand,
            require_target(ctx),
            method=method,
            backend=backend,
            options=options_gate(method, cand, caps),
            capacity=lambda proposer: self.capacity_terms(ctx, proposer),
            resolving=Resolving(home=home, python=ctx.setup.python, verify_weights=ctx.verify_weights),
            lossy=lossy_verification(cand.options),
        )

    @staticmethod
    def _settings(ctx: GroupContext) -> EngineSettings:
        return group_settings(ctx, utilization_flag="--gpu-memory-utilization", kv_bytes_flag="--kv-cache-memory-bytes")

    def capacity_terms(self, ctx: GroupContext, proposer: ResolvedModel | None) -> CapacityTerms:
        """Where the group's server runs (its own CUDA_VISIBLE_DEVICES: GPUs or MIG instances, the smallest one's
        memory) and what vLLM takes of it (its memory share, KV cache, draft TP)."""
        caps = _caps(ctx)
        settings = self._settings(ctx)
        kv = settings.env_value(_KVCACHE_VAR)
        gpus = group_devices(ctx)
        devices = gpus or caps.devices
        return CapacityTerms(
            memory=MemoryTerms(
                device_kind=caps.device_kind,
                budget_mb=group_budget_mb(caps, ctx.candidate.env),
                dtype=settings.dtype,
                tensor_parallel_size=settings.tensor_parallel_size,
                pipeline_parallel_size=settings.pipeline_parallel_size,
                data_parallel_size=settings.data_parallel_size,
                draft_tensor_parallel_size=_draft_tensor_parallel_size(ctx.candidate.options, proposer),
                cpu_kvcache_gib=_number_or_none(kv),
                kv_cache_memory_bytes=settings.kv_cache_memory_bytes,
                gpu_memory_utilization=settings.gpu_memory_utilization if not caps.on_cpu else None,
                gpu_runtime_overhead_mb=GPU_RUNTIME_OVERHEAD_MB,
            ),
            devices_available=len(devices),
            utilization_source="engine_args" if settings.gpu_memory_utilization is not None else "vllm_default",
        )

    def identity(self, ctx: GroupContext) -> GroupIdentity:
        return launched_identity(ctx)

    # -- serving ------------------------------------------------------------------------------------------

    def speculative_config(self, ctx: GroupContext, gathered: Gathered | None) -> dict[str, Any] | None:
        """The exact `--speculative-config` of the group (None for a baseline)."""
        cand = ctx.candidate
        if cand.runs_target_only:
            return None
        return build_speculative_config(
            Proposal.of(cand, gathered),
            location=f"candidates.{cand.name}",
            tensor_parallel_size=ctx.engine.tensor_parallel_size,
            engine_keys=engine_config_keys(ctx.setup.caps),
        )

    def _server_env(self, ctx: GroupContext) -> dict[str, str]:
        env = {**ctx.engine.env, **ctx.candidate.env}
        caps = ctx.setup.caps
        if caps is not None and caps.on_cpu:
            env |= {var: value for var, value in _CPU_DEFAULT_ENV.items() if var not in env and var not in os.environ}
            python = self._python or ctx.setup.python
            preload = cpu_preload(_env_root(python)) if python is not None and not self._command else ()
            if PRELOAD_BY_DEFAULT and preload and _PRELOAD_VAR not in env and _PRELOAD_VAR not in os.environ:
                env[_PRELOAD_VAR] = ":".join(str(p) for p in preload)
        return env

    def serve(self, ctx: GroupContext, gathered: Gathered | None, options: ServeOptions) -> LaunchedServing:
        """Start the group's vLLM server (its speculative config, env and flags) for a `with` block."""
        caps = ctx.setup.caps
        config = self.speculative_config(ctx, gathered)
        spec = group_launch_spec(
            ctx,
            options,
            speculative_config=config,
            env=self._server_env(ctx),
            per_request_spec_metrics=bool(caps is not None and caps.per_request_spec_metrics_flag),
        )
        engine = self if self._python or self._command else self._bound(ctx.setup)
        key = launch_cache_key(spec, engine=engine.identity_of(ctx.setup))
        if ctx.setup.shared_cache is not None:
            share_model_class_cache(options.run_dir, ctx.setup.shared_cache)
            share_compile_cache(options.run_dir, ctx.setup.shared_cache, key)
        startup = functools.partial(read_startup, cache_key=key, preload=spec.env.get(_PRELOAD_VAR))
        cache = response_cache_setting(config, ctx.candidate.options)
        return LaunchedServing(
            engine.launch(spec), engine, devices=nvml_ids(ctx), startup=startup, response_cache=cache
        )

    def identity_of(self, setup: EngineSetup) -> str:
        """What starts the server, with the engine's version: part of a launch configuration's cache key."""
        head = " ".join(self._command) if self._command else str(self._python or setup.python)
        return f"{head} {setup.engine_version or ''}".strip()

    def _bound(self, setup: EngineSetup) -> VllmEngine:
        if setup.python is None:
            raise ConfigError("no engine python was found", location="engine.python", fix="run the preflight first")
        return VllmEngine(setup.python, term_grace_s=self._term_grace_s, poll_interval_s=self._poll_interval_s)

    def serve_flags(
        self,
        ctx: GroupContext,
        gathered: Gathered | None,
        *,
        disable_prefix_caching: bool = False,
        extra_speculative: Mapping[str, Any] | None = None,
    ) -> ServeFlags:
        """`vllm serve MODEL` with the group's flags (or the plan's command: a container's with its port published),
        as `serve` starts it but on the plan's host and port (8000 when the plan picks a free one) and without the
        per-request metrics flag."""
        config = self.speculative_config(ctx, gathered)
        if config is not None and extra_speculative:
            config = {**config, **extra_speculative}
        spec = deploy_spec(
            ctx, speculative_config=config, env=self._server_env(ctx), disable_prefix_caching=disable_prefix_caching
        )
        head = list(self._command or VLLM_DEPLOY_PROGRAM)
        container = parse_container_command(self._command)
        if container is not None:
            head, spec = container_deploy(container, spec, [*spec.env, *(["VLLM_API_KEY"] if spec.api_key_env else [])])
        argv = build_vllm_argv(spec, spec.port, command=head)
        return serve_flags_of(ctx, gathered, spec, argv, program_length=len(head), local_keys=("model",))

    def batch_schedule(self, schedule: Sequence[ScheduleRange], ctx: GroupContext) -> Mapping[str, Any] | None:
        """Dynamic speculative decoding (`num_speculative_tokens_per_batch_size`), where the probe found it and it
        runs for the group's method at its data parallel size (`controllers.KNOWN_CONTROLLERS`)."""
        caps = ctx.setup.caps
        controller = caps.controller(BATCH_SCHEDULE_KEY) if caps is not None else None
        if caps is None or controller is None or not schedule:
            return None
        method = vllm_method(ctx.candidate.family, ctx.candidate.method)
        dp = ctx.engine.data_parallel_size
        if controller_refusal(controller, method, device_kind=caps.device_kind, data_parallel_size=dp) is not None:
            return None
        return {BATCH_SCHEDULE_KEY: [[first, _BEYOND if last is None else last, k] for first, last, k in schedule]}

    # -- one server ---------------------------------------------------------------------------------------

    def argv(self, spec: LaunchSpec, port: int) -> list[str]:
        """The exact argv a launch of `spec` on `port` runs."""
        python, command = python_or_command(
            self._python,
            self._command,
            engine="vLLM",
            fix="run `specselect setup` or give the python of a venv with vllm",
        )
        container = self._container()
        if container is not None:
            head, inner = container_launch(container, spec, port, _server_env_names(spec))
            return build_vllm_argv(inner, port, command=head)
        return build_vllm_argv(spec, port, python=python, command=command)

    def _container(self) -> ContainerCommand | None:
        return parse_container_command(self._command)

    def launch(self, spec: LaunchSpec) -> ServerProcess:
        """A context manager yielding the ready server; `.release_check` holds the teardown check afterwards."""
        self.argv(spec, spec.port or 1)  # fail before spawning
        env = {**_VLLM_ENV, **spec.env}
        api_key = launch_api_key(spec)
        if api_key:
            # Through the environment, not argv, so the key never shows in `ps` or in the recorded command.
            env["VLLM_API_KEY"] = api_key
        container = self._container()
        options = server_options(
            spec,
            env=env,
            name=f"vLLM server for {spec.group}",
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
            cleanup=container.cleanup_argvs(container_name(spec.run_dir)) if container is not None else (),
        )
        return ServerProcess(lambda port: self.argv(spec, port), options)

    def scrape_metrics(self, server: RunningServer, timeout_s: float = 30.0) -> str:
        """GET /metrics as text ("" when the server has no metrics endpoint)."""
        status, body = server_get(server.base_url, "/metrics", timeout_s=timeout_s)
        if status == 404:
            return ""
        if status != 200:
            raise ProtocolError(
                f"/metrics answered HTTP {status}", location=f"{server.base_url}/metrics", fix="read the server log"
            )
        return body.decode("utf-8", errors="replace")

    def snapshot(self, server: RunningServer) -> MetricsSnapshot:
        """Scrape and parse /metrics."""
        return parse_prometheus(self.scrape_metrics(server))

    def spec_counters(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
        """vLLM's spec-decode counters over the window between two snapshots."""
        return spec_decode_delta(before, after, model_name)

    def request_spec_metrics(self, extras: Mapping[str, Any]) -> RequestSpecMetrics | None:
        """A response's per-request `metrics` object, when vLLM was asked to return it."""
        return request_spec_metrics(extras)

    def sanity(self, server: RunningServer, timeout_s: float = 120.0) -> SanityResult:
        """The served model is listed by /v1/models and one short chat completion returns text."""
        return sanity_check(server.base_url, server.served_model, api_key=server_api_key(server), timeout_s=timeout_s)

    def kv_capacity(self, server: RunningServer, log_text: str | None) -> KvCapacity | None:
        """The KV cache the start-up log states, with the blocks of `cache_config_info`."""
        return kv.kv_capacity(log_text, self.snapshot(server))

    def kv_usage(self, server: RunningServer) -> float | None:
        """The share of the KV cache in use now (the usage gauge alone is parsed)."""
        return kv.kv_usage(parse_metrics_named(self.scrape_metrics(server, USAGE_SCRAPE_TIMEOUT_S), kv.KV_USAGE_GAUGES))

    def preemptions(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> int | None:
        """Requests preempted between two scrapes."""
        return kv.preemptions(before, after, model_name)


def _server_env_names(spec: LaunchSpec) -> list[str]:
    """The variables a container server gets by name: vLLM's own, the group's, the API key's."""
    return [*_VLLM_ENV, *spec.env, *(["VLLM_API_KEY"] if spec.api_key_env else [])]


def _env_root(python: Path) -> Path:
    """The environment a python belongs to (a venv's `bin/python`, unresolved: a venv's python is a link)."""
    return Path(python).parent.parent


def _caps(ctx: GroupContext) -> EngineCapabilities:
    if ctx.setup.caps is None:
        raise ConfigError("the engine was not probed", location="engine", fix="run the preflight first")
    return ctx.setup.caps


def _number_or_none(raw: str | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _draft_tensor_parallel_size(options: Mapping[str, Any], proposer: ResolvedModel | None) -> int | None:
    """Devices the proposer is split over; None = the target's tensor parallel size."""
    given = options.get("draft_tensor_parallel_size")
    if isinstance(given, int) and not isinstance(given, bool) and given >= 1:
        return given
    # vLLM 0.32 (`SpeculativeConfig._verify_and_get_draft_tp`): unset -> the target's TP, but 1 for MLPSpeculator.
    if proposer is not None and proposer.model_type == "mlp_speculator":
        return 1
    return None
