"""How sure the evidence is: THE speedup over every launch with its variance components, the A/A noise floors,
and each prediction against what was measured (plain-text tables for the HTML and the Markdown report)."""

from __future__ import annotations

from specselect.report.console import fmt_ratio
from specselect.report.data import ReportData
from specselect.report.tables import TableSpec

__all__ = ["launches_spec", "noise_floor_spec", "prediction_spec"]


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _rates(rates: tuple[float, ...]) -> str:
    return " / ".join(f"{r:.1f}" for r in rates) or "-"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def launches_spec(data: ReportData) -> TableSpec | None:
    """Per candidate and scenario: each launch's rate on both sides and how much of the interval is launch noise."""
    rows = []
    for e in data.entries():
        s = e.speedup
        if s is None or (len(s.launches_baseline) <= 1 and len(s.launches_candidate) <= 1):
            continue
        c = s.components
        rows.append(
            (
                e.candidate,
                e.scenario,
                f"{fmt_ratio(s.point)} {_interval(s.low, s.high)}",
                _interval(s.rerun_low, s.rerun_high),
                _rates(s.launch_rates_baseline),
                _rates(s.launch_rates_candidate),
                _share(c.launch_share if c else None),
                "-" if c is None or c.df_effective is None else f"{c.df_effective:.1f}",
                s.method,
            )
        )
    if not rows:
        return None
    columns = (
        "candidate",
        "scenario",
        "speedup (all launches)",
        "a rerun's point",
        "baseline tok/s per launch",
        "candidate tok/s per launch",
        "launch share of variance",
        "df",
        "method",
    )
    return TableSpec(columns=columns, rows=tuple(rows))


def noise_floor_spec(data: ReportData) -> TableSpec | None:
    """Per track and scenario: the baseline's alternate launches against each other (speedup, outputs, band) and
    the decision the plan's rule gives that pair taken as a candidate (anything but accept, or the machine
    drifted)."""
    if data.evidence is None or not data.evidence.noise_floors:
        return None
    rows = []
    for n in data.evidence.noise_floors:
        f = n.floor
        agree = "-"
        if f.parity is not None and f.parity.n_compared:
            agree = f"{f.parity.n_equal}/{f.parity.n_compared} equal"
        band = "-" if f.band_low is None or f.band_high is None else f"{f.band_low:.3f} .. {f.band_high:.3f}"
        judged = n.as_candidate
        as_candidate = "-" if judged is None else f"{judged.decision.value} ({judged.reason})"
        rows.append(
            (
                n.track,
                n.scenario,
                f"{fmt_ratio(f.speedup.point, 3)} {_interval(f.speedup.low, f.speedup.high)}",
                "yes" if f.contains_one else "no" if f.contains_one is not None else "-",
                agree,
                band,
                f"{f.verdict} ({f.reason})",
                as_candidate,
            )
        )
    columns = (
        "track",
        "scenario",
        "A/A speedup",
        "contains 1.0",
        "launch outputs",
        "noise band",
        "verdict",
        "as a candidate",
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
