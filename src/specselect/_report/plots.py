"""The report's figures, built from the result documents: which chart shows which evidence.

* speedup with its confidence interval per candidate and scenario (reference lines at 1.0 and the threshold);
* TTFT / TPOT / E2E distributions of the baseline and each candidate, per scenario (from the raw records);
* acceptance by draft position, per scenario (the engine's own per-position counters);
* predicted vs measured decode speedup;
* sweeps: speedup against concurrency (a workload measured at several concurrency levels) and against the
  proposal length (candidates that differ only in `num_speculative_tokens`). Both are `_sweep_section` over a
  different x: a future sweep axis (e.g. an explicit proposal-length sweep inside one group, or request rate)
  plugs in as one more `_sweep_section(...)` call with its own `x_of`/`series_of` in `build_plots`.

A candidate without data (refused at admission, failed, not comparable) gets no marks; `Plots.omitted` says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specselect._evidence.pipeline import scenario_name
from specselect._report.charts import (
    BarSeries,
    BoxSeries,
    LinePoint,
    LineSeries,
    RefLine,
    ScatterPoint,
    bar_chart,
    box_chart,
    line_chart,
    scatter_chart,
)
from specselect._report.console import fmt_workload
from specselect._report.data import ReportData
from specselect._report.svg import BASELINE_COLOUR, PALETTE
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.group import GroupResult

__all__ = ["Figure", "FigureSection", "Plots", "build_plots", "group_colours", "proposal_length_of"]

_THRESHOLD_COLOUR = "#B42318"
_MORE_GREYS = ("#3F3F3F", "#ABABAB")
"""Baselines of further tracks (one target each): still grey, still told apart."""


@dataclass(frozen=True)
class Figure:
    """One chart with the anchor id it gets in the page and a one-line caption."""

    key: str
    svg: str
    caption: str = ""


@dataclass(frozen=True)
class FigureSection:
    """A titled block of figures laid out `columns` per row."""

    key: str
    title: str
    intro: str
    figures: tuple[Figure, ...]
    columns: int = 1


@dataclass(frozen=True)
class Plots:
    """Every figure section, plus why some candidates or charts are not shown."""

    sections: tuple[FigureSection, ...]
    omitted: tuple[str, ...]


def group_colours(data: ReportData) -> dict[str, str]:
    """Group -> colour, stable across every chart: grey baseline, candidates in plan order."""
    colours: dict[str, str] = {}
    greys = (BASELINE_COLOUR, *_MORE_GREYS)
    bases = cands = 0
    for entry in data.manifest.groups:
        if entry.role == "baseline":
            colours[entry.name] = greys[bases % len(greys)]
            bases += 1
        else:
            colours[entry.name] = PALETTE[cands % len(PALETTE)]
            cands += 1
    return colours


def _slug(*parts: object) -> str:
    text = "-".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text).lower()


def _interval(e: ScenarioEvidence) -> tuple[float | None, float | None]:
    iv = e.decision.confidence.interval
    if iv is not None:
        return iv.low, iv.high
    if e.stats is not None:
        return e.stats.throughput_speedup.low, e.stats.throughput_speedup.high
    return None, None


def _level(data: ReportData) -> str:
    return f"{data.evidence.policy.bootstrap.level:.0%}" if data.evidence else "95%"


def _speedup_refs(data: ReportData) -> list[RefLine]:
    refs = [RefLine(1.0, "no change (1.0x)", "#555555")]
    if data.evidence is not None:
        t = data.evidence.policy.thresholds.min_throughput_speedup
        refs.append(RefLine(t, f"accept threshold ({t:.2f}x)", _THRESHOLD_COLOUR, "3 3"))
    return refs


def _speedup_section(data: ReportData, colours: dict[str, str], omitted: list[str]) -> FigureSection | None:
    entries = [e for e in data.entries() if e.evidence.throughput_speedup is not None]
    for name in dict.fromkeys(e.candidate for e in data.entries()):
        if not any(e.candidate == name for e in entries):
            sample = next(e for e in data.entries() if e.candidate == name)
            g = data.group(name)
            why = f"{g.run_status.value} ({g.reason})" if g is not None else "no group result"
            if g is not None and g.run_status.value == "completed":
                detail = sample.decision.detail or sample.decision.reason
                why = f"evidence {sample.evidence.evidence_status.value}: {detail}"
            omitted.append(f"{name}: not plotted, {why}")
    if not entries:
        return None
    scenarios = list(dict.fromkeys(e.scenario for e in entries))
    series = []
    for name in dict.fromkeys(e.candidate for e in entries):
        by_scen = {e.scenario: e for e in entries if e.candidate == name}
        values, lows, highs = [], [], []
        for s in scenarios:
            e = by_scen.get(s)
            low, high = _interval(e) if e else (None, None)
            values.append(e.evidence.throughput_speedup if e else None)
            lows.append(low)
            highs.append(high)
        series.append(BarSeries(name, colours.get(name, PALETTE[0]), tuple(values), tuple(lows), tuple(highs)))
    svg = bar_chart(
        title="Throughput speedup vs the target-only baseline",
        x_label="scenario (workload-c<concurrency>)",
        y_label="speedup (x baseline output tok/s)",
        categories=scenarios,
        series=series,
        ref_lines=_speedup_refs(data),
        interval_label=f"{_level(data)} interval",
        size=(1100, 400),
    )
    intro = (
        "Output-throughput ratio candidate / baseline on the same requests; whiskers are the paired bootstrap "
        "interval. Accepting needs the whole interval at or above the threshold (and the latency, memory and parity "
        "checks)."
    )
    return FigureSection("plot-speedup", "Speedup", intro, (Figure("fig-speedup", svg),))


_LATENCY = (
    ("ttft", "TTFT", "time to first token (ms)"),
    ("tpot", "TPOT", "time per output token after the first (ms)"),
    ("e2e", "E2E", "end-to-end request latency (ms)"),
)


def _latency_section(
    data: ReportData, scenario: str, groups: Sequence[GroupResult], colours: dict[str, str]
) -> FigureSection | None:
    present = [g for g in groups if (g.group, scenario) in data.latencies]
    if not present:
        return None
    figures = []
    for key, short, label in _LATENCY:
        boxes = [
            BoxSeries(
                g.group,
                colours.get(g.group, BASELINE_COLOUR),
                getattr(data.latencies[(g.group, scenario)], f"{key}_ms"),
            )
            for g in present
        ]
        svg = box_chart(title=f"{short} · {scenario}", x_label="group", y_label=label, boxes=boxes)
        counts = ", ".join(f"{b.label} n={len(b.values)}" for b in boxes)
        figures.append(Figure(_slug("fig", key, scenario), svg, counts))
    intro = "Per-request latencies of the measured requests (warm-up and failed requests excluded)."
    return FigureSection(
        _slug("plot-latency", scenario), f"Latency distributions · {scenario}", intro, tuple(figures), 3
    )


def _acceptance_figure(
    data: ReportData, scenario: str, groups: Sequence[GroupResult], colours: dict[str, str]
) -> Figure | None:
    series = []
    positions = 0
    for g in groups:
        run = next((s for s in g.scenarios if s.scenario == scenario), None)
        tel = run.telemetry if run is not None else None
        if g.role != "candidate" or tel is None or not tel.per_position_rates:
            continue
        positions = max(positions, len(tel.per_position_rates))
        name = f"{g.group} (mean accepted length {tel.mean_acceptance_length or 0:.2f})"
        series.append(BarSeries(name, colours.get(g.group, PALETTE[0]), tuple(tel.per_position_rates)))
    if not series:
        return None
    svg = bar_chart(
        title=f"Acceptance by draft position · {scenario}",
        x_label="draft position (1 = first proposed token)",
        y_label="accepted at position / drafts (fraction)",
        categories=[str(i + 1) for i in range(positions)],
        series=series,
        size=(560, 360),
    )
    return Figure(_slug("fig-acceptance", scenario), svg, "From the engine's per-position acceptance counters.")


def _prediction_section(data: ReportData, colours: dict[str, str], omitted: list[str]) -> FigureSection | None:
    points = []
    model = ""
    for e in data.entries():
        p = e.prediction
        if p is None or p.predicted_decode_speedup is None or p.measured_decode_speedup is None:
            continue
        model = p.model
        colour = colours.get(e.candidate, PALETTE[0])
        points.append(
            ScatterPoint(p.predicted_decode_speedup, p.measured_decode_speedup, e.candidate, colour, e.scenario)
        )
    if not points:
        if data.entries():
            omitted.append("predicted vs measured: no entry has both a prediction and a measured decode speedup")
        return None
    svg = scatter_chart(
        title="Predicted vs measured decode speedup",
        x_label="predicted decode speedup (x)",
        y_label="measured decode speedup (x)",
        points=points,
        diagonal_label="prediction = measurement",
    )
    intro = f"Prediction from acceptance and the measured cost of one speculative step ({model})."
    return FigureSection("plot-prediction", "Predicted vs measured", intro, (Figure("fig-prediction", svg),))


def proposal_length_of(group: GroupResult | None) -> int | None:
    """The group's proposal length (`num_speculative_tokens` of its speculative config), if it launched."""
    return group.proposal_length if group is not None else None


