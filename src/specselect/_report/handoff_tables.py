"""The report's hand-off parts: the answer for the traffic mix, and what to type to serve the recommendation.

Plain-text cells and lines (renderers escape them), read from `handoff.json` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.evidence.mix import MixEstimate
from specselect.records.handoff import HandoffMixOption
from specselect.records.server import ServeFlags

__all__ = ["ServeBlock", "mix_lines", "mix_spec", "serve_blocks"]


@dataclass(frozen=True)
class ServeBlock:
    """One configuration to paste: what it is, the command line, the identities it was measured with."""

    title: str
    command: str
    measured_on: str
    note: str | None


def _estimate(est: MixEstimate | None) -> str:
    if est is None:
        return "-"
    return f"{est.point:.2f}x [{est.low:.2f}, {est.high:.2f}]"


def mix_lines(data: ReportData) -> list[str]:
    """The mix recommendation and its traffic in sentences (the note when the plan has no [traffic]), and the
    sampling the decisions hold for."""
    handoff = data.handoff
    if handoff is None:
        return []
    sampling = [handoff.sampling] if handoff.sampling else []
    if handoff.mix is None:
        return [*([handoff.mix_note] if handoff.mix_note else []), *sampling]
    mix = handoff.mix
    shares = ", ".join(f"{w} {s:.0%}" for w, s in mix.workloads.items())
    levels = ", ".join(f"c{c} {s:.0%}" for c, s in mix.concurrency.items())
    return [mix.recommendation, f"traffic: {shares}; concurrency: {levels} (shares of requests)", *sampling]


def _segments(option: HandoffMixOption) -> str:
    parts = []
    for s in option.segments:
        if s.enabled:
            losing = f", loses on {', '.join(s.losing_categories)}" if s.losing_categories else ""
            parts.append(f"{s.workload}: c{s.levels[0]}-{s.levels[-1]}{losing}")
        else:
            parts.append(f"{s.workload}: off ({s.why})")
    return "; ".join(parts)


def mix_spec(data: ReportData) -> TableSpec | None:
    """Every candidate's answer for the mix: enabled everywhere, and only where it was accepted."""
    mix = data.handoff.mix if data.handoff is not None else None
    if mix is None or not mix.options:
        return None
    rows = tuple(
        (
            o.candidate,
            _estimate(o.everywhere) if o.everywhere is not None else (o.everywhere_note or "-"),
            _estimate(o.on_segments),
            _segments(o),
            "-" if o.concurrency_cutoff is None else str(o.concurrency_cutoff),
            "recommended" if o.candidate == mix.recommended else "",
        )
        for o in mix.options
    )
    columns = ("candidate", "mix speedup, on everywhere", "mix speedup, on its segments", "segments", "cut-off", "")
    return TableSpec(columns=columns, rows=rows)


def _measured_on(flags: ServeFlags) -> str:
    parts = [f"{flags.engine_kind} {flags.engine_version or '?'}", f"target {flags.target_snapshot or '?'}"]
    if flags.proposer_snapshot:
        parts.append(f"proposer {flags.proposer_snapshot}")
    return ", ".join(parts)


def serve_blocks(data: ReportData) -> list[ServeBlock]:
    """The recommended configurations' exact flags: the mix's, else each per-scenario recommendation's."""
    handoff = data.handoff
    if handoff is None:
        return []
    if handoff.mix is not None and handoff.mix.serve is not None:
        mixed = handoff.mix.serve
        title = f"{handoff.mix.recommended} for the traffic mix"
        return [ServeBlock(title, mixed.shell, _measured_on(mixed), handoff.mix.serve_note)]
    groups = {g.group: g for g in handoff.groups}
    out = []
    for name in dict.fromkeys(s.recommended for s in handoff.scenarios if s.recommended is not None):
        flags = groups[name].serve if name in groups else None
        if flags is not None:
            where = ", ".join(s.scenario for s in handoff.scenarios if s.recommended == name)
            out.append(ServeBlock(f"{name} (recommended on {where})", flags.shell, _measured_on(flags), None))
    return out
