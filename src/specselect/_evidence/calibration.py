"""How often the decision rule is right: simulated runs with a known truth, through the rule's own functions.

A simulated run has `candidates` candidates, each measured on `pairs` workloads of `items` frozen prompts, all
paired with one baseline launch per round, in the rounds of its `looks`. Every request is drawn from a noise
model (docs/statistics.md):

- each prompt has its own output length (`tokens`, uniform), first-token time and decode rate; the candidate
  decodes it `speedup x w` faster, w log-normal with sd `item_speedup_sd` (prompts differ in what the mechanism
  gains), its first token is `ttft_ratio` times the baseline's;
- the truth is the ratio of totals the estimand asks about: the frozen prompts' own (`truth = "frozen_prompts"`,
  w rescaled so these prompts' noise-free ratio of totals is exactly `speedup`) or the population's the prompts
  were drawn from (`truth = "population"`: the expected ratio of totals is exactly `speedup`, these prompts'
  own ratio differs from it by their sampling);
- each launch scales every request's times by exp(e), e = launch_sd x (sqrt(rho) g + sqrt(1 - rho) eps): g is
  the round's effect, shared by every launch of the round (`round_correlation` rho), eps the launch's own; across
  the workloads one launch measures, eps correlates `scenario_correlation`; a share `heavy_tail_share` of
  launches is slower by `heavy_tail_shift` launch sds (a heavy tail); `drift_per_launch` adds a trend linear in
  the launches' order (ABBA, `evidence.rounds.design`);
- each request's E2E and TTFT get their own noise (`request_sd`; `ttft_request_sd` with `ttft_jitter_s`).

Each look analyses the rounds so far with `pipeline.rounds.analyse_look` (pooled variances, the look's level),
decides every pair with `pipeline.rounds.decide_pair` on the contract's evidence (p95 points from the same
requests), runs on only while `evidence.rounds.looks.plan_rounds` says so, and keeps the decision of the first
accepting look -- the runner's own sequence. Pure and seeded: the same case and seed give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from specselect._core.decision import DecisionResult, LatencyGate, Thresholds
from specselect._core.pairing import PairEvidence, SideMetrics, build_pair_evidence
from specselect._core.status import Decision
from specselect._evidence.pipeline.launches import SideLaunches
from specselect._evidence.pipeline.rounds import PairEstimates, PairRounds, analyse_look, decide_pair
from specselect._evidence.rounds.design import TrackRound, round_order
from specselect._evidence.rounds.estimate import t_quantile
from specselect._evidence.rounds.looks import deciding_look, look_points, pair_state, plan_rounds
from specselect._evidence.samples import RequestSample
from specselect.records.evidence.rounds import Estimand, LookSchedule, PairLook, RoundEstimate

__all__ = [
    "CalibrationCase",
    "CaseResult",
    "NoiseModel",
    "Prompts",
    "Truth",
    "draw_prompts",
    "launch_effects",
    "simulate_case",
]

_BASE_RATE = 22.0
"""Tokens per second of the simulated baseline (SmolLM2-135M on 2 cores, float32)."""
_RATE_SD = 0.1
_BASE_TTFT = 0.15
_TTFT_SD = 0.4
_BASELINE = "baseline"
_COVERAGE_LEVEL = 0.95

Truth = Literal["frozen_prompts", "population"]


class NoiseModel(BaseModel):
    """The noise of one simulated host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    launch_sd: float = Field(ge=0)
    """Standard deviation of a launch's log time factor."""
    round_correlation: float = Field(default=0.7, ge=0, le=1)
    """Correlation of the launch factors of one round (the part the round shares)."""
    scenario_correlation: float = Field(default=0.0, ge=0, le=1)
    """Correlation of one launch's own factor across the workloads it measured (1: a launch is one draw)."""
    request_sd: float = Field(default=0.05, ge=0)
    """A request's own E2E noise (log scale)."""
    ttft_request_sd: float = Field(default=0.03, ge=0)
    ttft_jitter_s: float = Field(default=0.010, ge=0)
    """A request's own TTFT noise: sqrt((jitter / ttft)^2 + ttft_request_sd^2) on the log scale, so a short
    prompt's first token is the noisier one (this host: ~12 % at 90 ms, ~5 % at 300 ms)."""
    heavy_tail_share: float = Field(default=0.0, ge=0, le=1)
    """Share of launches that are slow outliers."""
    heavy_tail_shift: float = Field(default=3.0, ge=0)
    """How much slower an outlier launch is, in launch sds of the log time factor."""
    drift_per_launch: float = 0.0
    """A trend in the log time factor per launch, in launch order (0.01: each launch 1 % slower)."""


