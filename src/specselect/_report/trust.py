"""What a run's closing lines must say before any decision is read: which pairs rest on less than the plan
measured -- rounds a busy host, a busy device or foreign traffic took out, pairs with no trusted round, rounds
left out for the time budget, a drift, preemptions where the KV cache ran out -- and what to do about each. Read
from the results only."""

from __future__ import annotations

from specselect.records.results import EvidenceFile

__all__ = ["trust_lines"]

_QUIET = "measure again while nothing else runs on the machine (`specselect run PLAN --label NEW`)"


def _pair_lines(evidence: EvidenceFile) -> list[str]:
    out: list[str] = []
    for e in (*evidence.entries, *evidence.controls):
        where = f"{e.candidate} {e.scenario}"
        missing = e.evidence.missing_evidence
        if "uncontaminated_measurement" in missing:
            out.append(f"{where}: no trusted round ({'; '.join(e.contamination)}): untrusted, {_QUIET}")
        elif e.speedup is not None and e.speedup.excluded_rounds:
            left = "; ".join(f"round {r + 1}: {why}" for r, why in e.speedup.excluded_rounds.items())
            kept = len(e.speedup.rounds)
            out.append(f"{where}: decided on {kept} round{'s' * (kept != 1)}, left out {left}; {_QUIET}")
        if e.drift is not None and e.drift.flagged:
            out.append(
                f"{where}: the speedup drifted {e.drift.slope_per_round:+.1%} per round (p {e.drift.p_value:.3f}): "
                "it is not one number on this machine; look at the rounds in the report"
            )
    return out


def _capacity_lines(evidence: EvidenceFile | None) -> list[str]:
    """A line per candidate and scenario where its engine preempted requests: the KV cache, not the mechanism's
    speed, is what limited it there."""
    if evidence is None:
        return []
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


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def trust_lines(evidence: EvidenceFile | None, sequential_stop: str | None) -> list[str]:
    """One line per thing that limits what the decisions rest on, with what to do; empty when nothing does."""
    out = _pair_lines(evidence) if evidence is not None else []
    out.extend(_capacity_lines(evidence))
    if sequential_stop is not None:
        out.append(
            f"{sequential_stop}: the pairs still open are decided on the rounds that ran; raise "
            "[run] sequential_budget_s, or run on a faster host, for the next look"
        )
    return out
