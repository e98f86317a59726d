"""What the evidence pipeline produces: per candidate and scenario the pair evidence, its statistics and the
decision, with every rule it applied (`evidence.json` is this plus the document header)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.core.decision import DecisionResult, Thresholds
from specselect.core.pairing import PairEvidence
from specselect.engines.acceptance import SpecTelemetry
from specselect.evidence.categories import CategoryBreakdown
from specselect.evidence.parity import ScenarioParity
from specselect.evidence.prediction import SpeedupPrediction
from specselect.evidence.replication import AANoiseFloor, ReplicatedEstimate, ReplicationPolicy
from specselect.evidence.segments import InputLengthSegments
from specselect.evidence.sequential import SequentialPlan
from specselect.evidence.stats import BootstrapPolicy, PairedStats
from specselect.evidence.sweeps import SweepAnalysis

__all__ = [
    "AA_AS_CANDIDATE_RULE",
    "AA_DECISION_RULE",
    "CONTAMINATION_RULE",
    "MISSING_UNCONTAMINATED",
    "PARITY_PASS_RULE",
    "RULE",
    "TRACK_RULE",
    "Evidence",
    "EvidencePolicy",
    "ParityPassPolicy",
    "ScenarioEvidence",
    "ScenarioNoiseFloor",
]

RULE = (
    "contract s5: evidence not comparable/incomplete -> not_evaluated; incomplete -> tune; quality (exact output "
    "parity at temperature 0) failed -> reject; throughput_speedup >= min AND ttft_ratio <= max AND "
    "e2e_p95_ratio <= max AND peak memory <= budget -> accept, else tune; an accept whose speedup interval "
    "reaches below the minimum -> tune (insufficient_confidence); an accept whose TTFT or E2E p95 ratio interval "
    "(two-stage over launches when a side has several) reaches above its limit -> tune "
    "(insufficient_latency_confidence, the check in confidence.unsettled_checks)"
)

TRACK_RULE = (
    "contract s6: each candidate is paired with the target-only baseline of its own target (its track); raw "
    "throughput and latency are compared only within a track, across tracks only within-pair ratios"
)
PARITY_PASS_RULE = (
    "untimed pass (one request per item, concurrency 1, top-2 logprobs) by every candidate over the items whose "
    "timed output differs from the baseline's, and with parity_pass = 'full' also by the baseline over every "
    "item; a first divergence where the target's top-2 logprobs differ by less than the threshold is a near_tie "
    "(numerics: parity inconclusive, not failed), else a real_difference; a divergence in the timed records is "
    "judged with the baseline pass's logprobs when it ran, else the candidate pass's (both run the target on the "
    "same prefix up to it), where that pass produced the same tokens up to the divergence"
)
CONTAMINATION_RULE = (
    "endpoints specselect does not own: /metrics is scraped around an idle gap before and after each scenario; "
    "request/token counters moving while specselect sends nothing, or more finished requests than sent, mark "
    "the scenario contaminated; servers specselect starts: other processes taking more than "
    "thresholds.max_host_foreign_cpu_share of all CPU time during a scenario mark it contaminated (see "
    "measure.hostload); a contaminated scenario makes its pair incomplete (missing uncontaminated_measurement; "
    "decision tune, reason incomplete_evidence: measure again while nothing else uses the endpoint or the machine)"
)
MISSING_UNCONTAMINATED = "uncontaminated_measurement"
AA_AS_CANDIDATE_RULE = (
    "A/A as a candidate: a baseline's 2nd, 4th, ... launches are taken as a speculative candidate that proposes, "
    "against its 1st, 3rd, ...: throughput from the A/A speedup's two rates, TTFT and E2E p95 over each half's "
    "requests, quality from the launches' output agreement; decided by the plan's thresholds, the A/A "
    "interval and the halves' latency intervals, without the noise floor check (computed from this pair). "
    "Identical servers must not be accepted."
)

AA_DECISION_RULE = (
    "A/A noise floor: where a track's baseline completed two or more launches of a scenario, its 2nd, 4th, ... "
    "launches against its 1st, 3rd, ... give the band exp(+-s) identical servers land in (noise_floors); an "
    "accept of a candidate "
    "in that scenario needs its speedup interval's low (its point without one) above the band's upper edge, "
    "else tune with reason within_noise_floor (check outside_noise_floor)"
)


class ParityPassPolicy(BaseModel):
    """How the optional logprob parity pass ran and how it classifies first divergences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["auto", "full", "off"]
    ran: bool
    """False when off, or at a temperature above 0 (outputs are sampled: no exact parity)."""
    baseline_pass: bool = False
    """True with mode 'full': the baseline also ran the pass over every item (pass-vs-pass comparison)."""
    concurrency: int = 1
    logprobs: int = 2
    near_tie_threshold_nats: float
    rule: str


class EvidencePolicy(BaseModel):
    """The rules applied to turn measurements into decisions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thresholds: Thresholds
    bootstrap: BootstrapPolicy
    parity_unit: Literal["tokens", "characters"]
    rule: str
    parity_pass: ParityPassPolicy | None = None
    track_rule: str | None = None
    contamination_rule: str | None = None
    host_foreign_cpu_share_limit: float | None = None
    """Scenarios with a larger share of CPU time taken by other processes are contaminated."""
    replication: ReplicationPolicy | None = None
    """How several server launches per side enter THE speedup's interval (`evidence.replication`)."""
    noise_floor_rule: str | None = None
    aa_as_candidate_rule: str | None = None


class ScenarioEvidence(BaseModel):
    """One candidate in one scenario: the pair evidence, its statistics and the decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    scenario: str
    workload: str
    concurrency: int
    track: str
    evidence: PairEvidence
    decision: DecisionResult
    parity: ScenarioParity | None = None
    stats: PairedStats | None = None
    speedup: ReplicatedEstimate | None = None
    """THE speedup over every launch of both sides: the point and interval the decision used (`stats` carries
    the same estimate as `throughput_speedup`), its variance components and each launch's rate."""
    telemetry: SpecTelemetry | None = None
    prediction: SpeedupPrediction | None = None
    categories: CategoryBreakdown | None = None
    parity_pass: ScenarioParity | None = None
    """Baseline vs candidate in the untimed logprob pass (concurrency 1), divergences classified."""
    contamination: tuple[str, ...] = ()
    """Why this pair's measurements are not trusted: other traffic hit an endpoint (then evidence is
    `incomplete`, missing `uncontaminated_measurement`)."""
    segments: InputLengthSegments | None = None
    """The pairs split by prompt length (`evidence.segments`): where in the length range the candidate pays."""


class ScenarioNoiseFloor(BaseModel):
    """A track baseline's A/A noise floor in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    track: str
    scenario: str
    floor: AANoiseFloor
    as_candidate: DecisionResult | None = None
    """The plan's decision rule applied to this A/A pair as if it were a candidate (`AA_AS_CANDIDATE_RULE`):
    anything but accept, or the machine drifted more than the thresholds allow for."""


class Evidence(BaseModel):
    """Every candidate x scenario of a run, the policy applied, a verdict per candidate and the sweeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: EvidencePolicy
    entries: tuple[ScenarioEvidence, ...]
    verdicts: dict[str, str]
    sweeps: SweepAnalysis | None = None
    noise_floors: tuple[ScenarioNoiseFloor, ...] = ()
    """The baselines' A/A noise floors (baselines measured in two or more launches)."""
    sequential: SequentialPlan | None = None
    """With `max_launches`: every pair's last step of the sequential rule, the launches spent and saved."""