class CalibrationCase(BaseModel):
    """A simulated experiment: the truth, the design and the rule's policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    speedup: float = Field(gt=0)
    """The true ratio of totals (the frozen prompts' or the population's, by `truth`)."""
    ttft_ratio: float = Field(default=1.0, gt=0)
    """The candidate's true TTFT over the baseline's, every prompt."""
    noise: NoiseModel
    items: int = Field(default=8, ge=2)
    pairs: int = Field(default=2, ge=1)
    """Workloads each candidate is measured on."""
    candidates: int = Field(default=1, ge=1)
    """Candidates paired with the one baseline launch of each round."""
    looks: tuple[int, ...] = (3,)
    confidence_level: float = 0.95
    latency_gate: LatencyGate = "not_clearly_worse"
    estimand: Estimand = "frozen_prompts"
    truth: Truth = "frozen_prompts"
    item_speedup_sd: float = Field(default=0.1, ge=0)
    tokens: tuple[int, int] = (20, 200)
    """The range of a prompt's output tokens (uniform, both ends included)."""


class CaseResult(BaseModel):
    """What the rule did over many simulated runs of one case (rates over pairs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case: CalibrationCase
    runs: int
    seed: int
    accept_rate: float
    """Share of pairs accepted (a false accept when the truth is at or below the minimum)."""
    coverage: float
    """Share of pairs whose first look's interval (at `first_look_level`) held the truth."""
    miss_low: float
    """Share of first-look intervals entirely above the truth (the side a false accept comes from)."""
    miss_high: float
    """Share of first-look intervals entirely below the truth."""
    coverage_95: float
    """The same first look's estimate with a 95 % interval (its se and df at that level): the level the
    issue's coverage target is stated at."""
    miss_low_95: float
    miss_high_95: float
    ttft_pass_rate: float
    """Share of pairs whose TTFT p95 point and mean gate both passed at the deciding look (the rest: refused)."""
    mean_rounds: float
    """Rounds the candidates ran, on average."""
    first_look_level: float
    frozen_truth_gap: float = 0.0
    """Mean |log(the frozen prompts' own ratio / the truth)| over the pairs: 0 when the truth is theirs."""
    short_of_prompts: float = 0.0
    """Traffic estimand: share of pairs whose deciding estimate said its prompts were too few (`more_prompts`)."""
    prompts_needed_median: float | None = None
    """Traffic estimand: the median of the deciding estimates' `prompts_needed` (None: none said a number)."""


@dataclass(frozen=True)
class Prompts:
    """One workload's frozen prompts: their noise-free times on both sides."""

    tokens: np.ndarray
    ttft: np.ndarray
    decode: np.ndarray
    """The baseline's decode seconds."""
    gain: np.ndarray
    """w: how much more (or less) than the typical prompt the mechanism speeds this one's decode."""
    scale: float
    """The typical decode speedup: the candidate decodes a prompt in decode / (scale x w)."""
    ttft_ratio: float

    @property
    def base_e2e(self) -> np.ndarray:
        return np.asarray(self.ttft + self.decode)

    @property
    def cand_e2e(self) -> np.ndarray:
        return np.asarray(self.ttft * self.ttft_ratio + self.decode / (self.scale * self.gain))

    @property
    def own_ratio(self) -> float:
        """These prompts' noise-free ratio of totals (baseline / candidate time): their own speedup."""
        return float(np.sum(self.base_e2e) / np.sum(self.cand_e2e))


