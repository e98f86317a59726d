"""The per-batch-size schedule a sweep derives, and how it compares once measured as its own candidate.

A sweep over proposal lengths at several concurrency levels says, per level, which length pays there (the length
choice and each length's crossover verdict). `derive_schedule` turns that into one schedule for one server: a
proposal length per batch-size range (0: speculation off). `compare_schedule` puts the measured schedule next to
speculation off (the baseline, 1.0) and the best static setting at every level, and next to the engine's own
controllers where the plan measured them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specselect._evidence.sweeps.point import SweepPoint
from specselect.records.evidence.stats import RatioEstimate
from specselect.records.evidence.sweeps import (
    Crossover,
    DerivedSchedule,
    LengthChoice,
    LevelVerdict,
    ScheduleCell,
    ScheduleComparison,
    ScheduleLevel,
    ScheduleRow,
)
from specselect.records.proposals import ScheduleRange

__all__ = ["capped_schedule", "compare_schedule", "cutoff_schedule", "derive_schedule", "schedule_ranges"]


def schedule_ranges(lengths: Mapping[int, int]) -> tuple[ScheduleRange, ...]:
    """Concurrency level -> length as batch-size ranges (see `SCHEDULE_RULE`), equal neighbours merged."""
    levels = sorted(lengths)
    out: list[list[int | None]] = []
    for index, level in enumerate(levels):
        first = 1 if index == 0 else level
        last = levels[index + 1] - 1 if index + 1 < len(levels) else None
        if out and out[-1][2] == lengths[level]:
            out[-1][1] = last
        else:
            out.append([first, last, lengths[level]])
    return tuple((int(first or 1), last, int(k or 0)) for first, last, k in out)


def capped_schedule(ranges: Sequence[ScheduleRange], level: int) -> tuple[ScheduleRange, ...]:
    """`ranges` with speculation off above batch size `level` (a range across it is split there)."""
    out: list[ScheduleRange] = []
    for first, last, k in ranges:
        if first > level:
            parts: list[ScheduleRange] = [(first, last, 0)]
        elif last is None or last > level:
            parts = [(first, level, k), (level + 1, last, 0)]
        else:
            parts = [(first, last, k)]
        for part in parts:
            if out and out[-1][2] == part[2]:
                out[-1] = (out[-1][0], part[1], part[2])
            else:
                out.append(part)
    return tuple(out)


def cutoff_schedule(proposal_length: int, pays_up_to: int) -> tuple[ScheduleRange, ...]:
    """`proposal_length` tokens up to batch size `pays_up_to` and none above (a crossover's cut-off)."""
    return capped_schedule(((1, None, proposal_length),), pays_up_to)


def _choice_at(choices: Sequence[LengthChoice], workload: str, level: int) -> LengthChoice | None:
    return next((c for c in choices if (c.workload, c.concurrency) == (workload, level)), None)


def _verdicts(crossovers: Sequence[Crossover], workload: str, level: int) -> dict[str, LevelVerdict]:
    out: dict[str, LevelVerdict] = {}
    for crossover in crossovers:
        if crossover.workload != workload:
            continue
        verdict = next((v for v in crossover.per_level if v.concurrency == level), None)
        if verdict is not None:
            out[crossover.candidate] = verdict
    return out


def _choose(
    members: Mapping[str, int], verdicts: Mapping[str, LevelVerdict], recommended: str | None
) -> tuple[str | None, str]:
    paying = [name for name in members if name in verdicts and verdicts[name].verdict == "pays"]
    if recommended in paying:
        return recommended, f"{recommended} is the recommended length and pays"
    if paying:
        best = max(paying, key=lambda n: (verdicts[n].speedup_low or float("-inf"), -members[n]))
        shown = f"{verdicts[best].speedup_low:.3g}" if verdicts[best].speedup_low is not None else "n/a"
        return best, f"{best} pays with the highest speedup lower bound ({shown})"
    if not verdicts:
        return None, "no length was measured here"
    seen = ", ".join(f"{name} {verdicts[name].verdict}" for name in sorted(verdicts, key=lambda n: members[n]))
    return None, f"no length pays ({seen})"


def _level(
    level: int,
    workloads: Sequence[str],
    members: Mapping[str, int],
    choices: Sequence[LengthChoice],
    crossovers: Sequence[Crossover],
) -> ScheduleLevel:
    chosen: list[tuple[str, str | None, str]] = []
    for workload in workloads:
        choice = _choice_at(choices, workload, level)
        recommended = choice.recommended_candidate if choice is not None else None
        if choice is None and len(members) == 1:
            recommended = next(iter(members))
        name, why = _choose(members, _verdicts(crossovers, workload, level), recommended)
        chosen.append((workload, name, why))
    whys = "; ".join(f"{workload}: {why}" for workload, _, why in chosen)
    if any(name is None for _, name, _ in chosen):
        return ScheduleLevel(concurrency=level, proposal_length=0, candidate=None, why=whys)
    name = min((n for _, n, _ in chosen if n is not None), key=lambda n: members[n])
    return ScheduleLevel(concurrency=level, proposal_length=members[name], candidate=name, why=whys)


def derive_schedule(
    sweep: str,
    members: Mapping[str, int],
    *,
    workloads: Sequence[str],
    levels: Sequence[int],
    choices: Sequence[LengthChoice],
    crossovers: Sequence[Crossover],
) -> DerivedSchedule:
    """The schedule of sweep entry `sweep` from its sub-candidates' (`members`: name -> proposal length) length
    choices (`choices`: this entry's, per scenario) and crossovers over `workloads` x `levels` (`SCHEDULE_RULE`)."""
    if not members or not levels or not workloads:
        raise ValueError("derive_schedule needs the sweep's members, its workloads and at least one level")
    per_level = tuple(_level(level, workloads, members, choices, crossovers) for level in sorted(levels))
    ranges = schedule_ranges({lv.concurrency: lv.proposal_length for lv in per_level})
    if all(lv.proposal_length == 0 for lv in per_level):
        return DerivedSchedule(
            sweep=sweep,
            status="off_everywhere",
            levels=per_level,
            ranges=ranges,
            reason="no proposal length pays at any measured level: the schedule would be the baseline",
        )
    shown = ", ".join(f"c{lv.concurrency}: k={lv.proposal_length}" for lv in per_level)
    return DerivedSchedule(sweep=sweep, status="derived", levels=per_level, ranges=ranges, reason=shown)


def _cell(point: SweepPoint | None, length: int | None) -> ScheduleCell | None:
    if point is None:
        return None
    s: RatioEstimate = point.speedup
    return ScheduleCell(
        candidate=point.candidate,
        proposal_length=length,
        speedup_point=s.point,
        speedup_low=s.low,
        speedup_high=s.high,
        decision=point.decision.decision.value if point.decision is not None else None,
    )


def _versus(schedule: ScheduleCell | None, static: ScheduleCell | None) -> str:
    if schedule is None or schedule.speedup_point is None:
        return "schedule not measured here"
    if static is None or static.speedup_point is None:
        return "no static setting measured here"
    if None in (schedule.speedup_low, schedule.speedup_high, static.speedup_low, static.speedup_high):
        return "no clear difference (point estimates only)"
    if (schedule.speedup_low or 0.0) > (static.speedup_high or 0.0):
        return "schedule clearly faster"
    if (static.speedup_low or 0.0) > (schedule.speedup_high or 0.0):
        return "static clearly faster"
    return "no clear difference"


def _static_at(choices: Sequence[LengthChoice], members: Mapping[str, int], workload: str, level: int) -> str | None:
    choice = _choice_at(choices, workload, level)
    if choice is not None:
        return choice.recommended_candidate or choice.best_candidate
    return next(iter(members)) if len(members) == 1 else None


def compare_schedule(
    candidate: str,
    schedule: DerivedSchedule,
    members: Mapping[str, int],
    *,
    points: Sequence[SweepPoint],
    choices: Sequence[LengthChoice],
    controllers: Mapping[str, str],
) -> ScheduleComparison:
    """The measured schedule `candidate` at every workload and level it ran, next to the static settings
    (`members`: sub-candidate -> length; `choices`: their length choices) and the `controllers` (candidate ->
    engine controller)."""
    by_key = {(p.candidate, p.workload, p.concurrency): p for p in points}
    mine = [p for p in points if p.candidate == candidate]
    k_at = {lv.concurrency: lv.proposal_length for lv in schedule.levels}
    rows: list[ScheduleRow] = []
    for point in sorted(mine, key=lambda p: (p.workload, p.concurrency)):
        w, c = point.workload, point.concurrency
        static_name = _static_at(choices, members, w, c)
        static = _cell(by_key.get((static_name, w, c)), members.get(static_name or "")) if static_name else None
        cell = _cell(point, k_at.get(c))
        rows.append(
            ScheduleRow(
                workload=w,
                concurrency=c,
                schedule_length=k_at.get(c, 0),
                static=static,
                schedule=cell,
                controllers=tuple(
                    found for name in sorted(controllers) if (found := _cell(by_key.get((name, w, c)), None))
                ),
                verdict=_versus(cell, static),
            )
        )
    summary = "; ".join(f"{r.workload}-c{r.concurrency} k={r.schedule_length}: {r.verdict}" for r in rows)
    return ScheduleComparison(
        sweep=schedule.sweep,
        candidate=candidate,
        schedule=schedule,
        rows=tuple(rows),
        controllers=dict(controllers),
        summary=summary or "the schedule was not measured",
    )
