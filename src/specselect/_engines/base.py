"""The one `Engine` protocol, and the values that cross it.

An engine kind (vllm, sglang, openai) answers everything that differs between engines: how its environment
is found and probed (`prepare`), what its configuration audit says (`audit`), whether and how it can run a
candidate (`admit`: backend support, method name, memory terms), how a group's server is started or reached
(`serve`: speculative arguments, argv, environment, telemetry readers) and how its configuration is written
for a deployment (`serve_flags`, `batch_schedule`). Preflight, admission and the runner reach an engine only
through this protocol, created by `specselect._engines.registry.create_engine`; nothing outside `engines/` imports an
engine's package or branches on its kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from specselect._admission.gather import Gathered
from specselect._engines.prometheus import MetricsSnapshot
from specselect._engines.vllm.telemetry import request_spec_metrics as vllm_request_spec_metrics
from specselect._plan import Candidate, EngineConfig, Plan, TargetConfig
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import AnyCapabilities
from specselect.records.capacity import KvCapacity
from specselect.records.endpoints import EndpointProbe, TrafficCheck
from specselect.records.proposals import ScheduleRange
from specselect.records.responsecache import ResponseCacheSetting
from specselect.records.server import ReleaseCheck, SanityResult, ServeFlags
from specselect.records.startup import EngineWarning, StartupSplit
from specselect.records.telemetry import RequestSpecMetrics, SpecDecodeCounters, SpecMetricsReader

__all__ = [
    "USAGE_SCRAPE_TIMEOUT_S",
    "Engine",
    "EngineSetup",
    "Finding",
    "GroupContext",
    "GroupIdentity",
    "KvReader",
    "LaunchSpec",
    "ProgressFn",
    "Proposal",
    "RunningServer",
    "ServeOptions",
    "ServingHandle",
    "Session",
    "TrafficGuard",
    "recorded_request_spec_metrics",
]

ProgressFn = Callable[[str], None]
"""Receives one-line progress messages."""

Finding = tuple[Literal["error", "warning", "info"], str, str]
"""One configuration-audit finding: (severity, stable snake_case code, message)."""

USAGE_SCRAPE_TIMEOUT_S = 2.0
"""A once-a-second KV-usage scrape gives up after this: a server that cannot answer /metrics in 2 s gives no useful
sample, and a hung one must not hold the scenario's end (its poller joins the scrape in flight, then scrapes once
more) beyond the scenario's own time-out."""


def recorded_request_spec_metrics(engine_fields: Mapping[str, Any]) -> RequestSpecMetrics | None:
    """The speculative counts of a request recorded before sessions read them (`RequestRecord.speculative`): then
    records kept only vLLM's per-request `metrics` object (now in `engine_fields`), so vLLM's reader reads it."""
    return vllm_request_spec_metrics(engine_fields)


class LaunchSpec(BaseModel):
    """Everything needed to start one group's server; built by a launching engine from the group's context."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str = Field(min_length=1)
    """The group's name (`g0_target_only`, a candidate name); used in messages and file names."""
    model_path: Path
    served_model_name: str = Field(min_length=1)
    dtype: str = "auto"
    max_model_len: int | None = Field(default=None, gt=0)
    engine_args: tuple[str, ...] = ()
    """The user's extra engine arguments, appended verbatim after the ones specselect sets."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    distributed_executor_backend: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the server (on top of the inherited one and the cache directories)."""
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port."""
    speculative_config: dict[str, Any] | None = None
    """The engine's exact speculative configuration; None runs target-only."""
    proposal_length: int | None = Field(default=None, ge=1)
    """Tokens proposed per verify step as launched, in every engine's terms (the candidate's
    num_speculative_tokens); None runs target-only or leaves it to the engine."""
    per_request_spec_metrics: bool = False
    """Ask for per-request acceptance metrics; set only when the engine probe found the flag."""
    disable_prefix_caching: bool = False
    api_key_env: str | None = None
    """Name of an environment variable whose value becomes the server's API key (read at launch)."""
    startup_timeout_s: float = Field(default=600.0, gt=0)
    log_path: Path
    run_dir: Path
    """Directory for this server's caches and temporary files."""