def _decode_scale(case: CalibrationCase, ttft: np.ndarray, decode: np.ndarray, gain: np.ndarray) -> float:
    """The typical decode speedup that makes the truth's ratio of totals exactly `case.speedup`."""
    q = case.ttft_ratio
    if case.truth == "frozen_prompts":
        spent, inverse_gain = float(np.sum(ttft + decode)), float(np.sum(decode / gain))
        first = q * float(np.sum(ttft))
    else:  # expectations of the population the prompts are drawn from (log-normal factors, uniform tokens)
        mean_ttft = _BASE_TTFT * math.exp(_TTFT_SD**2 / 2.0)
        mean_decode = (sum(case.tokens) / 2.0) / _BASE_RATE * math.exp(_RATE_SD**2 / 2.0)
        spent, first = mean_ttft + mean_decode, q * mean_ttft
        inverse_gain = mean_decode * math.exp(case.item_speedup_sd**2 / 2.0)
    left = spent / case.speedup - first
    if left <= 0:
        raise ValueError(f"speedup {case.speedup} with ttft_ratio {q}: the first tokens alone exceed the time")
    return inverse_gain / left


def draw_prompts(case: CalibrationCase, rng: np.random.Generator) -> Prompts:
    """One workload's prompts, drawn from the case's population."""
    low, high = case.tokens
    tokens = rng.integers(low, high + 1, case.items).astype(np.float64)
    ttft = _BASE_TTFT * np.exp(rng.normal(0.0, _TTFT_SD, case.items))
    decode = tokens / (_BASE_RATE * np.exp(rng.normal(0.0, _RATE_SD, case.items)))
    gain = np.exp(rng.normal(0.0, case.item_speedup_sd, case.items))
    scale = _decode_scale(case, ttft, decode, gain)
    return Prompts(tokens=tokens, ttft=ttft, decode=decode, gain=gain, scale=scale, ttft_ratio=case.ttft_ratio)


def _groups(case: CalibrationCase) -> tuple[str, ...]:
    return (_BASELINE, *(f"candidate{k}" for k in range(case.candidates)))


def _positions(case: CalibrationCase, rounds: int) -> np.ndarray:
    """Each launch's place in the run's launch order, shape (rounds, groups): the design's ABBA order."""
    groups = _groups(case)
    track = TrackRound(baseline=groups[0], members=groups[1:])
    out = np.zeros((rounds, len(groups)))
    for r in range(rounds):
        order = round_order([track], r)
        out[r] = [r * len(groups) + order.index(g) for g in groups]
    return out


def launch_effects(case: CalibrationCase, rng: np.random.Generator, rounds: int) -> np.ndarray:
    """Log time factors of every launch, shape (rounds, groups: the baseline then the candidates, workloads)."""
    noise, sides = case.noise, 1 + case.candidates
    k, rho = noise.scenario_correlation, noise.round_correlation
    round_part = rng.normal(0.0, 1.0, (rounds, 1, 1))
    own = math.sqrt(k) * rng.normal(0.0, 1.0, (rounds, sides, 1)) + math.sqrt(1.0 - k) * rng.normal(
        0.0, 1.0, (rounds, sides, case.pairs)
    )
    effects = noise.launch_sd * (math.sqrt(rho) * round_part + math.sqrt(1.0 - rho) * own)
    slow = rng.random((rounds, sides, 1)) < noise.heavy_tail_share
    effects = effects + slow * noise.heavy_tail_shift * noise.launch_sd
    return np.asarray(effects + noise.drift_per_launch * _positions(case, rounds)[:, :, None])


def _samples(
    case: CalibrationCase, prompts: Prompts, effects: np.ndarray, rng: np.random.Generator, side: int
) -> tuple[RequestSample, ...]:
    """One side's requests in every round (`effects`: its launches' log factors, one per round)."""
    out: list[RequestSample] = []
    e2e0 = prompts.base_e2e if side == 0 else prompts.cand_e2e
    ttft0 = prompts.ttft if side == 0 else prompts.ttft * case.ttft_ratio
    sd = np.sqrt((case.noise.ttft_jitter_s / ttft0) ** 2 + case.noise.ttft_request_sd**2)
    for r, effect in enumerate(effects):
        factor = math.exp(float(effect))
        e2e = e2e0 * factor * np.exp(rng.normal(0.0, case.noise.request_sd, case.items))
        ttft = np.minimum(ttft0 * factor * np.exp(rng.normal(0.0, 1.0, case.items) * sd), e2e * 0.95)
        out.extend(
            RequestSample(
                item_id=f"i{i}",
                repeat=r,
                launch=r,
                completion_tokens=int(prompts.tokens[i]),
                ttft_s=float(ttft[i]),
                e2e_s=float(e2e[i]),
                decode_s=float(e2e[i] - ttft[i]),
            )
            for i in range(case.items)
        )
    return tuple(out)


