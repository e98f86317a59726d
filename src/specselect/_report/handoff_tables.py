"""The report's hand-off parts: the answer for the traffic mix, and what to type to serve the recommendation.

Plain-text cells and lines (renderers escape them), read from `handoff.json` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from specselect._report.console import mix_answers
from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.evidence.mix import MixEstimate
from specselect.records.handoff import HandoffMix, HandoffMixOption
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
    """The mix's answers in the hand-off's order (the best single configuration, then routing) and its traffic in
    sentences (the note when the plan has no [traffic]), and the sampling the decisions hold for."""
    handoff = data.handoff
    if handoff is None:
        return []
    sampling = [handoff.sampling] if handoff.sampling else []
    if handoff.mix is None:
        return [*([handoff.mix_note] if handoff.mix_note else []), *sampling]
    mix = handoff.mix
    shares = ", ".join(f"{w} {s:.0%}" for w, s in mix.workloads.items())
    levels = ", ".join(f"c{c} {s:.0%}" for c, s in mix.concurrency.items())
    answers = [f"{label[0].upper()}{label[1:]}: {sentence}" for label, sentence in mix_answers(mix)]
    return [*answers, f"traffic: {shares}; concurrency: {levels} (shares of requests)", *sampling]


def _segments(option: HandoffMixOption) -> str:
    parts = []
    for s in option.segments:
        if s.enabled:
            losing = f", loses on {', '.join(s.losing_categories)}" if s.losing_categories else ""
            parts.append(f"{s.workload}: c{s.levels[0]}-{s.levels[-1]}{losing}")
        else:
            parts.append(f"{s.workload}: off ({s.why})")
    return "; ".join(parts)


def _single_cell(option: HandoffMixOption, chosen: str | None) -> str:
    if option.everywhere is None:
        return option.everywhere_note or "-"
    if option.single_excluded is not None:
        return f"{_estimate(option.everywhere)}; cannot: {option.single_excluded}"
    return _estimate(option.everywhere) + (" (the single configuration)" if option.candidate == chosen else "")


def mix_spec(data: ReportData) -> TableSpec | None:
    """Every candidate's answer for the mix: on every request (the single configuration's column) first, then
    only where it was accepted (routing)."""
    mix = data.handoff.mix if data.handoff is not None else None
    if mix is None or not mix.options:
        return None
    chosen = mix.single.candidate if mix.single is not None else None
    routed = mix.routing.candidate if mix.routing is not None else None
    if mix.single is None:
        routed = mix.recommended
    rows = tuple(
        (
            o.candidate,
            _single_cell(o, chosen),
            _estimate(o.on_segments),
            _segments(o),
            "-" if o.concurrency_cutoff is None else str(o.concurrency_cutoff),
            "routed" if o.candidate == routed else "",
        )
        for o in mix.options
    )
    columns = (
        "candidate",
        "mix speedup, on every request",
        "mix speedup, on its segments",
        "segments",
        "cut-off",
        "",
    )
    return TableSpec(columns=columns, rows=rows)


def _measured_on(flags: ServeFlags) -> str:
    parts = [f"{flags.engine_kind} {flags.engine_version or '?'}", f"target {flags.target_snapshot or '?'}"]
    if flags.proposer_snapshot:
        parts.append(f"proposer {flags.proposer_snapshot}")
    return ", ".join(parts)


def _mix_blocks(mix: HandoffMix) -> list[ServeBlock]:
    """The mix's configurations to paste, in its order: the single configuration, then the routed candidate."""
    blocks = []
    if mix.serve is not None:
        where = "on every request" if mix.single is not None else "routed"
        title = f"{mix.recommended or 'the target-only baseline'} for the traffic mix ({where})"
        blocks.append(ServeBlock(title, mix.serve.shell, _measured_on(mix.serve), mix.serve_note))
    routed = mix.routing.serve if mix.routing is not None else None
    if mix.routing is not None and routed is not None:
        title = f"{mix.routing.candidate} for the traffic mix (routed: its workloads only)"
        blocks.append(ServeBlock(title, routed.shell, _measured_on(routed), mix.routing.serve_note))
    return blocks


def serve_blocks(data: ReportData) -> list[ServeBlock]:
    """The recommended configurations' exact flags: the mix's, else each per-scenario recommendation's."""
    handoff = data.handoff
    if handoff is None:
        return []
    if handoff.mix is not None and (blocks := _mix_blocks(handoff.mix)):
        return blocks
    groups = {g.group: g for g in handoff.groups}
    out = []
    for name in dict.fromkeys(s.recommended for s in handoff.scenarios if s.recommended is not None):
        flags = groups[name].serve if name in groups else None
        if flags is not None:
            where = ", ".join(s.scenario for s in handoff.scenarios if s.recommended == name)
            out.append(ServeBlock(f"{name} (recommended on {where})", flags.shell, _measured_on(flags), None))
    return out
