"""The report's SVG module: ticks, scales, escaping, and charts that are well-formed and carry titles, axis
labels with units, and legends."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specselect._report.charts import (
    BarSeries,
    BoxSeries,
    LinePoint,
    LineSeries,
    RefLine,
    ScatterPoint,
    bar_chart,
    box_chart,
    box_stats,
    line_chart,
    scatter_chart,
)
from specselect._report.svg import Canvas, LegendEntry, LinearScale, esc, fmt_num, nice_ticks

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script>"


def parse(svg: str) -> ET.Element:
    """The chart as XML (fails on anything malformed or unescaped)."""
    return ET.fromstring(svg)


def texts(root: ET.Element) -> list[str]:
    """The visible strings of every <text> (a <title> child is a tooltip, not shown)."""
    return [(el.text or "") + "".join(child.tail or "" for child in el) for el in root.iter(f"{NS}text")]


@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
)
def test_nice_ticks_cover_the_range_with_even_round_steps(lo: float, span: float) -> None:
    hi = lo + span
    ticks = nice_ticks(lo, hi)
    step = ticks[1] - ticks[0]
    # Within float noise of one step (1e-9 of it), the ticks enclose the range.
    assert ticks[0] <= lo + 1e-9 * step and ticks[-1] >= hi - 1e-9 * step
    assert 2 <= len(ticks) <= 12
    steps = {round(b - a, 6) for a, b in itertools.pairwise(ticks)}
    assert max(steps) - min(steps) <= 1e-6 * max(1.0, step)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 2.5, 5, 10))


def test_nice_ticks_examples_and_degenerate_ranges() -> None:
    assert nice_ticks(0, 4.3) == [0, 1, 2, 3, 4, 5]
    assert nice_ticks(0, 1.08) == [0, 0.25, 0.5, 0.75, 1, 1.25]
    assert nice_ticks(5, 5)[0] < 5 < nice_ticks(5, 5)[-1]
    assert nice_ticks(0, 0) == [-1, -0.5, 0, 0.5, 1]
    with pytest.raises(ValueError, match="finite"):
        nice_ticks(0, math.inf)


def test_number_formatting_scale_and_escaping() -> None:
    assert [fmt_num(v) for v in (0, 0.005, 0.25, 1.0, 1.5, 12.5, 340.2, 12000)] == [
        "0",
        "0.005",
        "0.25",
        "1",
        "1.5",
        "12.5",
        "340",
        "12,000",
    ]
    scale = LinearScale(0, 10, 300, 100)
    assert scale(0) == 300 and scale(10) == 100 and scale(5) == 200
    assert LinearScale(1, 1, 0, 10)(1) == 5
    assert esc(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert esc('a"b') == "a&quot;b"


def test_canvas_has_title_legend_axis_labels_and_escapes_everything() -> None:
    canvas = Canvas(
        title=f"title {HOSTILE}",
        x_label="x (ms)",
        y_label="y (tok/s)",
        y_range=(0, 10),
        legend=[LegendEntry(HOSTILE, "#000"), LegendEntry("line", "#111", "dash")],
        categories=["a", "b"],
    )
    svg = canvas.render()
    assert "<script" not in svg
    root = parse(svg)
    assert root.get("role") == "img" and root.find(f"{NS}title") is not None
    shown = texts(root)
    assert f"title {HOSTILE}" in shown and HOSTILE in shown
    assert "x (ms)" in shown and "y (tok/s)" in shown and "a" in shown and "b" in shown
    assert canvas.centres() == pytest.approx([canvas.left + canvas.band / 2, canvas.left + 1.5 * canvas.band])


def test_long_category_labels_are_rotated_and_shortened() -> None:
    long = ["a_very_long_candidate_name_that_goes_on_and_on_forever"] * 6
    svg = Canvas(title="t", x_label="x", y_label="y", y_range=(0, 1), categories=long, size=(400, 360)).render()
    assert "rotate(-30)" in svg and "…" in svg
    assert long[0] in svg  # the full name stays in the tooltip


def test_bar_chart_draws_bars_error_bars_reference_lines_and_skips_missing_values() -> None:
    svg = bar_chart(
        title="Speedup",
        x_label="scenario",
        y_label="speedup (x)",
        categories=["c1", "c2"],
        series=[
            BarSeries("g1", "#0072B2", (1.5, None), (1.3, None), (1.7, None)),
            BarSeries(HOSTILE, "#E69F00", (0.8, 2.0)),
        ],
        ref_lines=[RefLine(1.0, "no change (1.0x)"), RefLine(1.1, "threshold (1.10x)", "#B42318")],
        interval_label="95% interval",
    )
    root = parse(svg)
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(bars) == 3  # the missing value draws nothing
    shown = texts(root)
    for label in ("Speedup", "scenario", "speedup (x)", "g1", HOSTILE, "95% interval", "no change (1.0x)"):
        assert label in shown
    assert "g1 · c1: 1.5 [1.3, 1.7]" in "".join(t.text or "" for t in root.iter(f"{NS}title"))
    # The crowded pair of reference lines puts the lower label under its line.
    labels = {t.text: float(t.get("y", "0")) for t in root.iter(f"{NS}text") if t.text and "(1." in t.text}
    assert labels["no change (1.0x)"] > labels["threshold (1.10x)"]


def test_box_stats_and_box_chart() -> None:
    assert box_stats([1, 2, 3, 4, 5]) == pytest.approx((1.2, 2, 3, 4, 4.8))
    with pytest.raises(ValueError, match="at least one"):
        box_stats([])
    svg = box_chart(
        title="TTFT · c1",
        x_label="group",
        y_label="time to first token (ms)",
        boxes=[BoxSeries("base", "#777", (100.0, 120.0, 130.0)), BoxSeries("empty", "#0072B2", ())],
    )
    root = parse(svg)
    shown = texts(root)
    assert "no data" in shown and "time to first token (ms)" in shown and "median" in shown
    assert len(list(root.iter(f"{NS}circle"))) >= 3


def test_scatter_chart_shares_axes_with_a_diagonal_and_separates_labels() -> None:
    svg = scatter_chart(
        title="Predicted vs measured",
        x_label="predicted (x)",
        y_label="measured (x)",
        points=[ScatterPoint(1.0, 1.0, "g1", "#000", "c1"), ScatterPoint(1.0, 1.0, "g1", "#000", "c2")],
        diagonal_label="prediction = measurement",
    )
    root = parse(svg)
    labels = [t for t in root.iter(f"{NS}text") if t.text in ("c1", "c2")]
    assert len({t.get("y") for t in labels}) == 2  # overlapping labels are moved apart
    shown = texts(root)
    assert shown.count("g1") == 1 and "prediction = measurement" in shown


def test_line_chart_over_categorical_x() -> None:
    svg = line_chart(
        title="Speedup vs concurrency",
        x_label="concurrency (requests in flight)",
        y_label="speedup (x)",
        series=[LineSeries("g1", "#0072B2", (LinePoint(1, 1.5, 1.4, 1.6), LinePoint(4, 1.2, 1.1, 1.3)))],
        ref_lines=[RefLine(1.0, "no change")],
        interval_label="95% interval",
    )
    root = parse(svg)
    assert len(list(root.iter(f"{NS}polyline"))) == 1
    shown = texts(root)
    assert "1" in shown and "4" in shown and "concurrency (requests in flight)" in shown


@given(st.floats(min_value=1e-4, max_value=1e7, allow_nan=False))
def test_tick_labels_from_zero_are_distinct(top: float) -> None:
    # Every chart's value axis starts at 0 (speedups, latencies, fractions), so this is the case that matters.
    labels = [fmt_num(t) for t in nice_ticks(0.0, top)]
    assert len(set(labels)) == len(labels), labels