def _p95_ms(samples: Sequence[RequestSample], field_name: str, rounds: int) -> float:
    values = [getattr(s, field_name) * 1000.0 for s in samples if s.launch < rounds]
    return float(np.percentile(values, 95))


def _side(role: str, samples: Sequence[RequestSample], rounds: int, rate: float | None) -> SideMetrics:
    return SideMetrics.model_validate(
        {
            "role": role,
            "run_status": "completed",
            "target_snapshot": "sim",
            "workload_key": "sim",
            "sampling_key": "sim",
            "execution_path": "target_only" if role == "baseline" else "speculative",
            "throughput_tokens_per_s": rate,
            "ttft_p95_ms": _p95_ms(samples, "ttft_s", rounds),
            "e2e_p95_ms": _p95_ms(samples, "e2e_s", rounds),
            "peak_memory_mb": 1000.0,
            "quality_ok": True,
            "mechanism_active": True if role == "candidate" else None,
        }
    )


def _evidence(pair: PairRounds, estimates: PairEstimates, rounds: int) -> PairEvidence:
    speedup = estimates.speedup
    base = _side("baseline", pair.baseline.samples, rounds, speedup.baseline_value)
    cand = _side("candidate", pair.candidate_side.samples, rounds, speedup.candidate_value)
    return build_pair_evidence(base, cand)


@dataclass
class _Tally:
    pairs: int = 0
    accepts: int = 0
    covered: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0, 0])
    """covered, low, high at the look's level; the same at 95 %."""
    ttft_pass: int = 0
    rounds: float = 0.0
    runs: int = 0
    truth_gap: float = 0.0
    short: int = 0
    needed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Run:
    """One simulated run's measurements: every pair, each workload's prompts."""

    pairs: tuple[PairRounds, ...]
    prompts: tuple[Prompts, ...]


def _draw_run(case: CalibrationCase, rng: np.random.Generator, rounds: int) -> _Run:
    effects = launch_effects(case, rng, rounds)
    prompts = tuple(draw_prompts(case, rng) for _ in range(case.pairs))
    pairs: list[PairRounds] = []
    for w, p in enumerate(prompts):
        base = SideLaunches(runs=(), records=[], samples=_samples(case, p, effects[:, 0, w], rng, 0))
        for k, name in enumerate(_groups(case)[1:], start=1):
            cand = SideLaunches(runs=(), records=[], samples=_samples(case, p, effects[:, k, w], rng, k))
            pairs.append(PairRounds(f"{name}/w{w}", name, f"w{w}", base, cand, excluded={}, track=_BASELINE))
    return _Run(pairs=tuple(pairs), prompts=prompts)


def _upto(pair: PairRounds, rounds: int) -> PairRounds:
    """A pair whose candidate stopped after `rounds` rounds (its baseline ran on for others)."""
    side = pair.candidate_side.upto(rounds)
    return PairRounds(pair.key, pair.candidate, pair.scenario, pair.baseline, side, pair.excluded, track=pair.track)


_History = dict[str, dict[int, tuple[DecisionResult, PairEstimates]]]


def _pair_look(p: PairRounds, history: _History, look: int, rounds: int, level: float) -> PairLook:
    chosen = history[p.key][deciding_look({k: d for k, (d, _) in history[p.key].items()})][0]
    state, why = pair_state(chosen)
    return PairLook(
        candidate=p.candidate,
        scenario=p.scenario,
        state=state,
        why=why,
        decision=chosen.decision.value,
        reason=chosen.reason,
        look=look,
        rounds=rounds,
        level=level,
    )