def _proposal_x(data: ReportData, entry: ScenarioEvidence) -> float | None:
    k = proposal_length_of(data.group(entry.candidate))
    return None if k is None else float(k)


def _length_series(data: ReportData) -> dict[str, str]:
    """Candidate -> the length sweep it belongs to (its plan entry and the other swept options), from the
    evidence's length choices: the candidates of one series differ only in their proposal length."""
    sweeps = data.evidence.sweeps if data.evidence is not None else None
    out: dict[str, str] = {}
    for s in sweeps.lengths if sweeps is not None else ():
        fixed = ", ".join(f"{k}={v}" for k, v in sorted(s.fixed.items()))
        for row in s.choice.per_length:
            out[row.candidate] = f"{s.sweep} ({fixed})" if fixed else s.sweep
    return out


def _sweep_section(
    data: ReportData,
    colours: dict[str, str],
    *,
    key: str,
    title: str,
    x_label: str,
    chart_of: Callable[[ScenarioEvidence], str | None],
    x_of: Callable[[ScenarioEvidence], float | None],
    series_of: Callable[[ScenarioEvidence], str | None],
) -> FigureSection | None:
    """Speedup against `x_of`, one chart per `chart_of` value that has some series with >= 2 distinct x."""
    charts: dict[str, dict[str, list[tuple[float, ScenarioEvidence]]]] = {}
    for e in data.entries():
        chart, x, name = chart_of(e), x_of(e), series_of(e)
        if chart is None or x is None or name is None or e.evidence.throughput_speedup is None:
            continue
        charts.setdefault(chart, {}).setdefault(name, []).append((x, e))
    figures = []
    for chart, by_series in charts.items():
        swept = {n: pts for n, pts in by_series.items() if len({x for x, _ in pts}) >= 2}
        if not swept:
            continue
        series = []
        for name, pts in swept.items():
            line = []
            for x, e in sorted(pts, key=lambda p: p[0]):
                low, high = _interval(e)
                line.append(LinePoint(x, e.evidence.throughput_speedup or 0.0, low, high))
            series.append(LineSeries(name, colours.get(pts[0][1].candidate, PALETTE[0]), tuple(line)))
        svg = line_chart(
            title=f"{title} · {chart}",
            x_label=x_label,
            y_label="speedup (x baseline output tok/s)",
            series=series,
            ref_lines=_speedup_refs(data),
            interval_label=f"{_level(data)} interval",
        )
        figures.append(Figure(_slug("fig", key, chart), svg))
    if not figures:
        return None
    return FigureSection(
        f"plot-{key}", title, "Speedup with its interval at each level of the sweep.", tuple(figures), 2
    )


