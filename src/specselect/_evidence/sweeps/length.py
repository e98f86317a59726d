"""The proposal-length choice: the best length per scenario, and the smallest one as good as it.

Sub-candidates that differ only in proposal length are compared with the best one (highest point speedup)
by a paired cluster bootstrap over the requests they share, so a flat or noisy sweep yields "no clear
difference" instead of a winner picked by noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from specselect._evidence.bootstrap import cluster_ids, ratio_of_sums_statistic, run_bootstrap
from specselect._evidence.samples import RequestKey
from specselect._evidence.sweeps.point import SweepPoint, clearly_losing
from specselect.records.evidence.stats import BootstrapPolicy, PairRatio
from specselect.records.evidence.sweeps import LengthChoice, LengthRow, LengthStatus

__all__ = ["choose_length"]


def _validated(points: Iterable[SweepPoint]) -> list[SweepPoint]:
    ordered = list(points)
    if not ordered:
        raise ValueError("choose_length got no sweep points; pass the sub-candidates of one scenario")
    scenarios = {(p.workload, p.concurrency) for p in ordered}
    if len(scenarios) > 1:
        raise ValueError(f"choose_length got several scenarios {sorted(scenarios)}; call it once per scenario")
    lengths: list[int] = []
    for point in ordered:
        if point.proposal_length is None:
            raise ValueError(f"choose_length: candidate {point.candidate} has no proposal_length; set it")
        lengths.append(point.proposal_length)
    if len(set(lengths)) != len(lengths):
        raise ValueError(f"choose_length got duplicate proposal lengths {sorted(lengths)}; pass one point per length")
    return sorted(ordered, key=lambda p: p.proposal_length or 0)


def _usable(ratios: Sequence[PairRatio]) -> dict[RequestKey, float]:
    out: dict[RequestKey, float] = {}
    for ratio in ratios:
        value = ratio.throughput_speedup
        if value is not None and math.isfinite(value) and value > 0:
            out.setdefault((ratio.item_id, ratio.repeat), value)
    return out


def _row(point: SweepPoint, **fields: object) -> LengthRow:
    return LengthRow.model_validate(
        {
            "length": point.proposal_length,
            "candidate": point.candidate,
            "speedup_point": point.speedup.point,
            "speedup_low": point.speedup.low,
            "speedup_high": point.speedup.high,
            **fields,
        }
    )


def _compare(point: SweepPoint, best: SweepPoint, policy: BootstrapPolicy) -> LengthRow:
    """Paired cluster bootstrap of mean(speedup_k) / mean(speedup_best) over shared request keys."""
    if point.speedup.point is None:
        return _row(point, indistinguishable=False, note="no speedup estimate")
    mine, theirs = _usable(point.per_request), _usable(best.per_request)
    keys = sorted(mine.keys() & theirs.keys())
    if not keys:
        return _row(point, indistinguishable=False, note="no shared per-request pairs with the best")
    clusters, n_clusters = cluster_ids([key[0] for key in keys])
    ones = np.ones(len(keys), dtype=np.float64)
    stat = ratio_of_sums_statistic(
        clusters,
        n_clusters,
        cand_num=np.asarray([mine[k] for k in keys], dtype=np.float64),
        cand_den=ones,
        base_num=np.asarray([theirs[k] for k in keys], dtype=np.float64),
        base_den=ones,
    )
    result = run_bootstrap(
        stat,
        n_clusters,
        level=policy.level,
        n_resamples=policy.n_resamples,
        seed=policy.seed,
        method=policy.method,
        min_clusters=policy.min_clusters,
    )
    assessed = result.low is not None and result.high is not None
    return _row(
        point,
        vs_best_point=result.point,
        vs_best_low=result.low,
        vs_best_high=result.high,
        indistinguishable=assessed and (result.low or 0.0) <= 1.0 <= (result.high or 0.0),
        n_pairs=len(keys),
        n_clusters=n_clusters,
        note=None if assessed else f"no interval ({result.note or 'unknown'})",
    )


def _choice(
    points: list[SweepPoint],
    status: LengthStatus,
    *,
    rows: Sequence[LengthRow],
    best: SweepPoint | None,
    reason: str,
    policy: BootstrapPolicy,
    recommended: LengthRow | None = None,
) -> LengthChoice:
    return LengthChoice(
        workload=points[0].workload,
        concurrency=points[0].concurrency,
        status=status,
        recommended_length=None if recommended is None else recommended.length,
        recommended_candidate=None if recommended is None else recommended.candidate,
        best_length=None if best is None else best.proposal_length,
        best_candidate=None if best is None else best.candidate,
        per_length=tuple(rows),
        reason=reason,
        policy=policy,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _best_row(best: SweepPoint) -> LengthRow:
    """The best length's row: compared with itself (ratio exactly 1) over all its usable pairs."""
    usable = _usable(best.per_request)
    return _row(
        best,
        vs_best_point=1.0,
        vs_best_low=1.0,
        vs_best_high=1.0,
        indistinguishable=True,
        is_best=True,
        n_pairs=len(usable),
        n_clusters=len({key[0] for key in usable}),
    )


