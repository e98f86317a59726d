"""The SGLang engine: starts `python -m sglang.launch_server` servers and reads their acceptance telemetry.

Same life cycle as vLLM (`engines.server.ServerProcess`: own process group, readiness on `/health`
noticing an early exit, log file, teardown of the whole group). SGLang cannot run on CPU-only machines:
there it can be probed and its command lines built, but `launch` would fail at start-up.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, cast

from specselect._admission.capacity import CapacityTerms
from specselect._admission.gather import Gathered, Resolving, disabled, gather_admission
from specselect._assets.memory_estimate import MemoryTerms, sglang_default_mem_fraction
from specselect._common.fileio import atomic_write_bytes
from specselect._common.secrets import REDACTED, write_private_file
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
from specselect._engines.container import container_launch, container_name, parse_container_command
from specselect._engines.devices import group_budget_mb, visible_setting
from specselect._engines.http import sanity_check, server_api_key, server_get
from specselect._engines.launchargs import launch_api_key, python_or_command, server_options
from specselect._engines.launching import (
    LaunchedServing,
    controller_check,
    deploy_spec,
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
from specselect._engines.server import ServerOptions, ServerProcess
from specselect._engines.settings import group_settings
from specselect._engines.sglang import capacity as kv
from specselect._engines.sglang.gate import backend_gate, sglang_method
from specselect._engines.sglang.launch import SGLANG_SERVER_MODULE, build_sglang_argv
from specselect._engines.sglang.probe import probe_sglang
from specselect._engines.sglang.serverinfo import ServerInfoReading, ServerInfoSnapshot, parse_server_info
from specselect._engines.sglang.specargs import (
    DRAFT_PATH_KEY,
    UNO_LORA_KEY,
    build_sglang_speculative_args,
    lossy_verification,
    sglang_algorithm,
    sglang_field,
)
from specselect._engines.sglang.telemetry import (
    SglangAcceptance,
    acceptance_from_snapshots,
    acceptance_to_counters,
    to_spec_telemetry,
)
from specselect._plan import EngineConfig, Plan
from specselect.errors import ArtifactError, ConfigError, EngineSetupError, ProtocolError
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import SglangCapabilities
from specselect.records.capacity import KvCapacity
from specselect.records.proposals import ScheduleRange
from specselect.records.server import ReleaseCheck, SanityResult, ServeFlags
from specselect.records.telemetry import RequestSpecMetrics, SpecDecodeCounters, SpecTelemetry

__all__ = ["SERVER_INFO_PATHS", "SglangEngine"]

SERVER_INFO_PATHS: tuple[str, ...] = ("/server_info", "/get_server_info")
"""Newer SGLang serves `/server_info` (the old path is deprecated); older ones only `/get_server_info`."""

# A secret-looking name, so ServerProcess redacts the key's value from recorded commands and log tails.
_KEY_ENV = "SPECSELECT_SGLANG_API_KEY"
_SECRETS_FILE = ".sglang-api-key.yaml"
"""In the group's run directory while its server runs: SGLang's `--config` file holding only the API key."""


class _HasPython(Protocol):
    @property
    def python(self) -> Path: ...


class _ScrubbingServerProcess(ServerProcess):
    """A ServerProcess that hands SGLang its API key in a mode-0600 YAML file (`--config`), removes that file and
    the key from the server's log file whenever the server stops.

    SGLang logs its full `ServerArgs` at start-up, the API key included.
    """

    def __init__(
        self,
        argv_for_port: Callable[[int], Sequence[str]],
        options: ServerOptions,
        *,
        secret: str | None,
        secrets_file: Path | None,
    ) -> None:
        super().__init__(argv_for_port, options)
        self._secret = secret.encode() if secret else None
        self._secrets_file = secrets_file
        self._log = Path(options.log_path)

    def _scrub(self) -> None:
        if self._secrets_file is not None:
            with contextlib.suppress(OSError):
                self._secrets_file.unlink()
        if not self._secret:
            return
        with contextlib.suppress(OSError, ArtifactError):
            data = self._log.read_bytes()
            if self._secret in data:
                atomic_write_bytes(self._log, data.replace(self._secret, REDACTED.encode()))

    def __enter__(self) -> RunningServer:
        try:
            if self._secrets_file is not None and self._secret is not None:
                write_private_file(self._secrets_file, f"api-key: {json.dumps(self._secret.decode())}\n")
            return super().__enter__()
        except BaseException:
            self._scrub()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self._scrub()

    def stop(self) -> ReleaseCheck | None:
        try:
            return super().stop()
        finally:
            self._scrub()


class SglangEngine:
    """Engine kind "sglang": `python -m sglang.launch_server` (or a user's command prefix)."""

    kind = "sglang"
    launches_servers = True

    def __init__(
        self,
        python: str | Path | None = None,
        *,
        command: Sequence[str] | None = None,
        env: _HasPython | None = None,
        caps: SglangCapabilities | None = None,
        probe_env: Mapping[str, str] | None = None,
        term_grace_s: float = 30.0,
        poll_interval_s: float = 0.5,
        health_path: str = "/health",
    ) -> None:
        if python is None and env is not None:
            python = env.python
        self._python, self._command = python_or_command(
            python,
            command,
            engine="SGLang",
            fix="set engine.python to the python of an environment with sglang installed",
        )
        self._caps = caps
        self._probe_env = dict(probe_env or {})
        self._term_grace_s = term_grace_s
        self._poll_interval_s = poll_interval_s
        self._health_path = health_path

    @classmethod
    def from_config(cls, config: EngineConfig) -> SglangEngine:
        """The engine a plan's `[engine]` names; its probe sees the plan's engine environment (a PYTHONPATH, say)."""
        python = Path(config.python).expanduser() if config.python else None
        return cls(python, command=config.command, probe_env=config.env)

    def _bound(self, setup: EngineSetup) -> SglangEngine:
        """This engine with the probe's answers (flags, algorithms, endpoints) for checking a launch."""
        caps = setup.caps if isinstance(setup.caps, SglangCapabilities) else None
        return SglangEngine(
            self._python,
            command=self._command,
            caps=caps,
            probe_env=self._probe_env,
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
            health_path=self._health_path,
        )

    def prepare(self, plan: Plan, *, home: Path | None, progress: ProgressFn) -> EngineSetup:
        """Probe the SGLang of the plan's python, or through the plan's command (`engines.probecommand`); no server
        is started."""
        if self._python is None:
            try:
                runner = command_probe_runner(plan.engine, progress)
                self._caps = probe_sglang(
                    runner,
                    cache_dir=(home / "cache" / "probe") if home else None,
                    visible=visible_setting(plan.engine.env),
                )
            except (EngineSetupError, ConfigError) as exc:
                return EngineSetup(kind=self.kind, probe_error=exc.one_line())
            return EngineSetup(kind=self.kind, caps=self._caps, engine_version=self._caps.engine_version)
        try:
            caps = self.probe(
                cache_dir=(home / "cache" / "probe") if home else None, visible=visible_setting(plan.engine.env)
            )
        except EngineSetupError as exc:
            return EngineSetup(kind=self.kind, python=self._python, probe_error=exc.one_line())
        return EngineSetup(kind=self.kind, caps=caps, python=self._python, engine_version=caps.engine_version)

    def plan_problems(self, plan: Plan) -> list[str]:
        """A container command specselect cannot own, and lossy candidates without the plan's opt-in; arguments are
        checked against the probed version's own."""
        try:
            parse_container_command(plan.engine.command)
        except ConfigError as exc:
            return [exc.one_line()]
        return lossy_plan_problems(plan, lossy_verification)

    def audit(self, plan: Plan, setup: EngineSetup) -> list[Finding]:
        """The findings every launcher has (SGLang adds none)."""
        return launcher_findings(plan, setup)

    def admit(self, ctx: GroupContext, *, home: Path | None) -> Gathered:
        """SGLang's backend gate, then the shared asset, compatibility and capacity gates."""
        cand = ctx.candidate
        method = sglang_method(cand.family, cand.method)
        if not cand.enabled:
            return disabled(method)
        caps = ctx.setup.caps
        if not isinstance(caps, SglangCapabilities):
            backend = probe_failed(method, ctx.setup)
        else:
            backend = backend_gate(cand.family, cand.method, caps, min_engine_version=cand.min_engine_version)
            if backend.passed:
                # The controller's option is the `ServerArgs` field; plans may leave out its `speculative_` prefix.
                keys = {sglang_field(k) for k in cand.options}
                backend = controller_check(method, cand, caps, dict(backend.facts), option_keys=keys) or backend
        return gather_admission(
            cand,
            require_target(ctx),
            method=method,
            backend=backend,
            capacity=lambda proposer: self.capacity_terms(ctx, proposer),
            resolving=Resolving(home=home, python=ctx.setup.python, verify_weights=ctx.verify_weights),
            lossy=lossy_verification(cand.options),
        )

    def capacity_terms(self, ctx: GroupContext, proposer: ResolvedModel | None) -> CapacityTerms:
        """SGLang's share of each GPU (`--mem-fraction-static`, else SGLang's own default for the algorithm);
        the draft runs at the target's tensor parallel size."""
        caps = cast(SglangCapabilities, ctx.setup.caps)
        settings = group_settings(ctx, utilization_flag="--mem-fraction-static")
        budget_mb = group_budget_mb(caps, ctx.candidate.env)
        share, source = settings.gpu_memory_utilization, "engine_args"
        if share is None:
            share, source = (
                sglang_default_mem_fraction(
                    budget_mb,
                    tensor_parallel_size=settings.tensor_parallel_size,
                    pipeline_parallel_size=settings.pipeline_parallel_size,
                    speculative_algorithm=sglang_algorithm(ctx.candidate.family, ctx.candidate.method),
                ),
                "sglang_default",
            )
        return CapacityTerms(
            memory=MemoryTerms(
                device_kind=caps.device_kind,
                budget_mb=budget_mb,
                dtype=settings.dtype,
                tensor_parallel_size=settings.tensor_parallel_size,
                pipeline_parallel_size=settings.pipeline_parallel_size,
                data_parallel_size=settings.data_parallel_size,
                gpu_memory_utilization=None if caps.on_cpu else share,
                # SGLang's fraction already leaves activations and CUDA graphs outside the budget.
                gpu_runtime_overhead_mb=0.0,
            ),
            devices_available=len(caps.devices),
            utilization_source=source,
        )

    def identity(self, ctx: GroupContext) -> GroupIdentity:
        return launched_identity(ctx)

    def _group_config(self, ctx: GroupContext, gathered: Gathered | None) -> dict[str, Any] | None:
        cand = ctx.candidate
        if cand.runs_target_only:
            return None
        return self._bound(ctx.setup).speculative_config(
            Proposal.of(cand, gathered),
            target_path=require_target(ctx).path,
            tensor_parallel_size=ctx.engine.tensor_parallel_size,
            location=f"candidates.{cand.name}",
        )

    def serve(self, ctx: GroupContext, gathered: Gathered | None, options: ServeOptions) -> LaunchedServing:
        """Start the group's SGLang server (its `--speculative-*` arguments checked against the probe)."""
        engine = self._bound(ctx.setup)
        env = {**ctx.engine.env, **ctx.candidate.env}
        spec = group_launch_spec(ctx, options, speculative_config=self._group_config(ctx, gathered), env=env)
        return LaunchedServing(engine.launch(spec), engine, devices=nvml_ids(ctx))

    def serve_flags(
        self,
        ctx: GroupContext,
        gathered: Gathered | None,
        *,
        disable_prefix_caching: bool = False,
        extra_speculative: Mapping[str, Any] | None = None,
    ) -> ServeFlags:
        """`python -m sglang.launch_server` with the group's `--speculative-*` arguments, on the plan's address."""
        config = self._group_config(ctx, gathered)
        if config is not None and extra_speculative:
            config = {**config, **extra_speculative}
        env = {**ctx.engine.env, **ctx.candidate.env}
        spec = deploy_spec(ctx, speculative_config=config, env=env, disable_prefix_caching=disable_prefix_caching)
        argv = build_sglang_argv(
            spec, spec.port, python=None if self._command else "python", command=self._command, enable_metrics=False
        )
        program = len(self._command) if self._command else len(("python", "-m", SGLANG_SERVER_MODULE))
        # UNO's proposer is its LoRA adapter's path; every other proposer is the draft model's.
        uno = spec.speculative_config is not None and UNO_LORA_KEY in spec.speculative_config
        local = (UNO_LORA_KEY,) if uno else (DRAFT_PATH_KEY,)
        return serve_flags_of(ctx, gathered, spec, argv, program_length=program, local_keys=local)

    def batch_schedule(self, schedule: Sequence[ScheduleRange], ctx: GroupContext) -> Mapping[str, Any] | None:
        """SGLang has no per-batch-size proposal schedule."""
        return None

    @property
    def capabilities(self) -> SglangCapabilities | None:
        """The probe result given or found by `probe()`, used to check arguments before launching."""
        return self._caps

    def probe(self, cache_dir: Path | None = None, *, visible: str | None = None) -> SglangCapabilities:
        """What this SGLang installation supports (read from its files; no server is started); `visible`: the
        engine environment's CUDA_VISIBLE_DEVICES."""
        if self._python is None:
            raise ConfigError(
                "cannot probe SGLang behind a custom command", location="engine.command", fix="also give the python"
            )
        self._caps = probe_sglang(self._python, cache_dir=cache_dir, env=self._probe_env, visible=visible)
        return self._caps

    def speculative_config(
        self,
        proposal: Proposal,
        *,
        target_path: str | Path | None = None,
        tensor_parallel_size: int = 1,
        location: str = "speculative",
    ) -> dict[str, Any]:
        """The `LaunchSpec.speculative_config` of a candidate: SGLang's speculative arguments (see `specargs`)."""
        caps = self._caps
        return build_sglang_speculative_args(
            proposal,
            target_path=target_path,
            tensor_parallel_size=tensor_parallel_size,
            accepted_algorithms=caps.speculative_algorithms if caps is not None else None,
            accepted_flags=caps.speculative_flags if caps is not None and caps.speculative_flags else None,
            location=location,
        )

    def _enable_metrics(self) -> bool:
        return self._caps is None or self._caps.launch_flags.get("--enable-metrics", True)

    def argv(self, spec: LaunchSpec, port: int, *, secrets_file: Path | None = None) -> list[str]:
        """The exact argv a launch of `spec` on `port` runs (`secrets_file`: the API key's YAML file)."""
        command: Sequence[str] | None = self._command
        container = parse_container_command(command)
        if container is not None:
            env_names = [*spec.env, *([_KEY_ENV] if spec.api_key_env else [])]
            extra = [secrets_file] if secrets_file is not None else []
            command, spec = container_launch(container, spec, port, env_names, extra_paths=extra)
        return build_sglang_argv(
            spec,
            port,
            python=self._python,
            command=command,
            secrets_file=secrets_file,
            enable_metrics=self._enable_metrics(),
        )

    def _secrets_file(self, spec: LaunchSpec, api_key: str | None) -> Path | None:
        """Where the API key goes (None without one); ConfigError when this SGLang cannot read it from a file."""
        if not api_key:
            return None
        if self._caps is not None and not self._caps.launch_flags.get("--config", False):
            raise ConfigError(
                f"SGLang {self._caps.engine_version} reads an API key only from its command line (it has no "
                "--config), where every local user would see it in ps",
                location=f"groups.{spec.group}.api_key_env",
                fix="upgrade SGLang to a version with --config YAML files, or drop api_key_env",
            )
        return Path(spec.run_dir).absolute() / _SECRETS_FILE

    def _check_launch_flags(self, argv: Sequence[str]) -> None:
        if self._caps is None or self._command:
            return
        missing = [f for f, ok in self._caps.launch_flags.items() if not ok and f in argv]
        if missing:
            raise ConfigError(
                f"SGLang {self._caps.engine_version} does not declare {', '.join(missing)}",
                location="engine",
                fix="upgrade SGLang or drop the plan settings that need these flags",
            )

    def launch(self, spec: LaunchSpec) -> ServerProcess:
        """A context manager yielding the ready server; `.release_check` holds the teardown check afterwards."""
        api_key = launch_api_key(spec)
        secrets_file = self._secrets_file(spec, api_key)
        self._check_launch_flags(self.argv(spec, spec.port or 1, secrets_file=secrets_file))  # fail before spawning
        env = dict(spec.env)
        if api_key:
            env[_KEY_ENV] = api_key
        container = parse_container_command(self._command)
        options = server_options(
            spec,
            env=env,
            name=f"SGLang server for {spec.group}",
            health_path=self._health_path,
            term_grace_s=self._term_grace_s,
            poll_interval_s=self._poll_interval_s,
            cleanup=container.cleanup_argvs(container_name(spec.run_dir)) if container is not None else (),
        )
        return _ScrubbingServerProcess(
            lambda port: self.argv(spec, port, secrets_file=secrets_file),
            options,
            secret=api_key,
            secrets_file=secrets_file,
        )

    @staticmethod
    def _get(server: RunningServer, path: str, timeout_s: float) -> tuple[int, bytes]:
        key = server_api_key(server)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return server_get(server.base_url, path, headers=headers, timeout_s=timeout_s)

    def scrape_metrics(self, server: RunningServer, timeout_s: float = 30.0) -> str:
        """GET /metrics as text ("" when the server exports none, e.g. started without --enable-metrics)."""
        status, body = self._get(server, "/metrics", timeout_s)
        if status == 404:
            return ""
        if status != 200:
            raise ProtocolError(f"/metrics answered HTTP {status}", location=server.base_url, fix="read the server log")
        return body.decode("utf-8", errors="replace")

    def server_info(self, server: RunningServer, timeout_s: float = 30.0) -> ServerInfoReading:
        """The speculative facts of `/server_info` (or `/get_server_info` on older SGLang)."""
        paths = SERVER_INFO_PATHS
        if self._caps is not None and self._caps.server_endpoints:
            paths = tuple(p for p in SERVER_INFO_PATHS if p in self._caps.server_endpoints) or paths
        status = 404
        for path in paths:
            status, body = self._get(server, path, timeout_s)
            if status == 404:
                continue
            if status != 200:
                raise ProtocolError(f"{path} answered HTTP {status}", location=server.base_url, fix="read the log")
            try:
                answer = json.loads(body)
            except ValueError as exc:
                raise ProtocolError(
                    f"{path} did not answer JSON: {exc}", location=server.base_url, fix="read the log"
                ) from exc
            return parse_server_info(answer, location=f"{server.base_url}{path}")
        served = f"neither {' nor '.join(paths)} is" if len(paths) > 1 else f"{paths[0]} is not"
        raise ProtocolError(
            f"{served} served (HTTP {status})",
            location=server.base_url,
            fix="check that this is an SGLang server",
        )

    def snapshot(self, server: RunningServer) -> ServerInfoSnapshot:
        """/metrics and /server_info read together; a failed /server_info is recorded, not raised."""
        metrics = parse_prometheus(self.scrape_metrics(server))
        try:
            return ServerInfoSnapshot(samples=metrics.samples, server_info=self.server_info(server))
        except ProtocolError as exc:
            return ServerInfoSnapshot(samples=metrics.samples, server_info_error=exc.one_line())

    def acceptance(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SglangAcceptance:
        """The window's acceptance in SGLang's terms and the common definitions (`telemetry` module)."""
        return acceptance_from_snapshots(before, after, model_name)

    def spec_counters(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
        """The window in vLLM's counter shape, for code that combines counters with `build_spec_telemetry`."""
        return acceptance_to_counters(self.acceptance(before, after, model_name), model_name)

    def spec_telemetry(
        self,
        before: MetricsSnapshot,
        after: MetricsSnapshot,
        model_name: str,
        per_request: Sequence[Mapping[str, Any] | None] = (),
    ) -> SpecTelemetry:
        """The common SpecTelemetry of a window (SGLang adds no per-request metrics; `per_request` is unused)."""
        return to_spec_telemetry(self.acceptance(before, after, model_name))

    def request_spec_metrics(self, extras: Mapping[str, Any]) -> RequestSpecMetrics | None:
        """None: SGLang's OpenAI-compatible stream carries no per-request speculative counts (its acceptance comes
        from `/metrics` and `/server_info` over the window)."""
        return None

    def sanity(self, server: RunningServer, timeout_s: float = 120.0) -> SanityResult:
        """The served model is listed by /v1/models and one short chat completion returns text."""
        return sanity_check(server.base_url, server.served_model, api_key=server_api_key(server), timeout_s=timeout_s)

    def kv_capacity(self, server: RunningServer, log_text: str | None) -> KvCapacity | None:
        """The KV pool `/server_info` reports (`max_total_num_tokens`); the log is not needed."""
        return kv.kv_capacity(self.snapshot(server))

    def kv_usage(self, server: RunningServer) -> float | None:
        """The share of the KV pool in use now (`sglang:token_usage` alone is parsed)."""
        return kv.kv_usage(parse_metrics_named(self.scrape_metrics(server, USAGE_SCRAPE_TIMEOUT_S), (kv.TOKEN_USAGE,)))

    def preemptions(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> int | None:
        """None: SGLang exports no preemption counter."""
        return None
