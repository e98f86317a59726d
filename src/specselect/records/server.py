"""What a group's server recorded about itself: how it was launched (`LaunchRecord`), its sanity check, its release
check, and the flags that start its configuration again (`ServeFlags`, in the hand-off). The engines fill them in;
the results and the hand-off carry them."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect.records.startup import EngineWarning, StartupSplit

__all__ = ["LaunchRecord", "ReleaseCheck", "SanityResult", "ServeFlags", "recorded_proposal_length"]


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


class ServeFlags(BaseModel):
    """How to start a measured configuration yourself: the engine's entry point, its exact flags and environment,
    and the identities they were measured with (written by `Engine.serve_flags`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine_kind: str
    engine_version: str | None
    program: tuple[str, ...]
    """The server's entry point as measured, with `python` for the engine environment's interpreter."""
    args: tuple[str, ...]
    """Every flag: model, served name, address, dtype, lengths, parallelism, speculation, the plan's engine args."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables the server was started with on top of the inherited environment (secrets never appear)."""
    speculative: dict[str, Any] | None = None
    """The engine's speculative configuration these flags carry (None: the target alone)."""
    speculative_local_keys: tuple[str, ...] = ()
    """Keys of `speculative` whose values name this machine's files (the proposer's path): a configuration checked
    on another machine may differ there; its identity is `proposer_snapshot`."""
    target_snapshot: str | None = None
    proposer_snapshot: str | None = None

    def argv(self, *, port: int | None = None) -> tuple[str, ...]:
        """The command line, on another port when `port` is given."""
        args = list(self.args)
        if port is not None and "--port" in args[:-1]:
            args[args.index("--port") + 1] = str(port)
        return (*self.program, *args)

    @property
    def shell(self) -> str:
        """One line to paste: the environment assignments, then the command, each word quoted for a POSIX shell."""
        assignments = [f"{name}={shlex.quote(value)}" for name, value in sorted(self.env.items())]
        return " ".join([*assignments, *(shlex.quote(part) for part in self.argv())])


class SanityResult(BaseModel):
    """The G0-style check that a server serves the expected model and produces text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    model_ids: tuple[str, ...]
    api: Literal["chat", "completions"]
    reply_text: str
    seconds: float


def recorded_proposal_length(speculative_config: Mapping[str, Any] | None) -> int | None:
    """The proposal length of a launch recorded before launches stated it (`RunningServer.proposal_length`):
    then only vLLM's speculative config held it, as `num_speculative_tokens`; other engines' records stay
    without one."""
    k = speculative_config.get("num_speculative_tokens") if speculative_config else None
    return k if isinstance(k, int) and not isinstance(k, bool) else None


class LaunchRecord(BaseModel):
    """How a group's server was started (secrets redacted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...]
    speculative_config: dict[str, Any] | None
    """The engine's own speculative configuration, as it launched (read by nothing above the engines)."""
    served_model: str
    base_url: str
    startup_s: float | None
    proposal_length: int | None = None
    """Tokens proposed per verify step as launched, in every engine's terms; None: target-only or the engine's
    default."""
    startup: StartupSplit | None = None
    """The start-up in phases, from the engine's own log (None: older records, or an engine that reads none)."""
    engine_warnings: tuple[EngineWarning, ...] = ()
    """What the engine warned about at start-up that bears on the measurement (a runtime it asks to preload)."""
    preload: tuple[str, ...] = ()
    """Libraries preloaded into the server (LD_PRELOAD), as launched."""

    @model_validator(mode="before")
    @classmethod
    def _stated_by_older_launches(cls, data: Any) -> Any:
        # Records written before launches stated their proposal length kept it in the engine's config only.
        if isinstance(data, dict) and "proposal_length" not in data:
            return {**data, "proposal_length": recorded_proposal_length(data.get("speculative_config"))}
        return data
