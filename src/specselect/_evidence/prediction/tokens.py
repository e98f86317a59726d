"""Acceptance telemetry -> tokens per step: E per drafting step, E_all per target step (pure counting)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from specselect.records.evidence.prediction import RateKind

__all__ = [
    "AcceptanceTelemetry",
    "StepCounts",
    "expected_tokens_iid",
    "expected_tokens_per_step",
    "per_position_rates_from_counts",
    "step_counts",
]

_TOLERANCE = 1e-9


def expected_tokens_per_step(rates: Sequence[float], rate_kind: RateKind = "cumulative") -> float:
    """E = 1 + sum_i P(first i accepted); ValueError for rates outside [0, 1] or rising cumulative rates."""
    values = [float(r) for r in rates]
    if any(not (-_TOLERANCE <= r <= 1 + _TOLERANCE) for r in values):
        raise ValueError(f"acceptance rates must lie in [0, 1], got {values}")
    values = [min(max(r, 0.0), 1.0) for r in values]
    match rate_kind:
        case "conditional":  # P(accept i | accepted i - 1): the cumulative rate is their running product
            values = list(itertools.accumulate(values, lambda running, q: running * q))
        case _ if any(later > earlier + _TOLERANCE for earlier, later in itertools.pairwise(values)):
            raise ValueError(f"cumulative acceptance rates cannot rise with position, got {values}")
    return 1.0 + math.fsum(values)


def expected_tokens_iid(acceptance_rate: float, k: int) -> float:
    """E = (1 - a^(k+1)) / (1 - a) for an i.i.d. per-token acceptance rate a and k draft tokens (k + 1 at a = 1)."""
    a = float(acceptance_rate)
    if not 0.0 <= a <= 1.0 or k < 0:
        raise ValueError(f"need 0 <= acceptance_rate <= 1 and k >= 0, got a={a}, k={k}")
    if a == 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def per_position_rates_from_counts(accepted_per_position: Sequence[int], num_drafts: int) -> tuple[float, ...] | None:
    """Cumulative per-position rates from counters (accepted at position i / drafts); None without drafts."""
    if num_drafts <= 0 or not accepted_per_position or any(c < 0 for c in accepted_per_position):
        return None
    return tuple(min(1.0, c / num_drafts) for c in accepted_per_position)


class AcceptanceTelemetry(BaseModel):
    """What the engine reported about a candidate's proposals, plus its decode token COUNT (never a time)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_position_rates: tuple[float, ...]
    rate_kind: RateKind = "cumulative"
    num_drafts: int | None = Field(default=None, ge=0)
    """Drafting (verify) steps over exactly these requests: the server's draft counter delta."""
    decode_tokens: int | None = Field(default=None, ge=0)
    """Tokens the candidate emitted after each request's first token, summed over the requests."""

    @property
    def k(self) -> int:
        """Draft tokens proposed per step (positions reported)."""
        return len(self.per_position_rates)


class StepCounts(BaseModel):
    """Tokens per step implied by the telemetry: E per drafting step, E_all per target step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    expected_tokens_per_step: float
    tokens_per_target_step: float
    drafting_steps: int | None
    plain_steps: int | None
    """None with `drafting_steps` when the draft count is unknown (then every step is taken to draft)."""


def step_counts(telemetry: AcceptanceTelemetry) -> StepCounts:
    """E, and with the draft count and decode tokens the plain steps P = T - D * E; ValueError on bad rates."""
    expected = expected_tokens_per_step(telemetry.per_position_rates, telemetry.rate_kind)
    drafts, tokens = telemetry.num_drafts, telemetry.decode_tokens
    if drafts is None or tokens is None or drafts + max(0, round(tokens - drafts * expected)) == 0:
        return StepCounts(
            expected_tokens_per_step=expected,
            tokens_per_target_step=expected,
            drafting_steps=None,
            plain_steps=None,
        )
    plain = max(0, round(tokens - drafts * expected))
    return StepCounts(
        expected_tokens_per_step=expected,
        tokens_per_target_step=(drafts * expected + plain) / (drafts + plain),
        drafting_steps=drafts,
        plain_steps=plain,
    )
