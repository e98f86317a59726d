"""The concurrency crossover: up to which load a candidate's speculation still pays, and where it clearly stops.

Each level is classified on its own (pays / clear stop / unclear / no data), then the levels are read in
ascending concurrency. The cut-off is conservative: the recommendation enables only up to the highest level
below which every level pays, and the crossover is the first level that *clearly* stops paying.
"""

from __future__ import annotations

from collections.abc import Iterable

from specselect._core.status import Decision
from specselect._evidence.sweeps.point import SweepPoint, clearly_losing
from specselect.records.evidence.stats import RatioEstimate
from specselect.records.evidence.sweeps import (
    Crossover,
    CrossoverRule,
    CrossoverStatus,
    LevelVerdict,
    LevelVerdictKind,
)

__all__ = ["find_crossover"]


_LATENCY_CHECKS = frozenset({"max_ttft_regression_ratio", "max_e2e_p95_regression_ratio", "max_peak_memory_mb"})


def _speedup_text(verdict: LevelVerdict) -> str:
    if verdict.speedup_point is None:
        return "n/a"
    if verdict.speedup_low is None or verdict.speedup_high is None:
        return f"{verdict.speedup_point:.3g} (point only)"
    return f"{verdict.speedup_point:.3g} [{verdict.speedup_low:.3g}, {verdict.speedup_high:.3g}]"


def _definite_failure(point: SweepPoint, rule: CrossoverRule) -> str | None:
    """Why a failed threshold at this level is definite, or None when it may be noise."""
    decision = point.decision
    if decision is None:
        speedup = point.speedup
        if speedup.low is None or speedup.high is None:
            return None
        if speedup.low <= rule.break_even <= speedup.high:
            return None
        return "failed the thresholds"
    if decision.decision is Decision.REJECT:
        return f"rejected ({decision.reason})"
    if decision.decision is not Decision.TUNE:
        return None
    latency = sorted(_LATENCY_CHECKS.intersection(decision.failed_checks))
    if latency:
        return "failed " + "+".join(latency)
    if "min_throughput_speedup" in decision.failed_checks and decision.confidence.status == "confident":
        return "failed min_throughput_speedup with a confident interval"
    return None


def _classify(point: SweepPoint, rule: CrossoverRule) -> LevelVerdict:
    speedup = point.speedup
    failure = _definite_failure(point, rule) if point.meets_thresholds is False else None
    verdict: LevelVerdictKind
    if speedup.point is None:
        verdict, why = "no_data", f"no speedup estimate ({speedup.reason or 'unknown'})"
    elif clearly_losing(speedup, break_even=rule.break_even):
        verdict, why = "clear_stop", f"speedup interval entirely below {rule.break_even:g}"
    elif failure is not None and rule.threshold_failure_stops:
        verdict, why = "clear_stop", failure
    elif point.meets_thresholds is True:
        verdict, why = "pays", "decision accepted"
    elif point.meets_thresholds is None and speedup.low is not None and speedup.low > rule.break_even:
        verdict, why = "pays", f"speedup interval entirely above {rule.break_even:g}"
    elif point.meets_thresholds is False:
        verdict, why = "unclear", "failed the thresholds, but not definitely"
    elif speedup.low is None or speedup.high is None:
        verdict, why = "unclear", "point estimate only"
    else:
        verdict, why = "unclear", f"speedup interval crosses {rule.break_even:g}"
    return LevelVerdict(
        concurrency=point.concurrency,
        verdict=verdict,
        why=why,
        speedup_point=speedup.point,
        speedup_low=speedup.low,
        speedup_high=speedup.high,
        meets_thresholds=point.meets_thresholds,
    )


def _validated(points: Iterable[SweepPoint]) -> list[SweepPoint]:
    ordered = sorted(points, key=lambda p: p.concurrency)
    if not ordered:
        raise ValueError("find_crossover got no sweep points; pass the points of one candidate on one workload")
    names = {(p.candidate, p.workload) for p in ordered}
    if len(names) > 1:
        raise ValueError(
            f"find_crossover got several candidates/workloads {sorted(names)}; call it once per candidate and workload"
        )
    seen = [p.concurrency for p in ordered]
    if len(set(seen)) != len(seen):
        raise ValueError(f"find_crossover got duplicate concurrency levels {seen}; pass one point per level")
    return ordered


