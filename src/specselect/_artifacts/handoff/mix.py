"""The hand-off's answer for the plan's `[traffic]` mix: which candidate, enabled where, and the expected speedup.

Per candidate and workload of the mix, the candidate is enabled from the lowest concurrency level up to the last
level below which every level was accepted (the crossover's cut-off); one speculative server serves every enabled
workload, so its cut-off is the lowest of theirs, and the mix counts every other cell at the baseline's speed.
The expected speedup and its interval come from `evidence.mix.mix_speedup` over the per-scenario intervals; the
recommended candidate has the highest lower bound on its segments, and only when that bound is above 1.0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from specselect._core.status import Decision, EvidenceStatus
from specselect._evidence.mix import CellSpeedup, MixCell, mix_speedup
from specselect._plan.traffic import TrafficConfig
from specselect.records.evidence.mix import MIX_RULE, MixEstimate, MixPolicy
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.handoff import HandoffMix, HandoffMixOption, HandoffSegment
from specselect.records.proposals import ScheduleRange
from specselect.records.results import EvidenceFile
from specselect.records.server import ServeFlags

__all__ = ["MIX_ADVICE_RULE", "NO_TRAFFIC_NOTE", "MixInputs", "ServeWith", "mix_advice"]

NO_TRAFFIC_NOTE = (
    "the plan has no [traffic] weights: the per-scenario answers below are all there is (add [traffic] with each "
    "workload's and concurrency level's share of your requests for one answer for your mix)"
)
MIX_ADVICE_RULE = (
    "per candidate and workload: enabled from the lowest level up to the last level below which every level's "
    "decision is accept; one speculative server for every enabled workload, cut off at the lowest of their "
    "levels; every other cell at the baseline's speed (1.0). Recommended: the highest lower bound of the mix "
    "speedup on its segments, when above 1.0. Mix speedup: "
)

ServeWith = Callable[[str, Sequence[ScheduleRange] | None], tuple[ServeFlags | None, bool]]
"""(group, batch-size schedule or None) -> the group's serve flags, and whether the engine wrote the schedule in."""
Cutoff = Callable[[str, int], Sequence[ScheduleRange] | None]
"""(group, highest enabled level) -> the batch-size schedule that stops speculating above it."""


class MixInputs:
    """What the mix reads: the traffic, the levels, the evidence and the baseline's seconds per request."""

    def __init__(
        self,
        traffic: TrafficConfig,
        levels: Sequence[int],
        evidence: EvidenceFile,
        baseline_seconds: Mapping[tuple[str, int], float],
        policy: MixPolicy,
    ) -> None:
        self.traffic = traffic
        self.levels = sorted(levels)
        self.cells = traffic.cells(self.levels)
        self.evidence = evidence
        self.baseline_seconds = baseline_seconds
        self.policy = policy

    def entry(self, candidate: str, workload: str, level: int) -> ScenarioEvidence | None:
        """The candidate's comparable evidence in one cell, or None."""
        return next(
            (
                e
                for e in self.evidence.entries
                if (e.candidate, e.workload, e.concurrency) == (candidate, workload, level)
                and e.evidence.evidence_status == EvidenceStatus.COMPARABLE
            ),
            None,
        )


def _cell_speedup(entry: ScenarioEvidence) -> CellSpeedup | None:
    """THE speedup over every launch of both sides (`ScenarioEvidence.speedup`), the one the decision used."""
    return CellSpeedup.of_estimate(entry.speedup) if entry.speedup is not None else None


def _segment(inputs: MixInputs, candidate: str, workload: str) -> HandoffSegment:
    share = inputs.traffic.workloads.get(workload, 0.0)
    levels: list[int] = []
    why = "accepted at every measured level"
    for level in inputs.levels:
        entry = inputs.entry(candidate, workload, level)
        if entry is None or entry.decision.decision is not Decision.ACCEPT:
            found = f"{entry.decision.decision.value}: {entry.decision.reason}" if entry else "no comparable evidence"
            why = f"not accepted at concurrency {level} ({found})"
            break
        levels.append(level)
    losing = sorted(
        {
            c.category
            for level in levels
            if (e := inputs.entry(candidate, workload, level)) is not None and e.categories is not None
            for c in e.categories.categories
            if c.throughput_speedup.high is not None and c.throughput_speedup.high < 1.0
        }
    )
    return HandoffSegment(
        workload=workload,
        share=share,
        enabled=bool(levels),
        levels=tuple(levels),
        why=why,
        losing_categories=tuple(losing),
    )


def _estimate(inputs: MixInputs, candidate: str, on: Callable[[str, int], bool]) -> MixEstimate | None:
    cells: list[MixCell] = []
    for (workload, level), share in inputs.cells.items():
        seconds = inputs.baseline_seconds.get((workload, level))
        if seconds is None or seconds <= 0:
            return None
        entry = inputs.entry(candidate, workload, level) if on(workload, level) else None
        speed = _cell_speedup(entry) if entry is not None else None
        if on(workload, level) and speed is None:
            return None
        cells.append(
            MixCell(workload=workload, concurrency=level, share=share, baseline_seconds=seconds, speedup=speed)
        )
    return mix_speedup(cells, inputs.policy)


