"""Facts about servers specselect does not own (engine kind "openai"), as results files record them.

An endpoint's probe (`EndpointProbe`: identity, version, metrics) and the foreign-traffic check around each
scenario measured on it (`TrafficCheck`); the code that produces them is in `_engines/openai/`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["EndpointProbe", "IdleWindow", "MetricsFlavor", "ServedIdentity", "TrafficCheck"]

MetricsFlavor = Literal["vllm", "sglang", "unknown"]


class ServedIdentity(BaseModel):
    """One `/v1/models` entry as the endpoint reported it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    root: str | None = None
    """The weights the server loaded (vLLM: the model path or id given at launch)."""
    max_model_len: int | None = None
    owned_by: str | None = None


class EndpointProbe(BaseModel):
    """The result of probing one group's endpoint (no secret is ever stored: only the variable's name)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    base_url: str
    model: str
    api_key_env: str | None = None
    reachable: bool
    error: str | None = None
    model_ids: tuple[str, ...] = ()
    model_listed: bool = False
    identity: ServedIdentity | None = None
    engine_version: str | None = None
    version_source: Literal["version_endpoint", "not_exposed"] = "not_exposed"
    metrics: Literal["exported", "not_exported", "unreachable"] = "unreachable"
    flavor: MetricsFlavor = "unknown"
    """Whose metric names `/metrics` carries; spec-decode telemetry is read only for known flavors."""
    target_snapshot: str | None = None
    """The target identity pairs are compared on (see `reported_snapshot`)."""
    seconds: float = 0.0

    @property
    def usable(self) -> bool:
        """The endpoint answered `/v1/models` and lists the model the plan names."""
        return self.reachable and self.model_listed


class IdleWindow(BaseModel):
    """Two scrapes around a gap in which specselect sent nothing, and what moved in between."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gap_s: float
    moved: dict[str, float]
    """Counter deltas > 0 seen in the gap (empty when the endpoint was idle)."""

    @property
    def busy(self) -> bool:
        return bool(self.moved)


class TrafficCheck(BaseModel):
    """Whether anything besides specselect used the endpoint around and during one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    status: Literal["clean", "contaminated", "not_checked"]
    reason: str
    """One line: what moved, or why nothing could be checked."""
    idle_before: IdleWindow | None = None
    idle_after: IdleWindow | None = None
    requests_sent: int | None = None
    """Requests specselect sent during the scenario (warm-up included)."""
    requests_finished: int | None = None
    """Requests the engine finished between the scrape before and the scrape after the scenario."""

    @property
    def contaminated(self) -> bool:
        return self.status == "contaminated"
