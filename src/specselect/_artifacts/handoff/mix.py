"""The hand-off's answer for the plan's `[traffic]` mix: the best single configuration first, routing second.

First (`single`): one candidate on every request, or the target-only baseline -- what most deployments run (see
`handoff.single` for the rule). Second (`routing`): per candidate and workload of the mix, the candidate is enabled
from the lowest concurrency level up to the last level below which every level was accepted (the crossover's
cut-off); one speculative server serves every enabled workload, so its cut-off is the lowest of theirs, and the
baseline serves every other cell. The routed candidate has the highest lower bound on its segments, when above
1.0, and its gain over the single configuration is the ratio of the two mixes on the same draws
(`evidence.mix.mix_ratio`). Every speedup and interval comes from `evidence.mix` over the per-scenario intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from specselect._artifacts.handoff.single import (
    SINGLE_RULE,
    fmt_estimate,
    fmt_ratio,
    single_answer,
    single_exclusion,
    single_sentence,
)
from specselect._artifacts.handoff.traffic import MixInputs, Where, every_request
from specselect._core.status import Decision
from specselect._evidence.mix import mix_ratio
from specselect._plan import BASELINE_GROUP
from specselect.records.evidence.mix import MIX_RATIO_RULE, MIX_RULE, MixEstimate, MixRatio
from specselect.records.handoff import HandoffMix, HandoffMixOption, HandoffRouting, HandoffSegment, HandoffSingle
from specselect.records.proposals import ScheduleRange
from specselect.records.server import ServeFlags

__all__ = ["MIX_ADVICE_RULE", "NO_TRAFFIC_NOTE", "MixInputs", "ServeWith", "mix_advice"]

NO_TRAFFIC_NOTE = (
    "the plan has no [traffic] weights: the per-scenario answers below are all there is (add [traffic] with each "
    "workload's and concurrency level's share of your requests for one answer for your mix)"
)
MIX_ADVICE_RULE = (
    f"first, the best single configuration: {SINGLE_RULE}. Second, routing: per candidate and workload, enabled "
    "from the lowest level up to the last level below which every level's decision is accept; one speculative "
    "server for every enabled workload, cut off at the lowest of their levels; the baseline on every other cell "
    "(1.0); the candidate with the highest lower bound of the mix speedup on its segments, when above 1.0; its "
    f"gain over the single configuration: {MIX_RATIO_RULE}. Mix speedup: "
)

ServeWith = Callable[[str, Sequence[ScheduleRange] | None], tuple[ServeFlags | None, bool]]
"""(group, batch-size schedule or None) -> the group's serve flags, and whether the engine wrote the schedule in."""
Cutoff = Callable[[str, int], Sequence[ScheduleRange] | None]
"""(group, highest enabled level) -> the batch-size schedule that stops speculating above it."""


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


def _option(inputs: MixInputs, candidate: str, family: str) -> HandoffMixOption:
    segments = tuple(_segment(inputs, candidate, w) for w in inputs.workloads)
    enabled = [s for s in segments if s.enabled]
    cutoff = min((s.levels[-1] for s in enabled), default=None)
    if cutoff is not None and cutoff >= inputs.levels[-1]:
        cutoff = None
    everywhere = inputs.estimate(candidate, every_request)
    missing = [f"{w}-c{c}" for w, c in inputs.cells if inputs.entry(candidate, w, c) is None]
    return HandoffMixOption(
        candidate=candidate,
        family=family,
        everywhere=everywhere,
        everywhere_note=f"no comparable evidence in {', '.join(missing)}" if everywhere is None and missing else None,
        on_segments=inputs.estimate(candidate, _routed(segments, cutoff)) if enabled else None,
        segments=segments,
        concurrency_cutoff=cutoff,
        single_excluded=single_exclusion(inputs, candidate),
    )


def _routed(segments: Sequence[HandoffSegment], cutoff: int | None) -> Where:
    """Where a routed candidate serves: its enabled workloads, up to its cut-off."""
    on_names = {s.workload for s in segments if s.enabled}
    return lambda w, c: w in on_names and (cutoff is None or c <= cutoff)


def _levels(levels: tuple[int, ...]) -> str:
    return str(levels[0]) if len(levels) == 1 else f"{levels[0]}-{levels[-1]}"


def _keep(options: Sequence[HandoffMixOption]) -> str:
    """Why no routing answer: in words that agree with every number the options show."""
    top = options[0] if options else None
    if top is not None and top.on_segments is not None:
        return (
            f"none surely faster: the best candidate enabled only where it was accepted, {top.candidate}, gives the "
            f"mix {fmt_estimate(top.on_segments)}, not surely above 1.0"
        )
    if options:
        return "none: no candidate was accepted in any scenario of the mix"
    return "none: no candidate has comparable evidence in the mix"


