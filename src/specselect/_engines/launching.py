"""What the engines that start their own servers (vLLM, SGLang) share behind the `Engine` protocol.

The launch spec of a group (its track's target, the plan's engine section, the group's args and env), the
serving handle around a `ServerProcess` (start, sanity check, telemetry readers, stop), the identity of a
launched group, the audit findings every launcher has (no probe, port taken), and the backend-gate checks
both gates make (minimum engine version, device kind).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version

from specselect._admission.gather import Gathered
from specselect._common.secrets import REDACTED, is_secret_name
from specselect._core.gates import FactValue, GateCheck
from specselect._engines.base import (
    EngineSetup,
    Finding,
    GroupContext,
    GroupIdentity,
    KvReader,
    LaunchSpec,
    RunningServer,
    ServeOptions,
    Session,
)
from specselect._engines.devices import device_findings, group_visible
from specselect._engines.http import port_is_free
from specselect._engines.prometheus import MetricsSnapshot
from specselect._engines.server import ServerProcess
from specselect._plan import Candidate, Plan
from specselect.errors import ConfigError
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import DeviceInfo, EngineCapabilities, RuntimeController
from specselect.records.capacity import KvCapacity
from specselect.records.responsecache import ResponseCacheSetting
from specselect.records.server import ReleaseCheck, SanityResult, ServeFlags
from specselect.records.telemetry import RequestSpecMetrics, SpecDecodeCounters

__all__ = [
    "DEPLOY_PORT",
    "SCHEDULE_CONTROLLER",
    "LaunchedServing",
    "ServerReader",
    "StartupReader",
    "controller_check",
    "controller_refusal",
    "deploy_spec",
    "group_devices",
    "group_launch_spec",
    "launched_identity",
    "launcher_findings",
    "lossy_plan_problems",
    "min_version_check",
    "nvml_ids",
    "plain_version",
    "probe_failed",
    "require_target",
    "serve_flags_of",
    "served_model_name",
]

SCHEDULE_CONTROLLER = "batch_size_schedule"
"""The runtime controller a schedule candidate (`schedule_of`) runs on (`RuntimeController.name`)."""

_CAPACITY_LOG_LINES = 5000
DEPLOY_PORT = 8000
"""The port the hand-off's serve flags name when the plan let specselect pick a free one."""


