"""`handoff.json`'s document: completed + comparable candidates per scenario, identities, sweep advice, the
answer for the plan's traffic mix, and how to start each measured configuration yourself."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from specselect.records.document import RESULTS_SCHEMA_VERSION, ResultsDocument
from specselect.records.evidence.acceptance import AcceptanceSpread
from specselect.records.evidence.capacity import CapacityCost
from specselect.records.evidence.mix import MixEstimate, MixRatio
from specselect.records.evidence.rounds import Estimand
from specselect.records.evidence.sweeps import DerivedSchedule
from specselect.records.server import ServeFlags

__all__ = [
    "HANDOFF_SCHEMA_VERSION",
    "Handoff",
    "HandoffCandidate",
    "HandoffConcurrency",
    "HandoffControl",
    "HandoffGroup",
    "HandoffLength",
    "HandoffMix",
    "HandoffMixOption",
    "HandoffRouting",
    "HandoffScenario",
    "HandoffSegment",
    "HandoffSingle",
    "HandoffTrack",
]

HANDOFF_SCHEMA_VERSION = 4
"""handoff.json's version: 3 puts the best single configuration first in `mix` (`single`, then `routing`); version 2
documents (whose `mix.recommendation` routes workloads) are still read, without those two. 4 says what the
decisions are about (`estimand`, `estimand_statement`); version 3 documents read with both None."""


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
    acceptance_spread: AcceptanceSpread | None = None
    """Acceptance per draft position with its interval, from the per-request counters (None when not exported)."""
    prompts: int | None = None
    """Since schema 4: the prompts the speedup rests on, and under the traffic estimand the prompts its decision
    needs against the minimum speedup (`prompts_needed`) and whether it had them (`prompts_verdict`: enough,
    more_prompts, more_rounds; None under frozen_prompts)."""
    prompts_needed: int | None = None
    prompts_verdict: str | None = None
    lossy: str | None = None
    """Why this configuration's verification is not exact: deployed, its outputs are NOT the target's (the plan
    opted in with `allow_lossy`; quality was the distribution test's). None: exact verification."""


class HandoffScenario(BaseModel):
    """The hand-off for one scenario: comparable candidates and the recommended one (if any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    workload: str
    concurrency: int
    temperature: float = 0.0
    """The sampling temperature it was measured at: its recommendation holds there (acceptance falls as it rises)."""
    candidates: tuple[HandoffCandidate, ...]
    recommended: str | None
    """The accepted candidate with the highest speedup lower bound; None keeps the target-only baseline."""
    workload_key: str | None = None
    """The frozen workload's identity key the scenario was measured on."""
    baseline_seconds: float | None = None
    """The default baseline's mean seconds per measured request here (what the mix weighs time with)."""


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
    temperature: float = 0.0
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
    temperature: float = 0.0
    status: str
    recommended_length: int | None
    recommended_candidate: str | None
    best_length: int | None
    reason: str


class HandoffGroup(BaseModel):
    """How to start one measured group's configuration yourself, and what it cost to start here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    role: str
    family: str
    run_status: str
    serve: ServeFlags | None
    """The exact flags (None when specselect started nothing: kind "openai")."""
    startup_s: float | None = None
    derived_schedule: DerivedSchedule | None = None


class HandoffSegment(BaseModel):
    """Where to enable a candidate, for one workload of the mix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    share: float
    """The workload's share of the deployment's requests."""
    enabled: bool
    levels: tuple[int, ...]
    """The concurrency levels it runs at (the lowest level up to the cut-off, every one accepted)."""
    why: str
    losing_categories: tuple[str, ...] = ()
    """Categories of the workload whose speedup interval lies entirely below 1.0 at an enabled level."""


class HandoffMixOption(BaseModel):
    """One candidate's answer for the mix: enabled everywhere, and enabled only on its segments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    everywhere: MixEstimate | None
    everywhere_note: str | None = None
    """Why `everywhere` is missing (a weighted scenario without comparable evidence)."""
    on_segments: MixEstimate | None
    segments: tuple[HandoffSegment, ...]
    concurrency_cutoff: int | None
    """Speculation only up to this many concurrent requests (None: at every measured level, or nowhere)."""
    single_excluded: str | None = None
    """Why it cannot be the single configuration (clearly slower than the baseline on a workload, outputs failed,
    a latency or memory limit clearly exceeded, a weighted scenario without evidence); None: it can."""


class HandoffSingle(BaseModel):
    """The best single server configuration for the mix: one candidate on every request, or the baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str | None
    """None: the target-only baseline."""
    family: str | None = None
    estimate: MixEstimate | None = None
    """The candidate on every request (None for the baseline: exactly 1.0)."""
    faster_than_baseline: bool
    """The estimate's interval lies entirely above 1.0 (False for the baseline itself)."""
    runner_up: str | None = None
    """The next configuration by point: a candidate on every request; None: the baseline, or no other."""
    versus_runner_up: MixRatio | None = None
    """This configuration's mix speedup over the runner-up's, paired (None when the runner-up is the baseline:
    `estimate` is that comparison)."""
    eligible: tuple[str, ...] = ()
    """The candidates that could serve every request, best point first."""
    rule: str


class HandoffRouting(BaseModel):
    """The second answer: a candidate on the workloads where it was accepted, the baseline on the others."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    estimate: MixEstimate
    gain: MixRatio | None
    """The routed mix over the single configuration, paired on the same draws (None in documents written before
    schema 3)."""
    recommendation: str
    serve: ServeFlags | None = None
    """The routed candidate's flags, its concurrency cut-off written in where it has one."""
    serve_note: str | None = None


class HandoffMix(BaseModel):
    """The answer for the plan's `[traffic]` mix: the best single configuration first, routing second."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workloads: dict[str, float]
    concurrency: dict[int, float]
    options: tuple[HandoffMixOption, ...]
    """Every candidate with comparable evidence in the mix, best first (highest lower bound on its segments)."""
    recommended: str | None
    """The first answer's candidate: the single configuration's (None: the baseline). Before schema 3, the routed
    recommendation's."""
    recommendation: str
    """The first answer in words (before schema 3, the routed recommendation)."""
    serve: ServeFlags | None = None
    """The first answer's exact flags: the single configuration's, the target-only baseline's when it is the
    answer (before schema 3, the routed recommendation's)."""
    serve_note: str | None = None
    rule: str
    single: HandoffSingle | None = None
    """The best single configuration (None in documents written before schema 3)."""
    routing: HandoffRouting | None = None
    """Routing workloads to different configurations, with its gain over `single`; None: see `routing_note`."""
    routing_note: str | None = None


class HandoffControl(BaseModel):
    """An A/A control in one scenario: the baseline's configuration against the baseline, decided as a candidate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    control: str
    track: str
    scenario: str
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    level: float | None
    contains_one: bool | None
    """Whether its interval contains 1.0 (identical servers should, at the interval's level)."""
    decision: str
    reason: str
    outputs_agree: bool | None
    """Whether its outputs equal the baseline's token for token (None: not compared)."""


class Handoff(ResultsDocument):
    """`handoff.json`: only completed + comparable candidates, per scenario, with identities and the rule."""

    READABLE_SCHEMA_VERSIONS: ClassVar[tuple[int, ...]] = (RESULTS_SCHEMA_VERSION, 3, HANDOFF_SCHEMA_VERSION)
    schema_version: int = HANDOFF_SCHEMA_VERSION
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
    mix: HandoffMix | None = None
    """The answer for the plan's [traffic] mix; None without [traffic] (see `mix_note`)."""
    mix_note: str | None = None
    groups: tuple[HandoffGroup, ...] = ()
    """Every group that ran, with the flags to start its configuration yourself."""
    plan: dict[str, Any] | None = None
    """The validated plan (as the manifest records it), so `specselect check` can measure again from this file."""
    plan_source: str | None = None
    rounds: int = 1
    """Rounds before the first look (`[run] rounds`): each group launched once per round."""
    looks: tuple[int, ...] = ()
    """Rounds completed at each look (`[run] looks`); a candidate with an open pair ran on to the next."""
    controls: tuple[HandoffControl, ...] = ()
    capacity: tuple[CapacityCost, ...] = ()
    """Each candidate's KV-cache cost against its baseline (tokens lost, concurrency held, the plan's gate)."""
    """A/A controls per scenario (`[run] aa_control`): whether identical servers stayed unaccepted."""
    sampling: str | None = None
    """The sampling the decisions hold for, and how output quality was judged there."""
    estimand: Estimand | None = None
    """What the decisions are about: the deployment's traffic, or the frozen prompts (None: a version 3 document,
    which did not say)."""
    estimand_statement: str | None = None
    """The same in one sentence (`records.evidence.rounds.estimand_statement`)."""