class RunningServer(BaseModel):
    """A server that answered its readiness check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    served_model: str
    pid: int
    pgid: int
    port: int
    log_path: Path
    command: tuple[str, ...]
    """The argv with secrets replaced by `***`."""
    spec_config: dict[str, Any] | None = None
    proposal_length: int | None = None
    """Tokens proposed per verify step as launched (`LaunchSpec.proposal_length`): engine-neutral."""
    startup_s: float | None = None
    started_at: float | None = None
    """When the process was spawned (seconds since the epoch): where its log's timestamps start counting."""
    startup: StartupSplit | None = None
    """The start-up in phases, read from the engine's log by the engine (None: it reads none)."""
    engine_warnings: tuple[EngineWarning, ...] = ()
    """The engine's start-up warnings that bear on the measurement."""
    preload: tuple[str, ...] = ()
    """Libraries the launch preloaded into the server (its LD_PRELOAD), as launched."""
    api_key_env: str | None = None


class EngineSetup(BaseModel):
    """What `Engine.prepare` found: the probed installation, or why it could not be probed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    caps: AnyCapabilities | None = None
    """None when the engine has no installation to probe (kind "openai") or the probe failed."""
    python: Path | None = None
    """The engine environment's python; it also converts builtin models (torch, transformers, gguf)."""
    probe_error: str | None = None
    engine_version: str | None = None
    endpoints: dict[str, EndpointProbe] = Field(default_factory=dict)
    """Group name -> the probe of its endpoint (kind "openai")."""
    shared_cache: Path | None = None
    """Where the engine keeps what every server of a home may reuse (None: each server starts from nothing)."""


@dataclass(frozen=True)
class GroupContext:
    """One group as an engine sees it: the plan entry, the engine section, its track's target, the setup."""

    candidate: Candidate
    engine: EngineConfig
    target_config: TargetConfig
    target: ResolvedModel | None
    """The track's resolved target; None for an engine that starts nothing."""
    setup: EngineSetup
    verify_weights: bool = False
    """Hash a local proposer's weights in full (`--verify-weights`) instead of identifying it by its files."""


@dataclass(frozen=True)
class Proposal:
    """What a candidate asks an engine to speculate with (each engine writes its own arguments from it)."""

    family: str
    method: str | None = None
    """The backend method (admission's choice); None: the family's default."""
    num_speculative_tokens: int | None = None
    proposer_path: str | Path | None = None
    """The proposer checkpoint admission resolved (a local directory), for methods that load one."""
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, candidate: Candidate, gathered: Gathered | None) -> Proposal:
        """A candidate's proposal, with the method and proposer admission resolved for it."""
        return cls(
            family=candidate.family,
            method=gathered.method if gathered else candidate.method,
            num_speculative_tokens=candidate.num_speculative_tokens,
            proposer_path=gathered.proposer.path if gathered and gathered.proposer else None,
            options=candidate.options,
        )


@dataclass(frozen=True)
class GroupIdentity:
    """What a group's results are attributed to (the target it served, the engine version)."""

    target_snapshot: str
    engine_version: str | None
    has_log: bool
    """False when specselect owns no process and so keeps no log of the group."""


@dataclass(frozen=True)
class ServeOptions:
    """How the run wants a group served (the same for every engine)."""

    log_path: Path
    run_dir: Path
    disable_prefix_caching: bool = False


class TrafficGuard(Protocol):
    """Watches an endpoint specselect does not own for traffic of others around one scenario."""

    def before(self) -> None:
        """Called just before the scenario's first request."""
        ...

    def after(self, requests_sent: int) -> TrafficCheck:
        """Called after its last request; the verdict for the scenario."""
        ...


@dataclass(frozen=True)
class KvReader:
    """A launched server's KV cache as its engine reports it, in engine-neutral terms."""

    capacity: Callable[[], KvCapacity | None]
    """The cache reserved at start-up (read once the server is ready); None when the engine stated none."""
    usage: Callable[[], float | None]
    """The share of the cache in use now (1.0 = full); None when not exported. Called every second under load,
    so it reads the one gauge and parses nothing else (the load client shares this process)."""
    preemptions: Callable[[MetricsSnapshot, MetricsSnapshot], int | None]
    """Requests preempted between two scrapes; None when not exported."""


