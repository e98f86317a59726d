"""The hand-off's sweep advice: up to which concurrency to enable each candidate, and which proposal length."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specselect._evidence.sweeps import capped_schedule, cutoff_schedule
from specselect.records.evidence.sweeps import SweepAnalysis
from specselect.records.group import GroupResult
from specselect.records.handoff import HandoffConcurrency, HandoffLength
from specselect.records.proposals import ScheduleRange

__all__ = ["CUTOFF_NOTE", "BatchSchedule", "concurrency_advice", "length_advice"]

BatchSchedule = Callable[[str, Sequence[ScheduleRange]], Mapping[str, Any] | None]
"""(candidate, batch-size ranges (first, last or None, proposal length)) -> the measured engine's setting that
proposes each range's length there, or None when it cannot express that for the candidate
(`Engine.batch_schedule`)."""

CUTOFF_NOTE = (
    "derived from the measured crossover, not measured itself: the engine's per-batch-size schedule proposes k "
    "tokens up to the cut-off batch size and none above it; verify it on your engine before deploying"
)


def concurrency_advice(
    sweeps: SweepAnalysis | None,
    groups: Sequence[GroupResult],
    *,
    schedule: BatchSchedule,
) -> tuple[HandoffConcurrency, ...]:
    """One line per candidate and workload measured at several concurrency levels."""
    if sweeps is None:
        return ()
    by_name: Mapping[str, GroupResult] = {g.group: g for g in groups}
    out: list[HandoffConcurrency] = []
    for c in sweeps.crossovers:
        group = by_name.get(c.candidate)
        k = group.proposal_length if group is not None else None
        derived = group.derived_schedule if group is not None else None
        setting: dict[str, object] | None = None
        if c.status == "crossover" and c.pays_up_to is not None and k:
            # A schedule candidate keeps its own lengths below the cut-off; a static one proposes k there.
            ranges = capped_schedule(derived.ranges, c.pays_up_to) if derived else cutoff_schedule(k, c.pays_up_to)
            found = schedule(c.candidate, ranges)
            setting = dict(found) if found is not None else None
        out.append(
            HandoffConcurrency(
                candidate=c.candidate,
                workload=c.workload,
                temperature=c.temperature,
                levels=c.levels,
                status=c.status,
                pays_up_to=c.pays_up_to,
                crossover_at=c.crossover_at,
                recommendation=c.recommendation,
                reason=c.reason,
                engine_setting=setting,
                engine_setting_note=CUTOFF_NOTE if setting is not None else None,
            )
        )
    return tuple(out)


def length_advice(sweeps: SweepAnalysis | None) -> tuple[HandoffLength, ...]:
    """One line per plan entry, fixed options and scenario whose proposal lengths were compared."""
    if sweeps is None:
        return ()
    return tuple(
        HandoffLength(
            sweep=s.sweep,
            fixed=s.fixed,
            workload=s.choice.workload,
            concurrency=s.choice.concurrency,
            temperature=s.temperature,
            status=s.choice.status,
            recommended_length=s.choice.recommended_length,
            recommended_candidate=s.choice.recommended_candidate,
            best_length=s.choice.best_length,
            reason=s.choice.reason,
        )
        for s in sweeps.lengths
    )
