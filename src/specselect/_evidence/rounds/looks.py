"""At a look: which pairs are settled, and which candidates run the rounds up to the next look.

A pair is settled when more rounds cannot change its decision between accept and not accept -- the only
difference a decision makes. It is `accepted` (an accept at this look's level), or it `cannot_accept`: its
outputs differ (reject), it is not comparable, its memory is over budget, its speedup interval lies entirely
below the minimum, or a latency mean ratio is clearly above its limit. Every other pair is `open` (an interval
across the minimum, a latency interval across its limit under shown_within, a p95 point over its limit, one
round only, every round excluded). Thresholds that only change a reason (1.0 for a net slowdown) settle nothing.

A candidate with an open pair runs, with its track's baseline, the rounds up to the next look; the others
stop. A pair's decision is the one of the first look that accepted it, else of the last look it was looked at:
an accept at any look is a false one at most sum(alpha_k) = alpha of the time (`design.LookSchedule`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specselect._core.decision import QUALITY_FAILURES, DecisionResult
from specselect._core.status import Decision, EvidenceStatus
from specselect.records.evidence.rounds import (
    LookPoint,
    LookSchedule,
    PairLook,
    PairState,
    RoundsPlan,
)

__all__ = ["deciding_look", "look_points", "pair_state", "plan_rounds"]


_FINAL_REASONS = tuple(reason for reason, _ in QUALITY_FAILURES.values())
_MISSING_A_ROUND_CAN_GIVE = frozenset({"uncontaminated_measurement"})


def look_points(schedule: LookSchedule, rounds_done: int) -> tuple[LookPoint, ...]:
    """The looks a run that completed `rounds_done` rounds was looked at: every planned look it reached, and,
    when it stopped between looks (an interruption, a budget), one more at `rounds_done` spending the next
    look's error (deciding on fewer rounds keeps that look's bound)."""
    points: list[LookPoint] = []
    for index, rounds in enumerate(schedule.looks):
        points.append(LookPoint(look=index, rounds=min(rounds, rounds_done), level=schedule.level_at(index)))
        if rounds >= rounds_done:
            break
    return tuple(points)


def _incomplete_state(decision: DecisionResult) -> tuple[PairState, str]:
    missing = set(decision.missing_evidence)
    if missing & _MISSING_A_ROUND_CAN_GIVE:
        # Every round so far was left out (a busy host): what else is missing follows from that.
        return "open", "no trusted round yet: " + ", ".join(sorted(missing & _MISSING_A_ROUND_CAN_GIVE))
    return "cannot_accept", "incomplete: " + (", ".join(sorted(missing)) or "unspecified")


def pair_state(decision: DecisionResult) -> tuple[PairState, str]:
    """Whether more rounds could turn this decision into an accept (and why)."""
    if decision.decision is Decision.ACCEPT:
        return "accepted", "accept"
    if decision.evidence_status is EvidenceStatus.INCOMPLETE:
        return _incomplete_state(decision)
    if decision.decision in (Decision.REJECT, Decision.NOT_EVALUATED) or decision.reason in _FINAL_REASONS:
        return "cannot_accept", decision.reason
    checks = decision.checks
    if checks.get("max_peak_memory_mb") is False:
        return "cannot_accept", "memory over budget"
    gates = [k for k in ("ttft_mean_gate", "e2e_mean_gate") if k in decision.failed_checks]
    if gates:
        return "cannot_accept", f"clearly over a latency limit ({', '.join(gates)})"
    interval = decision.confidence.interval
    if interval is not None and interval.high < decision.policy.min_throughput_speedup:
        return (
            "cannot_accept",
            f"speedup interval high {interval.high:.3g} < {decision.policy.min_throughput_speedup:g}",
        )
    return "open", decision.reason


def plan_rounds(
    looks: Sequence[PairLook], active: Sequence[str], schedule: LookSchedule, rounds_done: int
) -> RoundsPlan:
    """Who runs the rounds after `rounds_done` completed rounds (`active`: the candidates still running)."""
    look = schedule.look_of(rounds_done)
    level = schedule.level_for(rounds_done)
    if look is None:
        upcoming = [n for n in schedule.looks if n > rounds_done]
        return RoundsPlan(
            rounds_done=rounds_done,
            look=None,
            level=level,
            pairs=tuple(looks),
            continuing=tuple(active) if upcoming else (),
            next_rounds=upcoming[0] if upcoming else None,
            stop=None if upcoming else "past the last look",
            schedule=schedule,
        )
    open_candidates = tuple(dict.fromkeys(p.candidate for p in looks if p.state == "open" and p.candidate in active))
    last = look == len(schedule.looks) - 1
    stop = None
    if last:
        stop, open_candidates = "the last look was taken", ()
    elif not open_candidates:
        stop = "every pair is settled"
    return RoundsPlan(
        rounds_done=rounds_done,
        look=look,
        level=level,
        pairs=tuple(looks),
        continuing=open_candidates,
        next_rounds=None if stop else schedule.looks[look + 1],
        stop=stop,
        schedule=schedule,
    )


def deciding_look(history: Mapping[int, DecisionResult]) -> int:
    """The look whose decision a pair keeps: its first accepting look, else its last."""
    accepted = [look for look, d in sorted(history.items()) if d.decision is Decision.ACCEPT]
    return accepted[0] if accepted else max(history)
