"""What a run's closing lines must say before any decision is read: which pairs rest on less than the plan
measured -- a lossy candidate whose outputs are not the target's, rounds a busy host, a busy device or
foreign traffic took out, pairs with no trusted round, rounds left out for the time budget, a drift -- and
what to do about each; and what each candidate costs the KV cache, with the preemptions where it ran out
(`capacity_lines`). Read from the results only."""

from __future__ import annotations

from specselect.records.evidence.capacity import CapacityCost
from specselect.records.responsecache import REPLAY_FIX, REPLAY_MARK
from specselect.records.results import EvidenceFile

__all__ = ["capacity_lines", "trust_lines"]

_QUIET = "measure again while nothing else runs on the machine (`specselect run PLAN --label NEW`)"


def _fix(reasons: list[str] | tuple[str, ...]) -> str:
    """What to do about rounds left out: a replayed response cache is not cured by a quiet machine."""
    return REPLAY_FIX if reasons and all(REPLAY_MARK in r for r in reasons) else _QUIET


def _pair_lines(evidence: EvidenceFile) -> list[str]:
    out: list[str] = []
    for e in (*evidence.entries, *evidence.controls):
        where = f"{e.candidate} {e.scenario}"
        missing = e.evidence.missing_evidence
        if "uncontaminated_measurement" in missing:
            out.append(f"{where}: no trusted round ({'; '.join(e.contamination)}): untrusted, {_fix(e.contamination)}")
        elif e.speedup is not None and e.speedup.excluded_rounds:
            left = "; ".join(f"round {r + 1}: {why}" for r, why in e.speedup.excluded_rounds.items())
            kept = len(e.speedup.rounds)
            fix = _fix(tuple(e.speedup.excluded_rounds.values()))
            out.append(f"{where}: decided on {kept} round{'s' * (kept != 1)}, left out {left}; {fix}")
        if e.drift is not None and e.drift.flagged:
            out.append(
                f"{where}: the speedup drifted {e.drift.slope_per_round:+.1%} per round (p {e.drift.p_value:.3f}): "
                "it is not one number on this machine; look at the rounds in the report"
            )
    return out


def _preemption_lines(evidence: EvidenceFile) -> list[str]:
    """A line per candidate and scenario where its engine preempted requests: the KV cache, not the mechanism's
    speed, is what limited it there."""
    out = []
    for cost in evidence.capacity:
        for scenario, count in cost.preemptions.items():
            base = cost.baseline_preemptions.get(scenario, 0)
            peak = cost.peak_kv_usage.get(scenario)
            full = f", KV cache at {peak:.0%} at its peak" if peak is not None else ""
            out.append(
                f"{cost.candidate} {scenario}: the engine preempted {count} request{'s' * (count != 1)} "
                f"({cost.baseline}: {base}){full}: at this concurrency its KV cache ({_tokens(cost.candidate_tokens)} "
                "tokens) is what limits it; compare at a lower concurrency or give the server more KV cache"
            )
    return out


def _cost_line(cost: CapacityCost) -> str | None:
    if cost.candidate_tokens is None or cost.tokens_lost is None or cost.loss_share is None:
        return None
    held = ""
    if cost.request_tokens is not None and cost.candidate_concurrency is not None:
        held = (
            f": {cost.candidate_concurrency:g} requests of {cost.request_tokens:,} tokens at once "
            f"({cost.baseline}: {cost.baseline_concurrency:g})"
        )
    gate = f"; {cost.reason}: {cost.detail}" if cost.reason else ""
    return (
        f"{cost.candidate} holds {cost.candidate_tokens:,} KV tokens, {cost.tokens_lost:,} "
        f"({cost.loss_share:.1%}) fewer than {cost.baseline}{held}{gate}"
    )


def capacity_lines(evidence: EvidenceFile | None) -> list[str]:
    """What each candidate costs the KV cache against its baseline (a candidate that costs nothing is left out),
    then where its engine preempted requests: the KV cache, not the mechanism's speed, limited it there."""
    if evidence is None:
        return []
    costs = [_cost_line(c) for c in evidence.capacity if c.tokens_lost or c.reason]
    return [*(line for line in costs if line is not None), *_preemption_lines(evidence)]


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _lossy_lines(evidence: EvidenceFile) -> list[str]:
    """One line per candidate whose verification is not exact (the plan opted in with `allow_lossy`)."""
    lossy = {e.candidate: e.evidence.lossy for e in evidence.entries if e.evidence.lossy is not None}
    return [
        f"{name}: lossy verification ({why}): its outputs are NOT the target's; its quality rests on the "
        "distribution test at temperature > 0 alone, never on exact parity (at temperature 0 its pairs are "
        "incomplete)"
        for name, why in lossy.items()
    ]


def trust_lines(evidence: EvidenceFile | None, sequential_stop: str | None) -> list[str]:
    """One line per thing that limits what the decisions rest on, with what to do; empty when nothing does."""
    out = [*_lossy_lines(evidence), *_pair_lines(evidence)] if evidence is not None else []
    if sequential_stop is not None:
        out.append(
            f"{sequential_stop}: the pairs still open are decided on the rounds that ran; raise "
            "[run] sequential_budget_s, or run on a faster host, for the next look"
        )
    return out
