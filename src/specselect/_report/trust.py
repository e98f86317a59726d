"""What a run's closing lines must say before any decision is read: which pairs rest on less than the plan
measured -- a lossy candidate whose outputs are not the target's, rounds a busy host or foreign traffic took out,
pairs with no trusted round, rounds left out for the time budget, a drift -- and what to do about each. Read
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
