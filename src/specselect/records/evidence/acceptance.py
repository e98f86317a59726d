"""The acceptance spread: acceptance per draft position with its interval (computed by `evidence.acceptance`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["SPREAD_RULE", "AcceptanceSpread", "PositionSpread"]


SPREAD_RULE = (
    "per draft position i: verify steps that accepted more than i draft tokens / verify steps, over the measured "
    "requests' per-request counters (the server counters' per-position rate); interval: cluster bootstrap over "
    "items at the policy's level"
)


class PositionSpread(BaseModel):
    """One draft position's acceptance rate and its interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    position: int
    rate: float
    low: float | None
    high: float | None


class AcceptanceSpread(BaseModel):
    """Acceptance per draft position of one candidate in one scenario, with intervals."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_requests: int
    n_items: int
    spec_steps: int
    acceptance_rate: float | None
    """Accepted / drafted tokens over the same requests."""
    per_position: tuple[PositionSpread, ...]
    level: float
    method: str
    rule: str = SPREAD_RULE

    def rates(self) -> tuple[float, ...]:
        """The per-position rates, in position order."""
        return tuple(p.rate for p in self.per_position)