class ServerReader(Protocol):
    """The engine-specific reads of a launched server: its telemetry and its sanity check."""

    def snapshot(self, server: RunningServer) -> MetricsSnapshot: ...
    def spec_counters(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters: ...
    def request_spec_metrics(self, extras: Mapping[str, Any]) -> RequestSpecMetrics | None: ...
    def sanity(self, server: RunningServer) -> SanityResult: ...
    def kv_capacity(self, server: RunningServer, log_text: str | None) -> KvCapacity | None: ...
    def kv_usage(self, server: RunningServer) -> float | None: ...
    def preemptions(self, before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> int | None: ...


def served_model_name(target_ref: str) -> str:
    """One served name for every group of a track, so requests are identical across its groups."""
    return Path(target_ref.removeprefix("builtin:")).name or "target"


def require_target(ctx: GroupContext) -> ResolvedModel:
    """The track's resolved target; ConfigError when preflight resolved none (a launcher needs one)."""
    if ctx.target is None:
        raise ConfigError(
            f"no resolved target for {ctx.candidate.name}", location="preflight", fix="run the preflight first"
        )
    return ctx.target


def group_launch_spec(
    ctx: GroupContext,
    options: ServeOptions,
    *,
    speculative_config: dict[str, Any] | None,
    env: dict[str, str],
    per_request_spec_metrics: bool = False,
) -> LaunchSpec:
    """The launch spec of one group on its track's target (the engine decides speculation, env and flags)."""
    eng, cand, target = ctx.engine, ctx.candidate, require_target(ctx)
    return LaunchSpec(
        group=cand.name,
        model_path=target.path,
        served_model_name=served_model_name(target.ref),
        dtype=ctx.target_config.dtype,
        max_model_len=ctx.target_config.max_model_len,
        engine_args=(*eng.args, *cand.engine_args),
        tensor_parallel_size=eng.tensor_parallel_size,
        pipeline_parallel_size=eng.pipeline_parallel_size,
        data_parallel_size=eng.data_parallel_size,
        distributed_executor_backend=eng.distributed_executor_backend,
        env=env,
        host=eng.host,
        port=eng.port,
        speculative_config=speculative_config,
        proposal_length=cand.num_speculative_tokens if speculative_config is not None else None,
        per_request_spec_metrics=per_request_spec_metrics and speculative_config is not None,
        disable_prefix_caching=options.disable_prefix_caching,
        api_key_env=eng.api_key_env,
        startup_timeout_s=eng.startup_timeout_s,
        log_path=options.log_path,
        run_dir=options.run_dir,
    )


def deploy_spec(
    ctx: GroupContext, *, speculative_config: dict[str, Any] | None, env: dict[str, str], disable_prefix_caching: bool
) -> LaunchSpec:
    """A group's launch spec as a deployment starts it: the plan's host and port (`DEPLOY_PORT` for a free one),
    no per-request metrics (a measurement flag), prefix caching off only when the measurement had it off."""
    options = ServeOptions(
        log_path=Path("server.log"), run_dir=Path("."), disable_prefix_caching=disable_prefix_caching
    )
    spec = group_launch_spec(ctx, options, speculative_config=speculative_config, env=env)
    return spec if spec.port else spec.model_copy(update={"port": DEPLOY_PORT})


def serve_flags_of(
    ctx: GroupContext,
    gathered: Gathered | None,
    spec: LaunchSpec,
    argv: Sequence[str],
    *,
    program_length: int,
    local_keys: tuple[str, ...] = (),
) -> ServeFlags:
    """The serve flags of a deployment spec whose command line is `argv` (its first `program_length` words start
    the server), with the identities the group was measured with; `local_keys` name the speculative configuration's
    machine-local paths."""
    caps = ctx.setup.caps
    return ServeFlags(
        engine_kind=ctx.engine.kind,
        engine_version=caps.engine_version if caps is not None else None,
        program=tuple(argv[:program_length]),
        args=tuple(argv[program_length:]),
        env={name: REDACTED if is_secret_name(name) else value for name, value in spec.env.items()},
        speculative=spec.speculative_config,
        speculative_local_keys=local_keys,
        target_snapshot=ctx.target.snapshot if ctx.target is not None else None,
        proposer_snapshot=gathered.proposer.snapshot if gathered and gathered.proposer else None,
    )


StartupReader = Callable[[RunningServer, str], RunningServer]
"""The server with what its start-up log (this attempt's, the second argument) says added: an engine's reader."""


class LaunchedServing:
    """A launched group's server for a `with` block: start, sanity check, and a `Session` to measure on."""

    def __init__(
        self,
        proc: ServerProcess,
        reader: ServerReader,
        devices: tuple[str, ...] = (),
        startup: StartupReader | None = None,
        response_cache: ResponseCacheSetting | None = None,
    ) -> None:
        self._proc = proc
        self._reader = reader
        self._devices = devices
        self._startup = startup
        self._response_cache = response_cache

    def __enter__(self) -> Session:
        server = self._proc.__enter__()
        if self._startup is not None:
            server = self._startup(server, self._proc.attempt_log())
        try:
            sanity = self._reader.sanity(server)
        except BaseException:
            self._proc.stop()  # the `with` body never runs, so __exit__ would not stop it
            raise
        reader = self._reader
        return Session(
            base_url=server.base_url,
            model=server.served_model,
            api_key_env=server.api_key_env,
            snapshot=lambda: reader.snapshot(server),
            spec_counters=lambda before, after: reader.spec_counters(before, after, server.served_model),
            request_spec_metrics=reader.request_spec_metrics,
            check_alive=self._proc.raise_if_dead,
            log_location=str(server.log_path),
            log_tail=self._proc.log_tail,
            sanity=sanity,
            server=server,
            pid=server.pid,
            devices=self._devices,
            kv=KvReader(
                # The size line comes before readiness, within the first few hundred lines of the log.
                capacity=lambda: reader.kv_capacity(server, self._proc.log_tail(_CAPACITY_LOG_LINES)),
                usage=lambda: reader.kv_usage(server),
                preemptions=lambda before, after: reader.preemptions(before, after, server.served_model),
            ),
            response_cache=self._response_cache,
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._proc.__exit__(exc_type, exc, tb)

    def stop(self) -> ReleaseCheck | None:
        return self._proc.stop()

    def log_tail(self) -> str | None:
        return self._proc.log_tail()


def group_devices(ctx: GroupContext) -> tuple[DeviceInfo, ...]:
    """The GPUs or MIG instances the group's server uses (its CUDA_VISIBLE_DEVICES); empty on the CPU."""
    caps = ctx.setup.caps
    return group_visible(caps, ctx.candidate.env).devices if caps is not None else ()


def nvml_ids(ctx: GroupContext) -> tuple[str, ...]:
    """How memory sampling opens the group's devices."""
    return tuple(i for i in (d.nvml_id for d in group_devices(ctx)) if i is not None)


def launched_identity(ctx: GroupContext) -> GroupIdentity:
    """A launched group is attributed to its track's resolved target and the probed engine version."""
    caps = ctx.setup.caps
    return GroupIdentity(
        target_snapshot=ctx.target.snapshot if ctx.target is not None else "",
        engine_version=caps.engine_version if caps is not None else None,
        has_log=True,
    )


def launcher_findings(plan: Plan, setup: EngineSetup) -> list[Finding]:
    """Findings of every engine that starts servers: capabilities unknown, devices (`device_findings`), a fixed
    port already taken."""
    found: list[Finding] = []
    if setup.caps is None:
        found.append(("warning", "engine_not_probed", f"engine capabilities unknown: {setup.probe_error}"))
    else:
        found.extend(device_findings(plan, setup.caps))
    eng = plan.engine
    if eng.port and not port_is_free(eng.host, eng.port):
        found.append(
            (
                "error",
                "port_in_use",
                f"port {eng.port} on {eng.host} is already in use: stop what listens there, "
                "choose another engine.port, or use port = 0 for a free one",
            )
        )
    return found


def plain_version(text: str) -> Version:
    """A release version without its local label (`0.32.0+cpu` orders as `0.32.0`)."""
    return Version(Version(text).public)


def min_version_check(
    engine_version: str, min_engine_version: str | None, facts: dict[str, FactValue]
) -> GateCheck | None:
    """The failing backend check when the engine is older than the candidate's minimum; None when it is not.

    Adds `min_engine_version` to `facts` when one is given.
    """
    if not min_engine_version:
        return None
    facts["min_engine_version"] = min_engine_version
    try:
        too_old = plain_version(engine_version) < plain_version(min_engine_version)
    except InvalidVersion:
        return GateCheck.fail("backend_probe_failed", problem="unparseable engine version", **facts)
    return GateCheck.fail("engine_version_too_old", **facts) if too_old else None


LossyCheck = Callable[[Mapping[str, Any]], "tuple[str, str] | None"]
"""An engine's word on a candidate's options: (the option, why its verification is not exact), or None."""


def lossy_plan_problems(plan: Plan, lossy: LossyCheck) -> list[str]:
    """`validate`'s lines for lossy candidates: one that does not opt in (`allow_lossy`), and one that does in a
    plan that samples nothing above temperature 0 (its decision rests on the distribution test, which needs one)."""
    problems: list[str] = []
    for cand in plan.candidates:
        found = None if cand.is_baseline else lossy(cand.options)
        if found is None:
            continue
        key, why = found
        entry = cand.option_location(key).split(".")[1]
        if not cand.allow_lossy:
            problems.append(
                f"{cand.option_location(key)}: {why}, so it would fail parity "
                f"(fix: set allow_lossy = true in candidates.{entry} to measure it as lossy, or remove the option)"
            )
        elif not plan.sampling.sampled:
            problems.append(
                f"candidates.{entry}.allow_lossy: a lossy candidate is judged by the distribution test, which needs "
                "a temperature above 0 (fix: add one to [sampling].temperature, e.g. temperature = [0.0, 0.7])"
            )
    return list(dict.fromkeys(problems))


def controller_refusal(
    controller: RuntimeController, method: str, *, device_kind: str, data_parallel_size: int = 1
) -> tuple[str, dict[str, FactValue]] | None:
    """Why `controller` cannot run for `method` on this device at this data parallel size (a reason and its facts);
    None when it can."""
    if (controller.methods and method not in controller.methods) or method in controller.excluded_methods:
        listed = {"controller_methods": ",".join(controller.methods)} if controller.methods else {}
        return "runtime_controller_not_for_method", {
            **listed,
            "controller_excluded_methods": ",".join(controller.excluded_methods) or None,
        }
    limit = controller.max_data_parallel_size
    if limit is not None and data_parallel_size > limit:
        return "runtime_controller_not_with_data_parallel", {
            "data_parallel_size": data_parallel_size,
            "controller_max_data_parallel_size": limit,
        }
    if controller.requires_device is not None and controller.requires_device != device_kind:
        return f"requires_{controller.requires_device}", {}
    return None


def controller_check(
    method: str,
    candidate: Candidate,
    caps: EngineCapabilities,
    facts: dict[str, FactValue],
    *,
    data_parallel_size: int = 1,
    option_keys: Collection[str] | None = None,
) -> GateCheck | None:
    """The failing backend check when the candidate needs a runtime controller this engine lacks (an option that
    configures one, or a derived schedule), for this method, data parallel size or device; None when it has
    what it needs. `option_keys`: the candidate's option keys as the engine names them (default: as written)."""
    keys = candidate.options if option_keys is None else option_keys
    wanted = [c for c in caps.runtime_controllers if c.option in keys]
    if candidate.schedule_of is not None:
        found = next((c for c in caps.runtime_controllers if c.name == SCHEDULE_CONTROLLER), None)
        if found is None:
            return GateCheck.fail("runtime_controller_not_in_backend", runtime_controller=SCHEDULE_CONTROLLER, **facts)
        wanted.append(found)
    for controller in wanted:
        facts["runtime_controller"] = controller.name
        refused = controller_refusal(
            controller, method, device_kind=caps.device_kind, data_parallel_size=data_parallel_size
        )
        if refused is not None:
            reason, more = refused
            return GateCheck.fail(reason, **facts, **more)
    return None


def probe_failed(method: str, setup: EngineSetup) -> GateCheck:
    """The backend check of every candidate when the engine could not be probed."""
    return GateCheck.fail("backend_probe_failed", method=method, probe_error=setup.probe_error)
