"""How sure the evidence is: the paired rounds behind every speedup (each round's rates and ratio, the variance
the interval used, drift), the A/A controls, and each prediction against what was measured (plain-text tables
for the HTML and the Markdown report)."""

from __future__ import annotations

from specselect._report.console import fmt_interval, fmt_ratio, fmt_workload
from specselect._report.data import ReportData
from specselect._report.tables import TableSpec
from specselect.records.evidence.result import ScenarioEvidence

__all__ = ["controls_spec", "distribution_spec", "prediction_spec", "rounds_spec"]


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _rates(rates: tuple[float, ...]) -> str:
    return " / ".join(f"{r:.1f}" for r in rates) or "-"


def _ratios(logs: tuple[float, ...]) -> str:
    return " / ".join(f"{2.718281828459045**v:.2f}" for v in logs) or "-"


def _variance(e: ScenarioEvidence) -> str:
    s = e.speedup
    if s is None or s.variance_source is None:
        return "-"
    df = f", df {s.df:.1f}" if s.df is not None else ""
    return f"{s.variance_source}{df}"


def _drift(e: ScenarioEvidence) -> str:
    d = e.drift
    if d is None:
        return "-"
    flag = "FLAGGED" if d.flagged else "none"
    return f"{flag} ({d.slope_per_round:+.3f}/round, p {d.p_value:.2f})"


def rounds_spec(data: ReportData) -> TableSpec | None:
    """Per candidate and scenario: each round's rates and ratio, the interval with its level, the variance it
    used (pooled over the run's pairs or the pair's own, with df), rounds left out and drift."""
    rows = []
    for e in data.entries():
        s = e.speedup
        if s is None or not s.rounds:
            continue
        left_out = "; ".join(f"round {r + 1}: {why}" for r, why in s.excluded_rounds.items()) or "-"
        rows.append(
            (
                e.candidate,
                e.scenario,
                fmt_interval(s.point, s.low, s.high, s.level),
                _interval(s.rerun_low, s.rerun_high),
                _ratios(s.round_log_ratios),
                _rates(s.baseline_values),
                _rates(s.candidate_values),
                _variance(e),
                _drift(e),
                left_out,
            )
        )
    if not rows:
        return None
    columns = (
        "candidate",
        "scenario",
        "speedup (interval, level)",
        "a rerun's point",
        "ratio per round",
        "baseline tok/s per round",
        "candidate tok/s per round",
        "variance",
        "drift",
        "rounds left out",
    )
    return TableSpec(columns=columns, rows=tuple(rows))


def controls_spec(data: ReportData) -> TableSpec | None:
    """Per A/A control and scenario: its speedup over the baseline, whether the interval holds 1.0, its outputs,
    and the decision the plan's rule gives it (anything but accept, or the machine drifted)."""
    if data.evidence is None or not data.evidence.controls:
        return None
    rows = []
    for c in data.evidence.controls:
        s, p = c.speedup, c.parity
        agree = "-" if p is None or not p.n_compared else f"{p.n_equal}/{p.n_compared} equal"
        holds = "-" if s is None or s.low is None or s.high is None else "yes" if s.low <= 1.0 <= s.high else "NO"
        rows.append(
            (
                c.candidate,
                c.scenario,
                "-" if s is None else fmt_interval(s.point, s.low, s.high, s.level),
                holds,
                agree,
                f"{c.decision.decision.value} ({c.decision.reason})",
            )
        )
    columns = ("control", "scenario", "A/A speedup (interval, level)", "contains 1.0", "outputs", "decision")
    return TableSpec(columns=columns, rows=tuple(rows))


def _statistics(e: ScenarioEvidence) -> str:
    test = e.sampled_parity
    if test is None or not test.statistics:
        return "-"
    shown = []
    for s in test.statistics:
        way = {"candidate_higher": " (cand. higher)", "candidate_lower": " (cand. lower)"}.get(s.direction or "", "")
        shown.append(f"{s.name} p {s.p_value:.3f}, adj. {s.adjusted_p_value:.3f}{way}")
    return "; ".join(shown)


def distribution_spec(data: ReportData) -> TableSpec | None:
    """Temperature > 0: per candidate, workload and temperature, the distribution test of the parity passes'
    samples: the verdict, how much it saw, and each statistic's permutation p-value, raw and family-wise
    adjusted."""
    rows, seen = [], set()
    controls = data.evidence.controls if data.evidence is not None else ()
    for e in (*data.entries(), *controls):
        test = e.sampled_parity
        if test is None or (e.candidate, e.workload, e.temperature) in seen:
            continue
        seen.add((e.candidate, e.workload, e.temperature))
        rows.append(
            (
                e.candidate,
                fmt_workload(e.workload, e.temperature),
                test.verdict if test.reason is None else f"{test.verdict} ({test.reason})",
                f"{len(test.prompts)}: {test.samples_per_side[0]} / {test.samples_per_side[1]}",
                f"{test.distinct_outputs[0]} / {test.distinct_outputs[1]}",
                _statistics(e),
            )
        )
    if not rows:
        return None
    columns = (
        "candidate",
        "workload",
        "verdict",
        "prompts: samples (baseline / candidate)",
        "distinct outputs",
        "statistics (permutation p)",
    )
    return TableSpec(columns=columns, rows=tuple(rows))


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def prediction_spec(data: ReportData) -> TableSpec | None:
    """Per candidate and scenario: the decode speedup predicted from acceptance and a cost model, and measured."""
    rows = []
    for e in data.entries():
        p = e.prediction
        if p is None or p.expected_tokens_per_step is None:
            continue
        verify = p.verify_cost
        cost = "-" if verify is None else f"c(k) = {verify.intercept:.2f} + {verify.slope:.3f} k ({verify.source})"
        rows.append(
            (
                e.candidate,
                e.scenario,
                f"{p.expected_tokens_per_step:.2f}",
                cost,
                fmt_ratio(p.predicted_decode_speedup),
                fmt_ratio(p.measured_decode_speedup),
                _error(p.relative_error),
                ", ".join(p.missing) or "-",
            )
        )
    if not rows:
        return None
    columns = (
        "candidate",
        "scenario",
        "tokens per drafting step",
        "verify cost model",
        "predicted decode speedup",
        "measured",
        "error",
        "missing",
    )
    return TableSpec(columns=columns, rows=tuple(rows))