def _assessed_outcome(
    assessed: Sequence[LengthRow], recommended: LengthRow, *, best_text: str, tail: str
) -> tuple[LengthStatus, str]:
    """Status and reason once at least one other length was compared with the best."""
    worse = [r.length for r in assessed if not r.indistinguishable]
    same = [r.length for r in assessed if r.indistinguishable]
    if not worse:
        reason = (
            f"{best_text}; every compared length {same} is statistically indistinguishable from it: no clear "
            f"difference, so the smallest length {recommended.length} is recommended (conservative){tail}"
        )
        return "no_clear_difference", reason
    reason = f"{best_text}; clearly different from it: {worse}"
    if same:
        reason += f"; indistinguishable from it: {same}"
    reason += f"; recommended the smallest length as good as the best: {recommended.length}{tail}"
    return "clear_best", reason


def choose_length(points: Iterable[SweepPoint], *, policy: BootstrapPolicy) -> LengthChoice:
    """Recommend a proposal length for ONE scenario from sub-candidates that differ only in that length.

    Raises ValueError for no points, mixed scenarios, a missing or duplicate proposal length.
    """
    ordered = _validated(points)
    scored = [p for p in ordered if p.speedup.point is not None and math.isfinite(p.speedup.point)]
    if not scored:
        rows = [_row(p, indistinguishable=False, note="no speedup estimate") for p in ordered]
        return _choice(
            ordered,
            "insufficient_data",
            rows=rows,
            best=None,
            reason="no proposal length has a speedup estimate",
            policy=policy,
        )
    # max() keeps the first of equal points; `ordered` is by length, so ties go to the smaller length.
    best = max(scored, key=lambda p: p.speedup.point or 0.0)
    rows = [_best_row(p) if p is best else _compare(p, best, policy) for p in ordered]
    best_text = f"best length {best.proposal_length} ({best.candidate}) speedup {_fmt(best.speedup.point)}"
    if clearly_losing(best.speedup):
        reason = f"{best_text} with interval high {_fmt(best.speedup.high)} < 1.0: no length pays"
        return _choice(ordered, "none_pays", rows=rows, best=best, reason=reason, policy=policy)
    others = [r for r in rows if not r.is_best]
    assessed = [r for r in others if r.vs_best_low is not None and r.vs_best_high is not None]
    unassessed = [r.length for r in others if r not in assessed]
    tail = f"; not assessed: {unassessed}" if unassessed else ""
    if not assessed:
        why = "only one proposal length measured" if not others else "no other length could be compared"
        return _choice(
            ordered, "insufficient_data", rows=rows, best=best, reason=f"{best_text}; {why}{tail}", policy=policy
        )
    recommended = min((r for r in rows if r.indistinguishable), key=lambda r: r.length)
    status, reason = _assessed_outcome(assessed, recommended, best_text=best_text, tail=tail)
    return _choice(ordered, status, rows=rows, best=best, reason=reason, policy=policy, recommended=recommended)
