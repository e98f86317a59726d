"""The report's sweep tables: crossover concurrency, proposal-length choice, goodput, early stops and the budget.

Plain-text cells (renderers escape them), read from `evidence.json`'s `sweeps` section and the manifest only.
"""

from __future__ import annotations

from specselect._evidence.pipeline import scenario_name
from specselect._report.console import fmt_interval, fmt_ratio, fmt_workload
from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.stats import RatioEstimate
from specselect.records.evidence.sweeps import ScheduleCell, ScheduleComparison, SweepAnalysis

__all__ = [
    "budget_line",
    "crossover_spec",
    "early_stop_lines",
    "goodput_spec",
    "length_spec",
    "schedule_specs",
    "sweep_analysis",
    "sweep_summary_lines",
    "temperature_spec",
]


def sweep_analysis(data: ReportData) -> SweepAnalysis | None:
    """The run's sweep analysis, when it swept anything."""
    return data.evidence.sweeps if data.evidence is not None else None


def _interval(estimate: RatioEstimate | None) -> str:
    if estimate is None or estimate.point is None:
        return "-"
    if estimate.low is None or estimate.high is None:
        return fmt_ratio(estimate.point)
    return f"{fmt_ratio(estimate.point)} [{estimate.low:.2f}, {estimate.high:.2f}]"


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def crossover_spec(data: ReportData) -> TableSpec | None:
    """Per candidate and workload: where speculation stops paying as concurrency grows."""
    sweeps = sweep_analysis(data)
    if sweeps is None or not sweeps.crossovers:
        return None
    rows = tuple(
        (
            c.candidate,
            fmt_workload(c.workload, c.temperature),
            ", ".join(str(level) for level in c.levels),
            " · ".join(f"c{v.concurrency} {v.verdict}" for v in c.per_level),
            _num(c.pays_up_to),
            _num(c.crossover_at),
            _interval(c.interval_before),
            _interval(c.interval_at_crossover),
            c.recommendation,
        )
        for c in sweeps.crossovers
    )
    columns = (
        "candidate",
        "workload",
        "concurrency levels",
        "per level",
        "pays up to",
        "crossover at",
        "speedup before",
        "speedup at crossover",
        "recommendation",
    )
    return TableSpec(columns=columns, rows=rows)


def _at(entry: ScenarioEvidence | None) -> tuple[str, str, str]:
    if entry is None:
        return ("-", "-", "-")
    s, telemetry = entry.speedup, entry.telemetry
    speedup = fmt_interval(s.point, s.low, s.high, s.level) if s is not None else "-"
    rate = telemetry.acceptance_rate if telemetry is not None else None
    return (speedup, "-" if rate is None else f"{rate:.2f}", entry.decision.decision.value)


def temperature_spec(data: ReportData) -> TableSpec | None:
    """Per candidate, workload and concurrency level measured at several temperatures: the speedup, acceptance
    and decision at each, lowest temperature first."""
    entries = data.entries()
    temperatures = sorted({e.temperature for e in entries})
    if len(temperatures) < 2:
        return None
    cells: dict[tuple[str, str, int], dict[float, ScenarioEvidence]] = {}
    for e in entries:
        cells.setdefault((e.candidate, e.workload, e.concurrency), {})[e.temperature] = e
    rows = tuple(
        (candidate, workload, str(level), *(v for t in temperatures for v in _at(at.get(t))))
        for (candidate, workload, level), at in cells.items()
    )
    what = ("speedup", "acceptance", "decision")
    columns = ("candidate", "workload", "concurrency", *(f"T {t:g}: {w}" for t in temperatures for w in what))
    return TableSpec(columns=columns, rows=rows)


def length_spec(data: ReportData) -> TableSpec | None:
    """Per plan entry and scenario: the proposal lengths compared and the one to use."""
    sweeps = sweep_analysis(data)
    if sweeps is None or not sweeps.lengths:
        return None
    rows = []
    for s in sweeps.lengths:
        choice = s.choice
        per_length = " · ".join(
            f"k={row.length} {fmt_ratio(row.speedup_point)}"
            + (" (best)" if row.is_best else (" ~best" if row.indistinguishable else ""))
            for row in choice.per_length
        )
        fixed = ", ".join(f"{k}={v}" for k, v in sorted(s.fixed.items())) or "-"
        rows.append(
            (
                s.sweep,
                fixed,
                scenario_name(choice.workload, choice.concurrency, s.temperature),
                choice.status,
                _num(choice.recommended_length),
                _num(choice.best_length),
                per_length,
            )
        )
    columns = ("sweep", "fixed options", "scenario", "status", "use k", "best k", "speedup per length")
    return TableSpec(columns=columns, rows=tuple(rows))


