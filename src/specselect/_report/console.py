"""Terminal tables (rich): the admission matrix and the decision table. Renderers only read result documents."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.rounds import estimand_statement
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff, HandoffMix
from specselect.records.results import AdmissionFile, EvidenceFile

__all__ = [
    "DECISION_COLUMNS",
    "REPORT_DECISION_COLUMNS",
    "admission_table",
    "control_lines",
    "decision_rows",
    "decision_table",
    "estimand_lines",
    "fmt_interval",
    "fmt_level",
    "fmt_mib",
    "fmt_ratio",
    "fmt_workload",
    "groups_table",
    "make_console",
    "mix_answers",
    "mix_closing_lines",
    "report_decision_rows",
]

OLDER_MIX_NOTE = (
    "(a hand-off written before schema 3: its answer routes workloads; `specselect run --resume` on the results "
    "directory, or a new run, gives the single configuration first)"
)


def make_console() -> Console:
    """A console for result tables: the terminal's width, or 200 columns when piped (CI logs, files)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    return console


def fmt_ratio(value: float | None, digits: int = 2) -> str:
    """`1.23x`, or `-` when missing."""
    return "-" if value is None else f"{value:.{digits}f}x"


def fmt_level(level: float) -> str:
    """An interval's level as a percentage with the digits it has: `95%`, `96.25%`."""
    return f"{level * 100:.4g}%"


def fmt_workload(workload: str, temperature: float) -> str:
    """`chat`, and above temperature 0 `chat at T 0.7`: what a sweep over concurrency or length was measured on."""
    return f"{workload} at T {temperature:g}" if temperature > 0 else workload


def fmt_interval(point: float | None, low: float | None, high: float | None, level: float | None) -> str:
    """`2.61x [2.08, 3.27] 95%` (the interval's real level), `2.61x` without an interval, `-` without a point."""
    if point is None:
        return "-"
    if low is None or high is None or level is None:
        return fmt_ratio(point)
    return f"{point:.2f}x [{low:.2f}, {high:.2f}] {fmt_level(level)}"


def _speedup(entry: ScenarioEvidence) -> str:
    interval = entry.decision.confidence.interval
    point = entry.evidence.throughput_speedup
    if interval is None:
        return fmt_ratio(point)
    return fmt_interval(point, interval.low, interval.high, interval.level)


def _latency(entry: ScenarioEvidence, value: float | None, check: str) -> str:
    # The p95 ratio the contract's check compares, and the mean ratio's interval the latency gate judged.
    interval = entry.decision.confidence.latency_intervals.get(check)
    if interval is None:
        return fmt_ratio(value)
    return f"{fmt_ratio(value)}; mean {interval.point or 0:.2f}x [{interval.low:.2f}, {interval.high:.2f}]"


def control_lines(evidence: EvidenceFile) -> list[str]:
    """One line per A/A control and scenario: its speedup over the baseline, whether the interval holds 1.0, and
    the decision the plan's rule gives it."""
    out = []
    for c in evidence.controls:
        s = c.speedup
        text = "-" if s is None else fmt_interval(s.point, s.low, s.high, s.level)
        holds = (
            ""
            if s is None or s.low is None or s.high is None
            else (", holds 1.0" if s.low <= 1.0 <= s.high else ", does NOT hold 1.0")
        )
        out.append(
            f"A/A control {c.candidate} {c.scenario}: {text}{holds}; {c.decision.decision.value} ({c.decision.reason})"
        )
    return out


def _prompts_line(entry: ScenarioEvidence, minimum: float) -> str | None:
    s = entry.speedup
    if s is None or s.prompts_verdict is None:
        return None
    where = f"{entry.candidate} {entry.scenario}: {s.n_items} prompts"
    if s.prompts_verdict == "more_rounds":
        return f"{where}; the launches' variation alone keeps its interval across {minimum:g}x: more rounds needed"
    enough = "enough" if s.prompts_verdict == "enough" else "too few: the decision stays open for want of prompts"
    return (
        f"{where}, about {s.prompts_needed} needed to tell its speedup from the {minimum:g}x minimum (from its "
        f"per-prompt spread at the deciding look): {enough}"
    )


def estimand_lines(evidence: EvidenceFile) -> list[str]:
    """What the decisions are about (one sentence), then, under the traffic estimand, the prompts each open or
    decided pair needs against the minimum speedup and whether it had them."""
    policy = evidence.policy
    minimum = policy.thresholds.min_throughput_speedup
    lines = [estimand_statement(policy.estimand)]
    lines.extend(line for e in evidence.entries if (line := _prompts_line(e, minimum)) is not None)
    return lines


def decision_rows(evidence: EvidenceFile, groups: Sequence[GroupResult]) -> list[list[str]]:
    """One row per candidate x scenario: the same cells the terminal, Markdown and HTML tables show."""
    status = {g.group: g.run_status.value for g in groups}
    rows: list[list[str]] = []
    for e in evidence.entries:
        tel = e.telemetry
        acceptance = "-"
        if tel is not None and tel.acceptance_rate is not None:
            length = tel.mean_acceptance_length  # an engine may export the rate without the length
            acceptance = f"{tel.acceptance_rate:.2f}" + (f" (len {length:.2f})" if length is not None else "")
        elif tel is not None and tel.source == "not_exported":
            acceptance = "not exported"
        rows.append(
            [
                e.candidate,
                e.scenario,
                status.get(e.candidate, "-"),
                e.evidence.evidence_status.value,
                e.decision.decision.value,
                e.decision.reason,
                _speedup(e),
                _latency(e, e.evidence.ttft_ratio, "max_ttft_regression_ratio"),
                _latency(e, e.evidence.e2e_p95_ratio, "max_e2e_p95_regression_ratio"),
                acceptance,
                _parity(e),
            ]
        )
    return rows


