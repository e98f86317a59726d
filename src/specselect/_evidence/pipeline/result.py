"""What the evidence pipeline produces: per candidate and scenario the pair evidence, its statistics and the
decision, with every rule it applied (`evidence.json` is this plus the document header)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect._core.decision import DecisionResult, Thresholds
from specselect._core.pairing import PairEvidence
from specselect._evidence.categories import CategoryBreakdown
from specselect._evidence.parity import ScenarioParity
from specselect._evidence.prediction import SpeedupPrediction
from specselect._evidence.rounds.design import LookSchedule
from specselect._evidence.rounds.drift import DriftCheck
from specselect._evidence.rounds.estimate import Estimand, RoundEstimate, VariancePool
from specselect._evidence.rounds.looks import LookPoint, PairLook, RoundsPlan
from specselect._evidence.sampled_parity import SampledParity, SampledParityPolicy
from specselect._evidence.segments import InputLengthSegments
from specselect._evidence.stats import BootstrapPolicy, PairedStats
from specselect._evidence.sweeps import SweepAnalysis
from specselect.records.telemetry import SpecTelemetry

__all__ = [
    "AA_CONTROL_RULE",
    "CONTAMINATION_RULE",
    "MISSING_UNCONTAMINATED",
    "PARITY_PASS_RULE",
    "RULE",
    "TRACK_RULE",
    "Evidence",
    "EvidencePolicy",
    "ParityPassPolicy",
    "ScenarioEvidence",
]

RULE = (
    "contract s5: evidence not comparable/incomplete -> not_evaluated; incomplete -> tune; quality (exact output "
    "parity at temperature 0) failed -> reject; throughput_speedup >= min AND ttft_ratio (p95) <= max AND "
    "e2e_p95_ratio <= max AND peak memory <= budget -> accept, else tune; the speedup is the paired-round "
    "estimate (exp of the mean per-round log ratio) and an accept needs its interval's low >= the minimum "
    "(insufficient_confidence) with launch variation in it (no_launch_replication: one round); the mean TTFT and "
    "mean E2E ratios, paired by round, must not lie clearly above their limits (interval low > limit: "
    "ttft_mean_regression, e2e_mean_regression) and, with latency_gate = shown_within, must lie within them "
    "(insufficient_latency_confidence)"
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
    "measure.hostload); a contaminated launch's round is left out of that scenario's pairs (named in the "
    "estimate's excluded_rounds); a pair with no round left is incomplete (missing uncontaminated_measurement; "
    "decision tune, reason incomplete_evidence: measure again while nothing else uses the endpoint or the machine)"
)
MISSING_UNCONTAMINATED = "uncontaminated_measurement"
AA_CONTROL_RULE = (
    "A/A control: the baseline's own configuration, launched next to the baseline in every round, is paired with "
    "it like a candidate and decided by the plan's thresholds as if it proposed (execution path and mechanism "
    "taken as speculative); identical servers must not be accepted, and their interval should contain 1.0 at its "
    "level; their round variances join the run's pool (more degrees of freedom for every pair)"
)


class ParityPassPolicy(BaseModel):
    """How the optional logprob parity pass ran and how it classifies first divergences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["auto", "full", "off"]
    ran: bool
    """False when off, or when no scenario is at temperature 0 (outputs are sampled: no exact parity)."""
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
    distribution_test: SampledParityPolicy | None = None
    """Temperature > 0: how the parity passes' samples were tested (quality is a test on distributions)."""
    track_rule: str | None = None
    contamination_rule: str | None = None
    host_foreign_cpu_share_limit: float | None = None
    """Scenarios with a larger share of CPU time taken by other processes are contaminated."""
    design_rule: str | None = None
    """How rounds are ordered and paired (`evidence.rounds.design`)."""
    estimand: Estimand = "frozen_prompts"
    """What the intervals are about: a rerun on the same items, or the traffic the items were drawn from."""
    schedule: LookSchedule | None = None
    """The looks and the accept's one-sided error budget spent over them (None: one look at every round)."""
    aa_control_rule: str | None = None


class ScenarioEvidence(BaseModel):
    """One candidate in one scenario: the pair evidence, its statistics and the decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    scenario: str
    workload: str
    concurrency: int
    temperature: float = 0.0
    """The scenario's sampling temperature (0 = greedy: quality is exact parity; above, the distribution test)."""
    track: str
    evidence: PairEvidence
    decision: DecisionResult
    parity: ScenarioParity | None = None
    stats: PairedStats | None = None
    speedup: RoundEstimate | None = None
    """THE speedup: the paired-round estimate the decision used (`stats` carries it as `throughput_speedup`),
    with each round's rates and ratio and the variance its interval rests on."""
    latency: dict[str, RoundEstimate] = {}
    """`ttft_mean`, `e2e_mean`: the mean latency ratios, paired by round, the latency gates judged."""
    drift: DriftCheck | None = None
    look: LookPoint | None = None
    """The look whose decision this is: the first that accepted the pair, else its last."""
    looks: tuple[PairLook, ...] = ()
    """The pair at every look it was looked at."""
    telemetry: SpecTelemetry | None = None
    prediction: SpeedupPrediction | None = None
    categories: CategoryBreakdown | None = None
    parity_pass: ScenarioParity | None = None
    """Baseline vs candidate in the untimed logprob pass (concurrency 1), divergences classified."""
    sampled_parity: SampledParity | None = None
    """Temperature > 0: the distribution test of the workload's parity-pass samples (the same for every
    concurrency of the workload); `parity` is then None (sampled outputs need not be equal)."""
    contamination: tuple[str, ...] = ()
    """Why rounds of this pair are not trusted (a busy host, other traffic on an endpoint): left out of its
    estimates; with none left the evidence is `incomplete`, missing `uncontaminated_measurement`."""
    segments: InputLengthSegments | None = None
    """The pairs split by prompt length (`evidence.segments`): where in the length range the candidate pays."""


class Evidence(BaseModel):
    """Every candidate x scenario of a run, the policy applied, a verdict per candidate and the sweeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: EvidencePolicy
    entries: tuple[ScenarioEvidence, ...]
    verdicts: dict[str, str]
    sweeps: SweepAnalysis | None = None
    controls: tuple[ScenarioEvidence, ...] = ()
    """A/A controls: the baseline's configuration launched next to it in every round and decided as if it were
    a candidate that proposes (`AA_CONTROL_RULE`): identical servers must not be accepted, and their interval
    should contain 1.0 at its level."""
    pools: tuple[VariancePool, ...] = ()
    """Per metric, the round variances of the run's pairs at the last look and whether they were pooled."""
    looks: tuple[LookPoint, ...] = ()
    """The looks the evidence was decided at (rounds used, level)."""
    plan: RoundsPlan | None = None
    """The rule at the last look: every pair's state and why no more rounds ran."""