def build_plots(data: ReportData) -> Plots:
    """Every figure the results support, in reading order."""
    colours = group_colours(data)
    omitted: list[str] = []
    sections: list[FigureSection | None] = [_speedup_section(data, colours, omitted)]
    ran = [g for g in data.groups if g.scenarios]
    acceptance = []
    for scenario in data.scenarios:
        sections.append(_latency_section(data, scenario, ran, colours))
        fig = _acceptance_figure(data, scenario, ran, colours)
        if fig is not None:
            acceptance.append(fig)
    if acceptance:
        intro = "Share of drafts whose token at each position was accepted (every earlier position accepted too)."
        sections.append(FigureSection("plot-acceptance", "Acceptance by draft position", intro, tuple(acceptance), 2))
    sections.append(_prediction_section(data, colours, omitted))
    sections.append(
        _sweep_section(
            data,
            colours,
            key="concurrency",
            title="Speedup vs concurrency",
            x_label="concurrency (requests in flight)",
            chart_of=lambda e: fmt_workload(e.workload, e.temperature),
            x_of=lambda e: float(e.concurrency),
            series_of=lambda e: e.candidate,
        )
    )
    sections.append(
        _sweep_section(
            data,
            colours,
            key="temperature",
            title="Speedup vs temperature",
            x_label="sampling temperature",
            chart_of=lambda e: scenario_name(e.workload, e.concurrency),
            x_of=lambda e: e.temperature,
            series_of=lambda e: e.candidate,
        )
    )
    series = _length_series(data)
    sections.append(
        _sweep_section(
            data,
            colours,
            key="proposal-length",
            title="Speedup vs proposal length",
            x_label="proposal length (num_speculative_tokens)",
            chart_of=lambda e: e.scenario,
            x_of=lambda e: _proposal_x(data, e),
            series_of=lambda e: series.get(e.candidate),
        )
    )
    return Plots(tuple(s for s in sections if s is not None), tuple(omitted))