def _option(inputs: MixInputs, candidate: str, family: str) -> HandoffMixOption:
    workloads = sorted({w for w, _ in inputs.cells})
    segments = tuple(_segment(inputs, candidate, w) for w in workloads)
    enabled = [s for s in segments if s.enabled]
    cutoff = min((s.levels[-1] for s in enabled), default=None)
    if cutoff is not None and cutoff >= inputs.levels[-1]:
        cutoff = None
    on_names = {s.workload for s in enabled}
    everywhere = _estimate(inputs, candidate, lambda w, c: True)
    missing = [f"{w}-c{c}" for w, c in inputs.cells if inputs.entry(candidate, w, c) is None]
    return HandoffMixOption(
        candidate=candidate,
        family=family,
        everywhere=everywhere,
        everywhere_note=f"no comparable evidence in {', '.join(missing)}" if everywhere is None and missing else None,
        on_segments=_estimate(inputs, candidate, lambda w, c: w in on_names and (cutoff is None or c <= cutoff))
        if enabled
        else None,
        segments=segments,
        concurrency_cutoff=cutoff,
    )


def _levels(levels: tuple[int, ...]) -> str:
    return str(levels[0]) if len(levels) == 1 else f"{levels[0]}-{levels[-1]}"


def _fmt(est: MixEstimate) -> str:
    level = f"{est.level * 100:.4g}%"
    return f"{est.point:.2f}x [{est.low:.2f}, {est.high:.2f}] ({level})"


def _keep(options: Sequence[HandoffMixOption]) -> str:
    """Why the baseline stays, in words that agree with every number the options show."""
    top = options[0] if options else None
    if top is not None and top.on_segments is not None:
        return (
            f"keep the target-only baseline: the best candidate, {top.candidate}, enabled only where it was "
            f"accepted, gives the mix {_fmt(top.on_segments)}, not surely above 1.0"
        )
    everywhere = next((o for o in options if o.everywhere is not None), None)
    if everywhere is not None and everywhere.everywhere is not None:
        return (
            f"keep the target-only baseline: no candidate was accepted in any scenario of the mix; "
            f"{everywhere.candidate} enabled everywhere would give {_fmt(everywhere.everywhere)}, "
            "but each scenario's own decision is not an accept"
        )
    return "keep the target-only baseline: no candidate has comparable evidence in the mix"


def _sentence(best: HandoffMixOption | None, options: Sequence[HandoffMixOption]) -> str:
    if best is None or best.on_segments is None:
        return _keep(options)
    on = [
        f"{s.workload} ({s.share:.0%} of requests) at concurrency {_levels(s.levels)}"
        for s in best.segments
        if s.enabled
    ]
    off = [f"{s.workload} ({s.share:.0%})" for s in best.segments if not s.enabled]
    where = "; ".join(on) + (f", and the target-only baseline on {'; '.join(off)}" if off else "")
    return f"use {best.candidate} ({best.family}) on {where}: expected speedup of the mix {_fmt(best.on_segments)}"


def mix_advice(
    inputs: MixInputs,
    candidates: Mapping[str, str],
    *,
    serve: ServeWith,
    cutoff: Cutoff,
) -> HandoffMix:
    """The mix's options for `candidates` (name -> family), the recommendation and its serve flags."""
    options = [_option(inputs, name, family) for name, family in candidates.items()]
    options = [o for o in options if o.everywhere is not None or o.on_segments is not None]
    options.sort(key=lambda o: -(o.on_segments.low if o.on_segments is not None else 0.0))
    best = next((o for o in options if o.on_segments is not None and o.on_segments.low > 1.0), None)
    flags, note = None, None
    if best is not None:
        ranges = cutoff(best.candidate, best.concurrency_cutoff) if best.concurrency_cutoff is not None else None
        flags, written = serve(best.candidate, ranges)
        if ranges is not None:
            note = (
                f"speculation stops above {best.concurrency_cutoff} concurrent requests through the engine's "
                "batch-size schedule: derived from the measured levels, not measured as such"
                if written
                else f"the engine cannot stop speculating above {best.concurrency_cutoff} concurrent requests by "
                "itself: cap the load on this server there"
            )
    return HandoffMix(
        workloads=dict(inputs.traffic.workloads),
        concurrency=inputs.traffic.profile(inputs.levels),
        options=tuple(options),
        recommended=best.candidate if best is not None else None,
        recommendation=_sentence(best, options),
        serve=flags,
        serve_note=note,
        rule=MIX_ADVICE_RULE + MIX_RULE,
    )
