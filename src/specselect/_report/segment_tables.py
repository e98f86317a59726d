"""The report's segments: where a candidate pays, by input length (`evidence.segments`) and by workload category.

Plain-text cells and lines (renderers escape them), read from `evidence.json`'s entries only: a bucket with too
few items shows its counts and says so, never a number; the outcomes are the evidence's own.
"""

from __future__ import annotations

from specselect._report.console import fmt_interval, fmt_ratio
from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.evidence.categories import AcceptanceSummary, CategoryEvidence
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.segments import InputLengthSegments, Segment
from specselect.records.evidence.stats import RatioEstimate

__all__ = ["SEGMENT_COLUMNS", "segment_lead", "segment_lines", "segment_spec"]

SEGMENT_COLUMNS = (
    "candidate",
    "scenario",
    "part",
    "items (requests)",
    "speedup (interval, level)",
    "acceptance",
    "outcome",
)


def _segmented(data: ReportData) -> list[tuple[ScenarioEvidence, InputLengthSegments]]:
    return [(e, e.segments) for e in data.entries() if e.segments is not None]


def _interval(estimate: RatioEstimate | None) -> str:
    if estimate is None or estimate.point is None:
        return "-"
    if estimate.low is None or estimate.high is None:
        return f"{fmt_ratio(estimate.point)} (no interval: {estimate.reason or 'not computed'})"
    return fmt_interval(estimate.point, estimate.low, estimate.high, estimate.level)


def _acceptance(summary: AcceptanceSummary | None) -> str:
    if summary is None or summary.acceptance_rate is None:
        return "-"
    length = f" (len {summary.mean_acceptance_length:.2f})" if summary.mean_acceptance_length is not None else ""
    return f"{summary.acceptance_rate:.2f}{length}"


def _speedup(segment: Segment) -> str:
    if segment.outcome == "too_few_items":
        return f"too few items ({segment.n_items})"
    return _interval(segment.throughput_speedup)


def _part(segment: Segment) -> str:
    return "all inputs" if segment.label == "all" else f"input {segment.label} tokens"


def _segment_row(entry: ScenarioEvidence, segment: Segment) -> tuple[str, ...]:
    return (
        entry.candidate,
        entry.scenario,
        _part(segment),
        f"{segment.n_items} ({segment.n_pairs})",
        _speedup(segment),
        _acceptance(segment.acceptance),
        segment.outcome,
    )


def _category_row(entry: ScenarioEvidence, category: CategoryEvidence) -> tuple[str, ...]:
    speedup = category.throughput_speedup
    too_few = speedup.reason == "too_few_clusters"
    return (
        entry.candidate,
        entry.scenario,
        f"category {category.category}",
        f"{category.n_items} ({category.n_pairs})",
        f"too few items ({category.n_items})" if too_few else _interval(speedup),
        "-" if too_few else _acceptance(category.acceptance),
        "-",
    )


def segment_spec(data: ReportData) -> TableSpec | None:
    """Per candidate and scenario: the pooled part, each input-length bucket and, for workloads with more than
    one category, each category (None when no entry has segments)."""
    rows: list[tuple[str, ...]] = []
    for entry, segments in _segmented(data):
        rows.append(_segment_row(entry, segments.pooled))
        rows.extend(_segment_row(entry, s) for s in segments.segments)
        breakdown = entry.categories
        if breakdown is not None and len(breakdown.categories) > 1:
            rows.extend(_category_row(entry, c) for c in breakdown.categories)
    return TableSpec(columns=SEGMENT_COLUMNS, rows=tuple(rows)) if rows else None


def _where(segments: InputLengthSegments) -> list[str]:
    said = []
    for outcome, verb in (
        ("pays", "pays on"),
        ("faster", "faster on"),
        ("loses", "loses on"),
        ("unclear", "unclear on"),
    ):
        parts = [s for s in segments.segments if s.outcome == outcome]
        if parts:
            said.append(f"{verb} " + ", ".join(f"{s.label} input tokens ({_speedup(s)})" for s in parts))
    few = [s for s in segments.segments if s.outcome == "too_few_items"]
    if few:
        said.append("too few items in " + ", ".join(f"{s.label} ({s.n_items})" for s in few))
    return said


def segment_lines(data: ReportData) -> list[tuple[str, str]]:
    """(candidate on scenario, where it pays by input length): one line per measured candidate x scenario."""
    out = []
    for entry, segments in _segmented(data):
        pooled = segments.pooled
        text = f"all inputs {_speedup(pooled)} ({pooled.outcome})"
        text = "; ".join([text, *_where(segments)])
        if segments.disagreeing:
            text += f"; the buckets {', '.join(segments.disagreeing)} disagree with the pooled answer"
        out.append((f"{entry.candidate} on {entry.scenario}", text))
    return out


def segment_lead(data: ReportData) -> str | None:
    """What the segments are, from the policy the evidence recorded (None when no entry has segments)."""
    found = _segmented(data)
    if not found:
        return None
    policy = found[0][1].policy
    return (
        "Where each candidate pays, by the prompt's length in tokens (SPEED-Bench-style buckets with edges at "
        f"{', '.join(str(e) for e in policy.edges)} tokens) and by workload category. Outcome: pays when the speedup "
        f"interval lies at or above {policy.min_speedup:.2f}x, faster when it lies above 1.00x but reaches below "
        f"{policy.min_speedup:.2f}x, loses when it lies below 1.00x, else unclear; a bucket or category with fewer "
        f"than {policy.min_items} items shows its counts only. A diagnostic: the decision above stays per scenario."
    )
