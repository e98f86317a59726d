"""A sweep's expected duration, stated before it starts (a budget, not a promise)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from specselect.records.evidence.sweeps import DurationEstimate, ScenarioDuration

__all__ = ["ScenarioLoad", "estimate_duration"]


class ScenarioLoad(BaseModel):
    """One scenario run on one server: its concurrency, request count (warm-up included) and token cap."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    concurrency: int = Field(gt=0)
    n_requests: int = Field(gt=0)
    """Warm-up requests included."""
    max_tokens: int = Field(gt=0)


def _require(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"estimate_duration: {name}={value!r} must be finite and {bound}")


def estimate_duration(
    *,
    servers_to_start: int,
    startup_s: float,
    scenarios: Sequence[ScenarioLoad],
    tokens_per_s: float,
    requests_per_s: float | None = None,
) -> DurationEstimate:
    """Expected seconds for starting `servers_to_start` servers and running every scenario run in `scenarios`.

    `scenarios` lists every (server, scenario) run. Raises ValueError for a negative server count or start-up
    time (0 is allowed: an already running server) and for a rate that is not > 0.
    """
    if isinstance(servers_to_start, bool) or not isinstance(servers_to_start, int) or servers_to_start < 0:
        raise ValueError(f"estimate_duration: servers_to_start={servers_to_start!r} must be an integer >= 0")
    _require("startup_s", startup_s, allow_zero=True)
    _require("tokens_per_s", tokens_per_s)
    if requests_per_s is not None:
        _require("requests_per_s", requests_per_s)
    per: list[ScenarioDuration] = []
    for load in scenarios:
        seconds = load.n_requests * load.max_tokens / (tokens_per_s * min(load.concurrency, load.n_requests))
        if requests_per_s is not None:
            seconds = max(seconds, load.n_requests / requests_per_s)
        per.append(ScenarioDuration(name=load.name, seconds=seconds))
    total = servers_to_start * startup_s + sum(d.seconds for d in per)
    return DurationEstimate(
        seconds=total,
        servers=servers_to_start,
        startup_s=startup_s,
        tokens_per_s=tokens_per_s,
        requests_per_s=requests_per_s,
        per_scenario=tuple(per),
    )