@dataclass(frozen=True)
class Session:
    """A ready server as measuring sees it, whether specselect launched it or attached to it."""

    base_url: str
    model: str
    api_key_env: str | None
    snapshot: Callable[[], MetricsSnapshot]
    spec_counters: Callable[[MetricsSnapshot, MetricsSnapshot], SpecDecodeCounters]
    """The engine's own acceptance counters over the window between two snapshots."""
    request_spec_metrics: SpecMetricsReader
    """Reads a response's own fields (beyond OpenAI's) into per-request speculative counts; None without them."""
    check_alive: Callable[[], None]
    """Raises ServerCrashedError when the server is gone."""
    log_location: str
    log_tail: Callable[[], str | None]
    sanity: SanityResult
    server: RunningServer | None = None
    """The launched server (None for an endpoint specselect does not own)."""
    pid: int | None = None
    """The server's process, to sample peak memory; None for an endpoint specselect does not own."""
    devices: tuple[str, ...] = ()
    """NVML ids (UUIDs, else indices) of the GPUs or MIG instances the server uses; empty on the CPU."""
    declared_peak_memory_mb: float | None = None
    traffic: TrafficGuard | None = None
    response_cache: ResponseCacheSetting | None = None
    """The proposer's cache of the server's earlier responses, as launched (None: it keeps none)."""
    sleep: Callable[[float], None] = field(default=time.sleep)
    kv: KvReader | None = None
    """The server's KV cache (None for an endpoint specselect does not own)."""


class ServingHandle(Protocol):
    """A group's server for the length of a `with` block: started (or attached) on enter, stopped on exit."""

    def __enter__(self) -> Session: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def stop(self) -> ReleaseCheck | None:
        """Stop now (idempotent) and return the teardown check; None when nothing was started."""
        ...

    def log_tail(self) -> str | None:
        """The end of the server's log, redacted (None when specselect keeps no log)."""
        ...


@runtime_checkable
class Engine(Protocol):
    """A serving engine kind: everything engine-specific specselect needs, behind one interface."""

    kind: str
    launches_servers: bool
    """False for an engine that measures servers the user runs (nothing to start, nothing to stop)."""

    def prepare(self, plan: Plan, *, home: Path | None, progress: ProgressFn) -> EngineSetup:
        """Install or locate the engine environment and probe it without starting a server.

        A probe that fails is recorded in the setup (`probe_error`), not raised: admission then reports every
        candidate `unsupported` with that reason.
        """
        ...

    def plan_problems(self, plan: Plan) -> list[str]:
        """Mistakes in the plan this engine can tell without probing anything (`specselect validate`), one line
        each naming the field and the fix; the probe and admission check the installed engine itself."""
        ...

    def audit(self, plan: Plan, setup: EngineSetup) -> list[Finding]:
        """Engine-specific configuration findings; `error` findings stop the run before anything starts."""
        ...

    def admit(self, ctx: GroupContext, *, home: Path | None) -> Gathered:
        """The facts of admission gates 1-5 for a candidate, its backend method and its resolved proposer."""
        ...

    def identity(self, ctx: GroupContext) -> GroupIdentity:
        """The target snapshot and engine version a group's results are attributed to."""
        ...

    def serve(self, ctx: GroupContext, gathered: Gathered | None, options: ServeOptions) -> ServingHandle:
        """The group's server as a context manager (ConfigError for a configuration it cannot run)."""
        ...

    def serve_flags(
        self,
        ctx: GroupContext,
        gathered: Gathered | None,
        *,
        disable_prefix_caching: bool = False,
        extra_speculative: Mapping[str, Any] | None = None,
    ) -> ServeFlags | None:
        """The exact flags that start the group's configuration outside specselect (without its measurement-only
        flags), `extra_speculative` merged into the speculative configuration; None when specselect starts nothing.
        """
        ...

    def batch_schedule(self, schedule: Sequence[ScheduleRange], ctx: GroupContext) -> Mapping[str, Any] | None:
        """The speculative-config setting that proposes each range's length at its batch sizes (0: none), when the
        probed engine can express that for the group's method at its parallel settings; None otherwise."""
        ...