def _setting(cell: ScheduleCell | None) -> str:
    if cell is None or cell.speedup_point is None:
        return "-"
    k = f"k={cell.proposal_length} " if cell.proposal_length is not None else ""
    interval = (
        f" [{cell.speedup_low:.2f}, {cell.speedup_high:.2f}]"
        if cell.speedup_low is not None and cell.speedup_high is not None
        else ""
    )
    return f"{k}{fmt_ratio(cell.speedup_point)}{interval} {cell.decision or ''}".strip()


def _schedule_spec(comparison: ScheduleComparison) -> TableSpec:
    names = sorted(comparison.controllers)
    rows = []
    for row in comparison.rows:
        by_name = {c.candidate: c for c in row.controllers}
        static = f"{row.static.candidate}: {_setting(row.static)}" if row.static is not None else "-"
        rows.append(
            (
                f"{row.workload}-c{row.concurrency}",
                "1.00x (baseline)",
                static,
                _setting(row.schedule),
                *(_setting(by_name.get(name)) for name in names),
                row.verdict,
            )
        )
    columns = (
        "scenario",
        "off",
        "best static",
        f"schedule ({comparison.candidate})",
        *(f"{name} ({comparison.controllers[name]})" for name in names),
        "schedule vs static",
    )
    return TableSpec(columns=columns, rows=tuple(rows))


def schedule_specs(data: ReportData) -> list[tuple[str, TableSpec]]:
    """Per measured schedule: its ranges in words, and off vs best static vs schedule vs controllers per level."""
    sweeps = sweep_analysis(data)
    if sweeps is None:
        return []
    out = []
    for comparison in sweeps.schedules:
        ranges = ", ".join(
            f"batch {first}{'+' if last is None else '' if last == first else f'-{last}'}: k={k}"
            for first, last, k in comparison.schedule.ranges
        )
        out.append((f"{comparison.candidate} ({ranges})", _schedule_spec(comparison)))
    return out


def goodput_spec(data: ReportData) -> TableSpec | None:
    """Per group and scenario: requests/s meeting the plan's SLOs."""
    sweeps = sweep_analysis(data)
    if sweeps is None or not sweeps.goodput:
        return None
    rows = []
    for g in sweeps.goodput:
        gp = g.goodput
        limits = [f"TTFT ≤ {gp.slo_ttft_ms:g} ms"] if gp.slo_ttft_ms is not None else []
        limits += [f"TPOT ≤ {gp.slo_tpot_ms:g} ms"] if gp.slo_tpot_ms is not None else []
        met = "-" if gp.n_met is None else f"{gp.n_met}/{gp.n_requests}"
        rows.append(
            (
                g.group,
                g.scenario,
                " and ".join(limits) or "-",
                met,
                "-" if gp.goodput_rps is None else f"{gp.goodput_rps:.3f}",
                f"{gp.throughput_rps:.3f}",
            )
        )
    columns = ("group", "scenario", "SLO", "met", "goodput (req/s)", "throughput (req/s)")
    return TableSpec(columns=columns, rows=tuple(rows))


def early_stop_lines(data: ReportData) -> list[str]:
    """One line per scenario the runner skipped because the candidate was clearly losing below it."""
    sweeps = sweep_analysis(data)
    if sweeps is None:
        return []
    return [f"{s.group} {s.scenario}: not measured ({s.reason})" for s in sweeps.early_stops]


def budget_line(data: ReportData) -> str | None:
    """The sweep's stated budget (before the candidates ran), if it stated one."""
    b = data.manifest.budget
    if b is None:
        return None
    return (
        f"stated before the candidates ran: ~{b.seconds / 60:.1f} min for {b.servers} server starts at "
        f"{b.startup_s:.0f} s and {len(b.per_scenario)} scenarios at {b.tokens_per_s:.1f} tok/s per stream "
        "(measured on the baseline)"
    )


def sweep_summary_lines(sweeps: SweepAnalysis | None) -> list[str]:
    """Short lines for the terminal after the decision table: the sweep's recommendations."""
    if sweeps is None:
        return []
    lines = [
        f"{c.candidate} on {fmt_workload(c.workload, c.temperature)}: {c.recommendation} ({c.status})"
        for c in sweeps.crossovers
    ]
    for s in sweeps.lengths:
        ch = s.choice
        use = f"use k={ch.recommended_length}" if ch.recommended_length is not None else "no length recommended"
        lines.append(
            f"{s.sweep} on {scenario_name(ch.workload, ch.concurrency, s.temperature)}: {use} ({ch.status}; "
            f"best k={_num(ch.best_length)})"
        )
    lines.extend(f"{s.group} {s.scenario}: skipped, clearly losing at a lower concurrency" for s in sweeps.early_stops)
    return lines