def _parity(e: ScenarioEvidence) -> str:
    """Exact parity's verdict at temperature 0; the distribution test's above it; `lossy` first for a candidate
    whose outputs are not the target's (exact parity does not judge it)."""
    if e.sampled_parity is not None:
        shown = f"{e.sampled_parity.verdict} (distribution)"
    elif e.evidence.lossy is not None:
        return "lossy: not judged at T 0"
    else:
        shown = e.parity.verdict.value if e.parity else "-"
    return f"lossy: {shown}" if e.evidence.lossy is not None else shown


DECISION_COLUMNS = (
    "group",
    "scenario",
    "run",
    "evidence",
    "decision",
    "reason",
    "speedup (interval, level)",
    "TTFT p95; mean",
    "E2E p95; mean",
    "acceptance",
    "parity",
)


REPORT_DECISION_COLUMNS = (*DECISION_COLUMNS[:9], "peak memory", *DECISION_COLUMNS[9:])
"""The report's decision table: `DECISION_COLUMNS` with the candidate's peak memory after the E2E p95 ratio."""


def fmt_mib(value: float | None) -> str:
    """`5,148 MiB`, or `-` when missing."""
    return "-" if value is None else f"{value:,.0f} MiB"


def _peak_memory(entry: ScenarioEvidence, groups: Sequence[GroupResult]) -> float | None:
    if entry.evidence.candidate_peak_memory_mb is not None:
        return entry.evidence.candidate_peak_memory_mb
    # Not comparable: still show what the candidate's server used, when it ran that scenario.
    group = next((g for g in groups if g.group == entry.candidate), None)
    run = next((s for s in group.scenarios if s.scenario == entry.scenario), None) if group else None
    return run.peak_memory.mb if run is not None and run.peak_memory is not None else None


def report_decision_rows(evidence: EvidenceFile, groups: Sequence[GroupResult]) -> list[list[str]]:
    """`decision_rows` with the peak-memory cell inserted (columns `REPORT_DECISION_COLUMNS`): HTML and Markdown."""
    rows = decision_rows(evidence, groups)
    for row, entry in zip(rows, evidence.entries, strict=True):
        row.insert(9, fmt_mib(_peak_memory(entry, groups)))
    return rows


def decision_table(evidence: EvidenceFile, groups: Sequence[GroupResult]) -> Table:
    """The decision table: per candidate and scenario, the three answers and the evidence behind them."""
    table = Table(title="Decisions (candidate vs g0_target_only)", title_justify="left")
    for col in DECISION_COLUMNS:
        table.add_column(col, overflow="fold")
    colours = {"accept": "green", "tune": "yellow", "reject": "red", "not_evaluated": "dim"}
    for row in decision_rows(evidence, groups):
        decision = row[4]
        table.add_row(*row[:4], f"[{colours.get(decision, 'white')}]{decision}[/]", *row[5:])
    return table


def admission_table(admission: AdmissionFile) -> Table:
    """Every candidate with its admission status, the gate that decided and the reason."""
    table = Table(title="Admission (before any server starts)", title_justify="left")
    for col in ("candidate", "family", "status", "gate", "reason"):
        table.add_column(col)
    for r in admission.results:
        table.add_row(r.candidate, r.family, r.run_status.value, r.gate, escape(r.explained))  # `[assets]` is text
    return table


def groups_table(groups: Sequence[GroupResult]) -> Table:
    """Per group: how it ended, start-up time and the log to read."""
    table = Table(title="Groups", title_justify="left")
    for col in ("group", "run_status", "reason", "launches", "startup", "scenarios", "log"):
        table.add_column(col, overflow="fold")
    for g in groups:
        lives = [g, *g.relaunches] if g.launch is not None else []
        # Of the launches planned, or started where the sequential rule added a round.
        planned = max(g.launches_planned, len(lives))
        launched = f"{sum(1 for x in lives if x.run_status.value == 'completed')}/{planned}" if lives else "-"
        startups = [f"{x.launch.startup_s:.1f}" for x in lives if x.launch and x.launch.startup_s is not None]
        startup = f"{', '.join(startups)} s" if startups else "-"
        done = sum(1 for s in g.all_scenario_runs() if s.status == "completed")
        table.add_row(g.group, g.run_status.value, g.reason, launched, startup, str(done), g.log_path or "-")
    return table


def mix_answers(mix: HandoffMix) -> list[tuple[str, str]]:
    """The answers for a traffic mix in their order, as (label, sentence): the best single configuration first,
    routing second (a hand-off written before schema 3 has only its routed answer)."""
    if mix.single is None:
        return [("routed", f"{mix.recommendation} {OLDER_MIX_NOTE}")]
    routed = mix.routing.recommendation if mix.routing is not None else mix.routing_note or "none"
    return [("one configuration", mix.recommendation), ("routed", routed)]


def mix_closing_lines(handoff: Handoff | None) -> list[str]:
    """The console's closing lines for the traffic mix, in the hand-off's order (none without [traffic])."""
    if handoff is None or handoff.mix is None:
        return []
    return [f"traffic mix, {label}: {sentence}" for label, sentence in mix_answers(handoff.mix)]
