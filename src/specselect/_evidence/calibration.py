"""How often the decision rule is right: simulated runs with a known truth, through the rule's own functions.

A simulated run has one candidate measured on `pairs` workloads of `items` frozen prompts each, in the rounds
of its `looks`. Every request is drawn from a noise model fitted to this host (docs/statistics.md):

- each launch scales every request's times by exp(e), e = launch_sd x (sqrt(rho) g + sqrt(1 - rho) eps): g is
  the round's effect, shared by the baseline and candidate launches of the round (`round_correlation` rho, the
  correlation of adjacent launches), eps the launch's own; across the workloads measured in one launch g and
  eps correlate `scenario_correlation`;
- each request's E2E and TTFT get their own noise (`request_sd`; `ttft_request_sd` with `ttft_jitter_s`);
- items differ in TTFT, decode rate and speedup (`item_speedup_sd`); the candidate's E2E is the baseline's over
  the item's speedup, scaled so that the estimand's noise-free ratio of totals is exactly `speedup` (the frozen
  items' own for frozen_prompts, the population's for traffic), and its TTFT is the baseline's times
  `ttft_ratio`.

Each look analyses the rounds so far with `pipeline.rounds.analyse_look` (pooled variances, the look's level),
decides every pair with `pipeline.rounds.decide_pair` on the contract's evidence (p95 points from the same
requests), runs on only while `evidence.rounds.looks.plan_rounds` says so, and keeps the decision of the first
accepting look -- the runner's own sequence. Pure and seeded: the same case and seed give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from specselect._core.decision import DecisionResult, LatencyGate, Thresholds
from specselect._core.pairing import PairEvidence, SideMetrics, build_pair_evidence
from specselect._core.status import Decision
from specselect._evidence.pipeline.launches import SideLaunches
from specselect._evidence.pipeline.rounds import PairEstimates, PairRounds, analyse_look, decide_pair
from specselect._evidence.rounds.looks import deciding_look, look_points, pair_state, plan_rounds
from specselect._evidence.samples import RequestSample
from specselect.records.evidence.rounds import Estimand, LookSchedule, PairLook

__all__ = ["CalibrationCase", "CaseResult", "NoiseModel", "simulate_case"]

_TOKENS = 32
_BASE_RATE = 22.0
"""Tokens per second of the simulated baseline (SmolLM2-135M on 2 cores, float32)."""
_BASE_TTFT = 0.15
_CANDIDATE = "candidate"


class NoiseModel(BaseModel):
    """The noise of one simulated host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    launch_sd: float = Field(ge=0)
    """Standard deviation of a launch's log time factor."""
    round_correlation: float = Field(default=0.7, ge=0, le=1)
    """Correlation of the baseline's and the candidate's launch factors in one round."""
    scenario_correlation: float = Field(default=0.0, ge=0, le=1)
    """Correlation of one launch's factors across the workloads it measured."""
    request_sd: float = Field(default=0.05, ge=0)
    """A request's own E2E noise (log scale)."""
    ttft_request_sd: float = Field(default=0.03, ge=0)
    ttft_jitter_s: float = Field(default=0.010, ge=0)
    """A request's own TTFT noise: sqrt((jitter / ttft)^2 + ttft_request_sd^2) on the log scale, so a short
    prompt's first token is the noisier one (this host: ~12 % at 90 ms, ~5 % at 300 ms)."""


