"""`handoff.json`'s document: completed + comparable candidates per scenario, identities, sweep advice."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect.artifacts.docbase import ResultsDocument

__all__ = ["Handoff", "HandoffCandidate", "HandoffConcurrency", "HandoffLength", "HandoffScenario", "HandoffTrack"]


class HandoffCandidate(BaseModel):
    """A completed, comparable candidate in one scenario, with what a deployment decision needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    method: str | None
    decision: str
    reason: str
    confidence: str
    throughput_speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    ttft_ratio: float | None
    e2e_p95_ratio: float | None
    peak_memory_mb: float | None
    parity: str | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    telemetry_source: str | None
    speculative_config: dict[str, Any] | None
    proposer_snapshot: str | None
    track: str = "g0_target_only"
    """The baseline this candidate was paired with: compare only its ratios with other tracks' ratios."""


class HandoffScenario(BaseModel):
    """The hand-off for one scenario: comparable candidates and the recommended one (if any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    workload: str
    concurrency: int
    candidates: tuple[HandoffCandidate, ...]
    recommended: str | None
    """The accepted candidate with the highest speedup lower bound; None keeps the target-only baseline."""


class HandoffTrack(BaseModel):
    """One target with its own target-only baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The track's baseline group (`g0_target_only` for the plan's own target)."""
    target_ref: str | None
    target_snapshot: str
    engine_version: str | None
    baseline_status: str
    candidates: tuple[str, ...]


class HandoffConcurrency(BaseModel):
    """Up to which concurrency a candidate paid on one workload (from a concurrency sweep)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    workload: str
    levels: tuple[int, ...]
    status: str
    pays_up_to: int | None
    crossover_at: int | None
    recommendation: str
    """e.g. "enable up to 4 concurrent requests"."""
    reason: str
    engine_setting: dict[str, Any] | None = None
    """Speculative-config keys that implement the cut-off, where the engine has one (see the note)."""
    engine_setting_note: str | None = None


class HandoffLength(BaseModel):
    """The proposal length to use in one scenario, among one plan entry's sub-candidates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sweep: str
    fixed: dict[str, Any]
    workload: str
    concurrency: int
    status: str
    recommended_length: int | None
    recommended_candidate: str | None
    best_length: int | None
    reason: str


class Handoff(ResultsDocument):
    """`handoff.json`: only completed + comparable candidates, per scenario, with identities and the rule."""

    label: str
    plan_hash: str
    engine_kind: str
    engine_version: str | None
    target_ref: str
    target_snapshot: str
    rule: str
    scenarios: tuple[HandoffScenario, ...]
    tracks: tuple[HandoffTrack, ...] = ()
    track_rule: str | None = None
    concurrency_limits: tuple[HandoffConcurrency, ...] = ()
    """From concurrency sweeps: enable each candidate up to the crossover (rule: evidence.json `sweeps`)."""
    proposal_lengths: tuple[HandoffLength, ...] = ()
    """From proposal-length sweeps: the smallest length statistically indistinguishable from the best."""
