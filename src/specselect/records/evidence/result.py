"""What the evidence pipeline produces: per candidate and scenario the pair evidence, its statistics and the
decision, with every policy it applied (`evidence.json` is `Evidence` plus the document header; built by
`evidence.pipeline`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect._core.decision import DecisionResult, Thresholds
from specselect._core.pairing import PairEvidence
from specselect.records.evidence.capacity import CapacityCost, CapacityPolicy
from specselect.records.evidence.categories import CategoryBreakdown
from specselect.records.evidence.parity import ScenarioParity
from specselect.records.evidence.prediction import SpeedupPrediction
from specselect.records.evidence.rounds import (
    DriftCheck,
    Estimand,
    LookPoint,
    LookSchedule,
    PairLook,
    RoundEstimate,
    RoundsPlan,
    VariancePool,
)
from specselect.records.evidence.sampled_parity import SampledParity, SampledParityPolicy
from specselect.records.evidence.segments import InputLengthSegments
from specselect.records.evidence.stats import BootstrapPolicy, PairedStats
from specselect.records.evidence.sweeps import SweepAnalysis
from specselect.records.telemetry import SpecTelemetry

__all__ = ["Evidence", "EvidencePolicy", "ParityPassPolicy", "ScenarioEvidence"]


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
    capacity: tuple[CapacityCost, ...] = ()
    """Each candidate's KV-cache cost against its baseline (empty when no engine reported its KV cache)."""
    capacity_policy: CapacityPolicy | None = None
    """The capacity gate applied (and its rule), when there were costs to state."""