def _same(routed: HandoffMixOption, single: HandoffSingle) -> bool:
    """The routed configuration is the single one: its candidate, on every workload, with no cut-off."""
    return (
        routed.candidate == single.candidate
        and routed.concurrency_cutoff is None
        and all(s.enabled for s in routed.segments if s.share > 0)
    )


def _where(routed: HandoffMixOption) -> str:
    on = [
        f"{s.workload} ({s.share:.0%} of requests) at concurrency {_levels(s.levels)}"
        for s in routed.segments
        if s.enabled
    ]
    off = [f"{s.workload} ({s.share:.0%})" for s in routed.segments if not s.enabled]
    return "; ".join(on) + (f", and the target-only baseline on {'; '.join(off)}" if off else "")


def _routing_sentence(
    routed: HandoffMixOption, estimate: MixEstimate, single: HandoffSingle, gain: MixRatio | None
) -> str:
    out = (
        f"{routed.candidate} ({routed.family}) on {_where(routed)}, two server pools and a router: "
        f"expected speedup of the mix {fmt_estimate(estimate)}"
    )
    if gain is None:
        return out
    versus = f"{single.candidate} on every request" if single.candidate else "the baseline on every request"
    if gain.low > 1.0:
        told = f"a gain over {versus} of {fmt_ratio(gain)}"
    elif gain.high < 1.0:
        told = f"slower than {versus}: {fmt_ratio(gain)}"
    else:
        told = f"not distinguishable from {versus}: {fmt_ratio(gain)}"
    return f"{out}; {told}"


def _routing(
    inputs: MixInputs, options: Sequence[HandoffMixOption], single: HandoffSingle, serve: ServeWith, cutoff: Cutoff
) -> tuple[HandoffRouting | None, str | None]:
    """The routing answer with its gain over `single`, or None and why not."""
    routed = next((o for o in options if o.on_segments is not None and o.on_segments.low > 1.0), None)
    estimate = routed.on_segments if routed is not None else None
    if routed is None or estimate is None:
        return None, _keep(options)
    if _same(routed, single):
        return None, (
            f"nothing to route: {routed.candidate} was accepted on every workload of the mix at every level, and "
            "the single configuration already serves each with it"
        )
    mine = inputs.configuration(routed.candidate, _routed(routed.segments, routed.concurrency_cutoff))
    theirs = inputs.configuration(single.candidate, every_request)
    names = (f"{routed.candidate} routed", single.candidate or "baseline")
    gain = mix_ratio(mine, theirs, names, inputs.policy) if mine and theirs else None
    ranges = cutoff(routed.candidate, routed.concurrency_cutoff) if routed.concurrency_cutoff is not None else None
    flags, written = serve(routed.candidate, ranges)
    note = None
    if ranges is not None:
        note = (
            f"speculation stops above {routed.concurrency_cutoff} concurrent requests through the engine's "
            "batch-size schedule: derived from the measured levels, not measured as such"
            if written
            else f"the engine cannot stop speculating above {routed.concurrency_cutoff} concurrent requests by "
            "itself: cap the load on this server there"
        )
    routing = HandoffRouting(
        candidate=routed.candidate,
        family=routed.family,
        estimate=estimate,
        gain=gain,
        recommendation=_routing_sentence(routed, estimate, single, gain),
        serve=flags,
        serve_note=note,
    )
    return routing, None


def mix_advice(
    inputs: MixInputs,
    candidates: Mapping[str, str],
    *,
    serve: ServeWith,
    cutoff: Cutoff,
    baseline: str = BASELINE_GROUP,
) -> HandoffMix:
    """The mix's options for `candidates` (name -> family): the best single configuration with its serve flags
    first (the `baseline` group's when no candidate is it: the line to deploy is then the target alone), then
    routing with its gain over it."""
    options = [_option(inputs, name, family) for name, family in candidates.items()]
    options = [o for o in options if o.everywhere is not None or o.on_segments is not None]
    options.sort(key=lambda o: -(o.on_segments.low if o.on_segments is not None else 0.0))
    single = single_answer(inputs, options)
    routing, routing_note = _routing(inputs, options, single, serve, cutoff)
    flags = serve(single.candidate or baseline, None)[0]
    return HandoffMix(
        workloads=dict(inputs.traffic.workloads),
        concurrency=inputs.traffic.profile(inputs.levels),
        options=tuple(options),
        recommended=single.candidate,
        recommendation=single_sentence(single, options),
        serve=flags,
        single=single,
        routing=routing,
        routing_note=routing_note,
        rule=MIX_ADVICE_RULE + MIX_RULE,
    )