class CalibrationCase(BaseModel):
    """A simulated experiment: the truth, the design and the rule's policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    speedup: float = Field(gt=0)
    """The estimand's true ratio of totals: the frozen items' (frozen_prompts), or the population's the items
    are drawn from (traffic)."""
    ttft_ratio: float = Field(default=1.0, gt=0)
    """The candidate's true TTFT over the baseline's, every item."""
    noise: NoiseModel
    items: int = Field(default=8, ge=2)
    pairs: int = Field(default=2, ge=1)
    """Workloads of the one candidate (pairs whose variances the rule pools)."""
    looks: tuple[int, ...] = (3,)
    confidence_level: float = 0.95
    latency_gate: LatencyGate = "not_clearly_worse"
    estimand: Estimand = "frozen_prompts"
    item_speedup_sd: float = Field(default=0.1, ge=0)


class CaseResult(BaseModel):
    """What the rule did over many simulated runs of one case (rates over pairs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case: CalibrationCase
    runs: int
    seed: int
    accept_rate: float
    """Share of pairs accepted (a false accept when the truth is at or below the minimum)."""
    coverage: float
    """Share of pairs whose first look's interval held the truth."""
    miss_low: float
    """Share of first-look intervals entirely above the truth (the side a false accept comes from)."""
    miss_high: float
    """Share of first-look intervals entirely below the truth."""
    ttft_pass_rate: float
    """Share of pairs whose TTFT p95 point and mean gate both passed at the deciding look."""
    mean_rounds: float
    """Rounds the candidate ran, on average."""
    first_look_level: float


@dataclass(frozen=True)
class _Items:
    ttft: np.ndarray
    base_e2e: np.ndarray
    cand_e2e: np.ndarray


def _items(case: CalibrationCase, rng: np.random.Generator) -> _Items:
    ttft = _BASE_TTFT * np.exp(rng.normal(0.0, 0.4, case.items))
    decode = _TOKENS / (_BASE_RATE * np.exp(rng.normal(0.0, 0.1, case.items)))
    base = ttft + decode
    w = np.exp(rng.normal(0.0, case.item_speedup_sd, case.items))
    if case.estimand == "frozen_prompts":
        w = w * float(np.sum(base / w) / np.sum(base))  # sum(base) / sum(base / w) = 1: these items' truth
    else:
        w = w * math.exp(case.item_speedup_sd**2 / 2.0)  # E[1 / w] = 1: the population's truth
    cand = base / (case.speedup * w)
    floor = ttft * case.ttft_ratio * 1.05  # a candidate request still decodes after its first token
    return _Items(ttft=ttft, base_e2e=base, cand_e2e=np.maximum(cand, floor))


def _effects(case: CalibrationCase, rng: np.random.Generator, rounds: int) -> np.ndarray:
    """Log time factors, shape (rounds, 2 sides, pairs)."""
    noise = case.noise

    def shared(shape: tuple[int, ...]) -> np.ndarray:
        common = rng.normal(0.0, 1.0, (*shape, 1))
        own = rng.normal(0.0, 1.0, (*shape, case.pairs))
        k = noise.scenario_correlation
        return np.asarray(math.sqrt(k) * common + math.sqrt(1.0 - k) * own)

    rho = noise.round_correlation
    round_part = shared((rounds,))[:, None, :]
    launch_part = shared((rounds, 2))
    return np.asarray(noise.launch_sd * (math.sqrt(rho) * round_part + math.sqrt(1.0 - rho) * launch_part))


def _samples(
    case: CalibrationCase, items: _Items, effects: np.ndarray, rng: np.random.Generator, side: int, pair: int
) -> tuple[RequestSample, ...]:
    out: list[RequestSample] = []
    e2e0 = items.base_e2e if side == 0 else items.cand_e2e
    ttft0 = items.ttft if side == 0 else items.ttft * case.ttft_ratio
    for r in range(effects.shape[0]):
        factor = math.exp(float(effects[r, side, pair]))
        e2e = e2e0 * factor * np.exp(rng.normal(0.0, case.noise.request_sd, case.items))
        sd = np.sqrt((case.noise.ttft_jitter_s / ttft0) ** 2 + case.noise.ttft_request_sd**2)
        ttft = np.minimum(ttft0 * factor * np.exp(rng.normal(0.0, 1.0, case.items) * sd), e2e * 0.95)
        out.extend(
            RequestSample(
                item_id=f"i{i}",
                repeat=r,
                launch=r,
                completion_tokens=_TOKENS,
                ttft_s=float(ttft[i]),
                e2e_s=float(e2e[i]),
                decode_s=float(e2e[i] - ttft[i]),
            )
            for i in range(case.items)
        )
    return tuple(out)


def _p95_ms(samples: Sequence[RequestSample], field: str, rounds: int) -> float:
    values = [getattr(s, field) * 1000.0 for s in samples if s.launch < rounds]
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
    covered: int = 0
    low: int = 0
    high: int = 0
    ttft_pass: int = 0
    rounds: int = 0
    runs: int = 0


def _one_run(case: CalibrationCase, rng: np.random.Generator, tally: _Tally) -> None:
    schedule = LookSchedule.of_level(case.looks, case.confidence_level)
    thresholds = Thresholds(latency_gate=case.latency_gate)
    effects = _effects(case, rng, schedule.max_rounds)
    pairs = []
    for w in range(case.pairs):
        items = _items(case, rng)
        base, cand = _samples(case, items, effects, rng, 0, w), _samples(case, items, effects, rng, 1, w)
        sides = (SideLaunches(runs=(), records=[], samples=base), SideLaunches(runs=(), records=[], samples=cand))
        pairs.append(PairRounds(f"{_CANDIDATE}/w{w}", _CANDIDATE, f"w{w}", *sides, excluded={}))
    history: dict[str, dict[int, tuple[DecisionResult, PairEstimates]]] = {p.key: {} for p in pairs}
    rounds = 0
    for point in look_points(schedule, schedule.max_rounds):
        analysis = analyse_look(pairs, point, estimand=case.estimand, basis="e2e")
        rounds = point.rounds
        looks = []
        for p in pairs:
            est = analysis.pairs[p.key]
            decision = decide_pair(_evidence(p, est, point.rounds), est, thresholds)
            history[p.key][point.look] = (decision, est)
            chosen = history[p.key][deciding_look({k: d for k, (d, _) in history[p.key].items()})][0]
            state, why = pair_state(chosen)
            looks.append(
                PairLook(
                    candidate=_CANDIDATE,
                    scenario=p.scenario,
                    state=state,
                    why=why,
                    decision=chosen.decision.value,
                    reason=chosen.reason,
                    look=point.look,
                    rounds=point.rounds,
                    level=point.level,
                )
            )
        if not plan_rounds(looks, (_CANDIDATE,), schedule, point.rounds).continuing:
            break
    _count(case, history, tally, rounds)


def _count(
    case: CalibrationCase,
    history: dict[str, dict[int, tuple[DecisionResult, PairEstimates]]],
    tally: _Tally,
    rounds: int,
) -> None:
    tally.runs += 1
    tally.rounds += rounds
    for looks in history.values():
        final, final_est = looks[deciding_look({k: d for k, (d, _) in looks.items()})]
        first = looks[min(looks)][1].speedup
        tally.pairs += 1
        tally.accepts += final.decision is Decision.ACCEPT
        if first.low is not None and first.high is not None:
            tally.covered += first.low <= case.speedup <= first.high
            tally.low += first.low > case.speedup
            tally.high += first.high < case.speedup
        ttft_ok = (
            final.checks.get("max_ttft_regression_ratio") is True and final.checks.get("ttft_mean_gate") is not False
        )
        tally.ttft_pass += ttft_ok and final_est.ttft.has_interval


def simulate_case(case: CalibrationCase, runs: int, seed: int = 0) -> CaseResult:
    """`runs` simulated runs of `case` and the rule's rates over their pairs."""
    rng = np.random.default_rng(seed)
    tally = _Tally()
    for _ in range(runs):
        _one_run(case, rng, tally)
    n = max(1, tally.pairs)
    return CaseResult(
        case=case,
        runs=runs,
        seed=seed,
        accept_rate=tally.accepts / n,
        coverage=tally.covered / n,
        miss_low=tally.low / n,
        miss_high=tally.high / n,
        ttft_pass_rate=tally.ttft_pass / n,
        mean_rounds=tally.rounds / max(1, tally.runs),
        first_look_level=LookSchedule.of_level(case.looks, case.confidence_level).level_at(0),
    )
