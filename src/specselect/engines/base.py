"""The engine Protocol and the frozen values that cross it (launch spec, running server, checks)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Engine",
    "LaunchSpec",
    "ReleaseCheck",
    "RunningServer",
    "SanityResult",
]


class LaunchSpec(BaseModel):
    """Everything needed to start one group's server; built by the runner, read by an engine."""

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
    """The exact `--speculative-config` object; None runs target-only."""
    per_request_spec_metrics: bool = False
    """Ask for per-request acceptance metrics; set only when the engine probe found the flag."""
    disable_prefix_caching: bool = False
    api_key_env: str | None = None
    """Name of an environment variable whose value becomes the server's API key (read at launch)."""
    startup_timeout_s: float = Field(default=600.0, gt=0)
    log_path: Path
    run_dir: Path
    """Directory for this server's caches and temporary files."""


class ReleaseCheck(BaseModel):
    """What teardown confirmed: the port can be bound again and no process of the group is left."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    port_free: bool
    processes_gone: bool
    seconds: float
    killed: bool = False
    """True when SIGTERM was not enough and the group had to be killed."""
    leftover_pids: tuple[int, ...] = ()


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
    startup_s: float | None = None
    api_key_env: str | None = None


class SanityResult(BaseModel):
    """The G0-style check that a server serves the expected model and produces text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    model_ids: tuple[str, ...]
    api: Literal["chat", "completions"]
    reply_text: str
    seconds: float


@runtime_checkable
class Engine(Protocol):
    """A serving engine: starts servers for launch specs and reads their telemetry."""

    kind: str

    def probe(self) -> BaseModel:
        """Capabilities of the engine installation (never starts a server)."""
        ...

    def launch(self, spec: LaunchSpec) -> AbstractContextManager[RunningServer]:
        """A context manager that starts the server, yields it ready, and always tears it down."""
        ...

    def scrape_metrics(self, server: RunningServer) -> str:
        """The server's Prometheus text (empty string when it exports none)."""
        ...

    def sanity(self, server: RunningServer) -> SanityResult:
        """Check the served model id and one short completion; ProtocolError otherwise."""
        ...
