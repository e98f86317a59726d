"""The decide step's inputs: each side of a pair as the contract reads it, and what makes a pair untrusted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specselect._core.pairing import MemoryFigure, PairEvidence, SideMetrics
from specselect._core.status import EvidenceStatus, RunStatus
from specselect._evidence.pipeline.inputs import MeasuredGroup, MeasuredScenario
from specselect._evidence.pipeline.rules import MISSING_UNCONTAMINATED
from specselect.records.telemetry import SpecTelemetry

__all__ = ["SideFigures", "excluded_rounds", "find_scenario", "side_metrics", "untrusted"]


def find_scenario(group: MeasuredGroup | None, scenario: str) -> MeasuredScenario | None:
    """The group's run of `scenario`, or None."""
    if group is None:
        return None
    return next((s for s in group.scenarios if s.scenario == scenario), None)


@dataclass(frozen=True)
class SideFigures:
    """A measured side's figures over every launch (`pipeline.launches`), in place of its first run's summary."""

    throughput_tokens_per_s: float | None
    """THE speedup statistic's rate for this side."""
    ttft_p95_ms: float | None
    e2e_p95_ms: float | None
    peak_memory_mb: float | None
    telemetry: SpecTelemetry | None
    peak_memory_figure: MemoryFigure | None = None


def side_metrics(
    group: MeasuredGroup | None,
    run: MeasuredScenario | None,
    *,
    role: str,
    quality_ok: bool | None,
    figures: SideFigures | None = None,
) -> SideMetrics:
    """One side of a pair as section 4 of the contract reads it: its status and identity from its first launch's
    run; its figures from `figures` when the pair was measured, else from that run's summary."""
    status = group.run_status if group is not None else RunStatus.SKIPPED
    if group is not None and group.run_status == RunStatus.COMPLETED and run is not None and run.status == "skipped":
        status = RunStatus.SKIPPED  # not measured on purpose (an early stop), which is not a failure
    elif (
        group is not None
        and group.run_status == RunStatus.COMPLETED
        and (run is None or run.status != "completed" or run.summary is None or run.summary.n_error > 0)
    ):
        # A scenario that did not finish cleanly is not a completed measurement of that scenario.
        status = RunStatus.FAILED
    summary = run.summary if run is not None else None
    telemetry = figures.telemetry if figures is not None else (run.telemetry if run is not None else None)
    proposals: bool | None = None
    if telemetry is not None and telemetry.source != "not_exported":
        proposals = bool((telemetry.drafts or 0) > 0 or (telemetry.draft_tokens or 0) > 0)
    path = group.execution_path if group else None
    if role == "baseline" and proposals:
        # A "baseline" whose engine reports proposals (an endpoint configured with speculation) is not target-only.
        path = "speculative"
    return SideMetrics.model_validate(
        {
            "role": role,
            "run_status": status,
            "target_snapshot": group.target_snapshot if group else None,
            "workload_key": run.workload_identity.key if run else None,
            "sampling_key": summary.sampling_key if summary else None,
            "execution_path": path,
            **(_measured_figures(figures) if figures is not None else _summary_figures(run)),
            "quality_ok": quality_ok,
            "mechanism_active": proposals if role == "candidate" else None,
        }
    )


def _measured_figures(figures: SideFigures) -> dict[str, float | str | None]:
    return {
        "throughput_tokens_per_s": figures.throughput_tokens_per_s,
        "ttft_p95_ms": figures.ttft_p95_ms,
        "e2e_p95_ms": figures.e2e_p95_ms,
        "peak_memory_mb": figures.peak_memory_mb,
        "peak_memory_figure": figures.peak_memory_figure,
    }


def _summary_figures(run: MeasuredScenario | None) -> dict[str, float | str | None]:
    summary = run.summary if run is not None else None
    return {
        "throughput_tokens_per_s": summary.output_throughput_tok_s if summary else None,
        "ttft_p95_ms": summary.ttft_ms.p95 if summary else None,
        "e2e_p95_ms": summary.e2e_ms.p95 if summary else None,
        "peak_memory_mb": run.peak_memory_mb if run else None,
        "peak_memory_figure": run.peak_memory_figure if run else None,
    }


def excluded_rounds(sides: Sequence[tuple[str, MeasuredScenario]], host_limit: float | None) -> dict[int, str]:
    """Round -> why its measurements are not trusted: foreign traffic on an endpoint, another process on the
    server's device, a busy host, or a response cache that drafted from answers to the very prompts it was
    measured on, on either side's launch of that round (the first reason found per round)."""
    out: dict[int, str] = {}
    for role, run in sides:
        where = f"{run.scenario} (round {run.launch + 1})"
        reason = None
        if run.traffic is not None and run.traffic.contaminated:
            reason = f"{role}: {run.traffic.reason} during {where}"
        devices = run.device_load
        if reason is None and devices is not None and devices.busy:
            reason = (
                f"{role}: device busy: another process shared the server's device ({devices.describe()}) during {where}"
            )
        cache = run.response_cache
        if reason is None and cache is not None and cache.inflated:
            reason = cache.reason(role, where)
        load = run.host_load
        if reason is None and load is not None and host_limit is not None and load.foreign_share > host_limit:
            reason = (
                f"{role}: host busy: {load.foreign_share:.1%} of all CPU time went to other processes during "
                f"{where} (limit {host_limit:.1%})"
            )
        if reason is not None:
            out.setdefault(run.launch, reason)
    return dict(sorted(out.items()))


def untrusted(evidence: PairEvidence, reasons: Sequence[str]) -> PairEvidence:
    """Comparable/incomplete evidence measured under other traffic becomes incomplete (stronger states stay)."""
    if not reasons or evidence.evidence_status is EvidenceStatus.NOT_EVALUATED:
        return evidence
    sides = [r.split(":", 1)[0] for r in reasons]
    status = evidence.evidence_status
    if status is EvidenceStatus.COMPARABLE:
        status = EvidenceStatus.INCOMPLETE
    return PairEvidence(
        evidence_status=status,
        mismatches=evidence.mismatches,
        missing_evidence=tuple(dict.fromkeys((*evidence.missing_evidence, MISSING_UNCONTAMINATED))),
        missing_detail=tuple(
            dict.fromkeys((*evidence.missing_detail, *(f"{side}.{MISSING_UNCONTAMINATED}" for side in sides)))
        ),
        candidate_run_status=evidence.candidate_run_status,
        # Outputs do not depend on other traffic: how quality was judged, and its verdict, stay.
        quality_ok=evidence.quality_ok,
        quality_check=evidence.quality_check,
    )