def _one_run(case: CalibrationCase, rng: np.random.Generator, tally: _Tally) -> None:
    schedule = LookSchedule.of_level(case.looks, case.confidence_level)
    thresholds = Thresholds(latency_gate=case.latency_gate)
    run = _draw_run(case, rng, schedule.max_rounds)
    history: _History = {p.key: {} for p in run.pairs}
    ran = dict.fromkeys(_groups(case)[1:], 0)
    active = set(ran)
    for point in look_points(schedule, schedule.max_rounds):
        pairs = [p if p.candidate in active else _upto(p, ran[p.candidate]) for p in run.pairs]
        analysis = analyse_look(
            pairs,
            point,
            estimand=case.estimand,
            basis="e2e",
            latency_level=case.confidence_level,
            minimum=thresholds.min_throughput_speedup,
        )
        looks = []
        for p in pairs:
            if p.candidate in active:
                est = analysis.pairs[p.key]
                history[p.key][point.look] = (decide_pair(_evidence(p, est, point.rounds), est, thresholds), est)
            looks.append(_pair_look(p, history, point.look, point.rounds, point.level))
        ran.update(dict.fromkeys(active, point.rounds))
        active = set(plan_rounds(looks, tuple(sorted(active)), schedule, point.rounds).continuing)
        if not active:
            break
    _count(case, run, history, tally, sum(ran.values()) / len(ran))


def _cover(tally: _Tally, truth: float, estimate: RoundEstimate) -> None:
    if estimate.low is None or estimate.high is None or estimate.point is None or estimate.se_log is None:
        return
    reach = t_quantile(_COVERAGE_LEVEL, estimate.df) * estimate.se_log
    centre = math.log(estimate.point)
    for offset, (low, high) in enumerate(
        ((estimate.low, estimate.high), (math.exp(centre - reach), math.exp(centre + reach)))
    ):
        tally.covered[3 * offset] += low <= truth <= high
        tally.covered[3 * offset + 1] += low > truth
        tally.covered[3 * offset + 2] += high < truth


def _count(case: CalibrationCase, run: _Run, history: _History, tally: _Tally, rounds: float) -> None:
    tally.runs += 1
    tally.rounds += rounds
    for pair in run.pairs:
        looks = history[pair.key]
        final, final_est = looks[deciding_look({k: d for k, (d, _) in looks.items()})]
        tally.pairs += 1
        tally.accepts += final.decision is Decision.ACCEPT
        _cover(tally, case.speedup, looks[min(looks)][1].speedup)
        ttft_ok = (
            final.checks.get("max_ttft_regression_ratio") is True and final.checks.get("ttft_mean_gate") is not False
        )
        tally.ttft_pass += ttft_ok and final_est.ttft.has_interval
        tally.short += final_est.speedup.prompts_verdict == "more_prompts"
        if final_est.speedup.prompts_needed is not None:
            tally.needed.append(final_est.speedup.prompts_needed)
        own = run.prompts[int(pair.scenario[1:])].own_ratio
        tally.truth_gap += abs(math.log(own / case.speedup))


def simulate_case(case: CalibrationCase, runs: int, seed: int = 0) -> CaseResult:
    """`runs` simulated runs of `case` and the rule's rates over their pairs."""
    rng = np.random.default_rng(seed)
    tally = _Tally()
    for _ in range(runs):
        _one_run(case, rng, tally)
    n = max(1, tally.pairs)
    cov = [c / n for c in tally.covered]
    return CaseResult(
        case=case,
        runs=runs,
        seed=seed,
        accept_rate=tally.accepts / n,
        coverage=cov[0],
        miss_low=cov[1],
        miss_high=cov[2],
        coverage_95=cov[3],
        miss_low_95=cov[4],
        miss_high_95=cov[5],
        ttft_pass_rate=tally.ttft_pass / n,
        mean_rounds=tally.rounds / max(1, tally.runs),
        first_look_level=LookSchedule.of_level(case.looks, case.confidence_level).level_at(0),
        frozen_truth_gap=tally.truth_gap / n,
        short_of_prompts=tally.short / n,
        prompts_needed_median=float(np.median(tally.needed)) if tally.needed else None,
    )