def _status(verdicts: list[LevelVerdict]) -> CrossoverStatus:
    kinds = [v.verdict for v in verdicts]
    if all(k == "no_data" for k in kinds):
        return "insufficient_data"
    if all(k == "pays" for k in kinds):
        return "pays_at_all_levels"
    if "pays" in kinds:
        return "crossover"
    return "never_pays" if "clear_stop" in kinds else "no_clear_difference"


def _reason(
    status: CrossoverStatus, verdicts: list[LevelVerdict], pays_up_to: int | None, crossover_at: int | None
) -> str:
    table = "; ".join(f"c{v.concurrency}: {v.verdict} ({v.why}, speedup {_speedup_text(v)})" for v in verdicts)
    head = {
        "insufficient_data": "no level has a speedup estimate",
        "pays_at_all_levels": "every measured level pays",
        "crossover": "pays at low concurrency but not at every level",
        "never_pays": "no level pays and at least one clearly stops paying",
        "no_clear_difference": "no level pays and none clearly stops paying: no clear difference from the baseline",
    }[status]
    notes: list[str] = []
    if crossover_at is not None:
        late = [v.concurrency for v in verdicts if v.concurrency > crossover_at and v.verdict == "pays"]
        if late:
            notes.append(
                f"non-monotone: pays again at {late} above the first clear loss at {crossover_at}; "
                "the cut-off is the first clear loss"
            )
    boundary = crossover_at if crossover_at is not None else max(v.concurrency for v in verdicts) + 1
    gaps = [v.concurrency for v in verdicts if v.concurrency < boundary and v.verdict == "pays"]
    if pays_up_to is not None:
        gaps = [c for c in gaps if c > pays_up_to]
    if gaps:
        notes.append(f"pays at {gaps} but a lower level does not pay, so it is not enabled there")
    if status == "crossover" and crossover_at is None:
        notes.append("no level clearly stops paying: above the cut-off the evidence is inconclusive")
    return "; ".join([head, *notes, table])


def _requests(n: int) -> str:
    return f"{n} concurrent request" + ("" if n == 1 else "s")


def _recommendation(status: CrossoverStatus, pays_up_to: int | None, top: int) -> str:
    if status == "insufficient_data":
        return "no recommendation: insufficient data"
    if status == "pays_at_all_levels":
        return f"no cut-off needed up to {_requests(top)}"
    if pays_up_to is not None:
        return f"enable up to {_requests(pays_up_to)}"
    return "do not enable"


def find_crossover(points: Iterable[SweepPoint], *, level_rule: CrossoverRule | None = None) -> Crossover:
    """The crossover of ONE candidate on ONE workload across concurrency levels (any input order).

    Raises ValueError for no points, mixed candidates/workloads or duplicate levels.
    """
    rule = level_rule or CrossoverRule()
    ordered = _validated(points)
    verdicts = [_classify(p, rule) for p in ordered]
    pays_up_to: int | None = None
    for verdict in verdicts:
        if verdict.verdict != "pays":
            break
        pays_up_to = verdict.concurrency
    stops = [i for i, v in enumerate(verdicts) if v.verdict == "clear_stop"]
    crossover_at = verdicts[stops[0]].concurrency if stops else None
    at_crossover = ordered[stops[0]].speedup if stops else None
    before: RatioEstimate | None = None
    if stops and stops[0] > 0:
        before = ordered[stops[0] - 1].speedup
    elif pays_up_to is not None:
        before = next(p.speedup for p in ordered if p.concurrency == pays_up_to)
    status = _status(verdicts)
    return Crossover(
        candidate=ordered[0].candidate,
        workload=ordered[0].workload,
        levels=tuple(p.concurrency for p in ordered),
        status=status,
        pays_up_to=pays_up_to,
        crossover_at=crossover_at,
        interval_at_crossover=at_crossover,
        interval_before=before,
        recommendation=_recommendation(status, pays_up_to, ordered[-1].concurrency),
        reason=_reason(status, verdicts, pays_up_to, crossover_at),
        rule=rule.text(),
        level_rule=rule,
        per_level=tuple(verdicts),
    )
