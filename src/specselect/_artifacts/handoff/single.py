"""The first answer for a traffic mix: the best single server configuration, one candidate on every request or
the target-only baseline.

Most deployments run one configuration: routing workloads to different ones takes two server pools and a router.
A candidate can be the single configuration unless it is clearly worse somewhere the traffic goes: a workload's
speedup interval (the mix over that workload's scenarios) entirely below break-even (1.0), outputs that failed the
quality check (parity at temperature 0, the distribution test above), a latency limit clearly exceeded (the
decision's latency gate) or the memory budget exceeded in a weighted scenario, or a weighted scenario without
comparable evidence. Among those that can, the highest point estimate of the whole-mix speedup wins, the baseline
counting at exactly 1.0; whether the winner is told apart from the baseline (its interval above 1.0) and from the
runner-up (their paired ratio's interval excludes 1.0) is stated, not required.
"""

from __future__ import annotations

from collections.abc import Sequence

from specselect._artifacts.handoff.traffic import MixInputs, every_request
from specselect._core.decision import LATENCY_GATE_REASONS
from specselect._evidence.mix import mix_ratio
from specselect.records.evidence.mix import MixEstimate, MixRatio
from specselect.records.handoff import HandoffMixOption, HandoffSingle

__all__ = [
    "BREAK_EVEN",
    "SINGLE_RULE",
    "fmt_estimate",
    "fmt_ratio",
    "single_answer",
    "single_exclusion",
    "single_sentence",
]

BREAK_EVEN = 1.0
"""A workload whose speedup interval lies entirely below this is one the candidate clearly slows down."""

SINGLE_RULE = (
    "the single configuration serves every request with one candidate, or with the target-only baseline (1.0). "
    "A candidate cannot be it when, where the traffic goes, a workload's speedup interval (the mix over its "
    f"scenarios) lies entirely below {BREAK_EVEN:g}, its outputs failed the quality check, a latency gate or the "
    "memory budget failed clearly, or a scenario has no comparable evidence. Chosen: the highest point estimate of "
    "the whole-mix speedup among the others and the baseline; stated: whether its interval is above 1.0 and "
    "whether its paired ratio to the runner-up excludes 1.0"
)

_CLEARLY_EXCEEDED = (*(key for key, _ in LATENCY_GATE_REASONS.values()), "max_peak_memory_mb")
"""Failed checks that make a candidate clearly worse than the plan allows (interval-judged latency, memory)."""


def fmt_estimate(est: MixEstimate) -> str:
    """`1.33x [1.24, 1.42] (95%)`."""
    return f"{est.point:.2f}x [{est.low:.2f}, {est.high:.2f}] ({est.level * 100:.4g}%)"


def fmt_ratio(ratio: MixRatio) -> str:
    """`1.05x [0.98, 1.12] (95%)`."""
    return f"{ratio.point:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}] ({ratio.level * 100:.4g}%)"


def _scenario_exclusion(inputs: MixInputs, candidate: str) -> str | None:
    missing = [f"{w}-c{c}" for w, c in inputs.cells if inputs.entry(candidate, w, c) is None]
    if missing:
        return f"no comparable evidence in {', '.join(missing)}"
    for workload, level in inputs.cells:
        entry = inputs.entry(candidate, workload, level)
        if entry is None:
            continue
        decision = entry.decision
        if decision.checks.get("quality_ok") is False:
            return f"its outputs failed the quality check on {workload}-c{level} ({decision.reason})"
        exceeded = [name for name in decision.failed_checks if name in _CLEARLY_EXCEEDED]
        if exceeded:
            return f"{' and '.join(exceeded)} clearly failed on {workload}-c{level} ({decision.reason})"
    return None


def single_exclusion(inputs: MixInputs, candidate: str) -> str | None:
    """Why `candidate` cannot serve every request of the mix, or None when it can."""
    why = _scenario_exclusion(inputs, candidate)
    if why is not None:
        return why
    for workload in inputs.workloads:
        est = inputs.estimate(candidate, every_request, workload)
        if est is not None and est.high < BREAK_EVEN:
            return f"clearly slower than the baseline on {workload}: {fmt_estimate(est)}"
    return None


def _eligible(options: Sequence[HandoffMixOption]) -> list[tuple[HandoffMixOption, MixEstimate]]:
    pairs = [(o, o.everywhere) for o in options if o.single_excluded is None and o.everywhere is not None]
    return sorted(((o, e) for o, e in pairs if e is not None), key=lambda pair: -pair[1].point)


def single_answer(inputs: MixInputs, options: Sequence[HandoffMixOption]) -> HandoffSingle:
    """The best single configuration among `options` (each with its `single_excluded` set) and the baseline."""
    eligible = _eligible(options)
    names = tuple(o.candidate for o, _ in eligible)
    ahead = [(o, e) for o, e in eligible if e.point > BREAK_EVEN]
    if not ahead:
        runner = eligible[0][0].candidate if eligible else None
        return HandoffSingle(
            candidate=None, faster_than_baseline=False, runner_up=runner, eligible=names, rule=SINGLE_RULE
        )
    (best, est), rest = ahead[0], ahead[1:]
    versus = None
    if rest:
        runner = rest[0][0].candidate
        mine = inputs.configuration(best.candidate, every_request)
        theirs = inputs.configuration(runner, every_request)
        if mine and theirs:
            versus = mix_ratio(mine, theirs, (best.candidate, runner), inputs.policy)
    return HandoffSingle(
        candidate=best.candidate,
        family=best.family,
        estimate=est,
        faster_than_baseline=est.low > BREAK_EVEN,
        runner_up=rest[0][0].candidate if rest else None,
        versus_runner_up=versus,
        eligible=names,
        rule=SINGLE_RULE,
    )


def _baseline_sentence(single: HandoffSingle, options: Sequence[HandoffMixOption]) -> str:
    keep = "keep the target-only baseline on every request"
    runner = next((o for o in options if o.candidate == single.runner_up), None)
    if runner is not None and runner.everywhere is not None:
        told = "surely slower" if runner.everywhere.high < 1.0 else "not distinguishable from it"
        return (
            f"{keep}: the best candidate that can serve every request, {runner.candidate}, gives the mix "
            f"{fmt_estimate(runner.everywhere)} ({told})"
        )
    excluded = [f"{o.candidate}: {o.single_excluded}" for o in options if o.single_excluded is not None]
    if excluded:
        return f"{keep}: no candidate can serve every request ({'; '.join(excluded)})"
    return f"{keep}: no candidate has comparable evidence in the mix"


def single_sentence(single: HandoffSingle, options: Sequence[HandoffMixOption]) -> str:
    """The first answer in words, agreeing with every number the options show."""
    if single.candidate is None or single.estimate is None:
        return _baseline_sentence(single, options)
    told = (
        "faster than the target-only baseline"
        if single.faster_than_baseline
        else "not distinguishable from the target-only baseline at this level"
    )
    out = (
        f"use {single.candidate} ({single.family}) on every request: expected speedup of the mix "
        f"{fmt_estimate(single.estimate)}, {told}"
    )
    runner = next((o for o in options if o.candidate == single.runner_up), None)
    versus = single.versus_runner_up
    if runner is not None and runner.everywhere is not None and versus is not None:
        apart = "ahead of it" if versus.distinguishable else "not distinguishable from it"
        out += (
            f"; next best {runner.candidate} on every request ({runner.everywhere.point:.2f}x): "
            f"{single.candidate} / {runner.candidate} {fmt_ratio(versus)}, {apart}"
        )
    return out
