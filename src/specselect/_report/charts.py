"""The report's chart types, drawn on `svg.Canvas`: bars with error bars, box + strip plots, scatter and lines.

Each function takes plain values (no result documents) and returns one `<svg>` string with a title, axis labels
and a legend; `size` is its (width, height) in px. Missing values are simply not drawn; callers say elsewhere
why something is absent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specselect._report.svg import Canvas, LegendEntry, esc, fmt_num, text_width

__all__ = [
    "BarSeries",
    "BoxSeries",
    "LinePoint",
    "LineSeries",
    "RefLine",
    "ScatterPoint",
    "bar_chart",
    "box_chart",
    "box_stats",
    "line_chart",
    "scatter_chart",
]

_WHISKER = "#4b5563"


@dataclass(frozen=True)
class RefLine:
    """A horizontal reference line (e.g. speedup 1.0, the acceptance threshold)."""

    value: float
    label: str
    colour: str = "#555555"
    dash: str = "6 4"


@dataclass(frozen=True)
class BarSeries:
    """One coloured series of a grouped bar chart: a value per category, optionally with an interval."""

    name: str
    colour: str
    values: tuple[float | None, ...]
    lows: tuple[float | None, ...] = ()
    highs: tuple[float | None, ...] = ()


@dataclass(frozen=True)
class BoxSeries:
    """The raw observations of one box (one group in one scenario)."""

    label: str
    colour: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class ScatterPoint:
    """One point; `series` names its legend entry, `label` is written next to it."""

    x: float
    y: float
    series: str
    colour: str
    label: str = ""


@dataclass(frozen=True)
class LinePoint:
    """One point of a line, optionally with an interval."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class LineSeries:
    """One line over categorical x values."""

    name: str
    colour: str
    points: tuple[LinePoint, ...]


def _finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _y_top(values: Sequence[float], refs: Sequence[RefLine]) -> float:
    top = max([*values, *(r.value for r in refs), 0.0])
    return top * 1.08 if top > 0 else 1.0


def _at(values: tuple[float | None, ...], index: int) -> float | None:
    return values[index] if index < len(values) else None


def _errorbar(canvas: Canvas, x: float, low: float, high: float, *, half: float, colour: str = _WHISKER) -> str:
    y0, y1 = canvas.y(low), canvas.y(high)
    return (
        f'<path d="M{x:.1f} {y0:.1f}V{y1:.1f}M{x - half:.1f} {y0:.1f}H{x + half:.1f}M{x - half:.1f} {y1:.1f}'
        f'H{x + half:.1f}" stroke="{esc(colour)}" stroke-width="1.6" fill="none"/>'
    )


def _ref_legend(refs: Sequence[RefLine]) -> list[LegendEntry]:
    return [LegendEntry(r.label, r.colour, "dash") for r in refs]


def _draw_refs(canvas: Canvas, refs: Sequence[RefLine]) -> None:
    """Reference lines; a label that would collide with the next higher line's label goes below its own line."""
    ordered = sorted(refs, key=lambda r: r.value)
    for i, ref in enumerate(ordered):
        crowded = i + 1 < len(ordered) and abs(canvas.y(ordered[i + 1].value) - canvas.y(ref.value)) < 16
        canvas.hline(ref.value, ref.colour, ref.dash, ref.label, label_below=crowded)


def bar_chart(
    *,
    title: str,
    x_label: str,
    y_label: str,
    categories: Sequence[str],
    series: Sequence[BarSeries],
    ref_lines: Sequence[RefLine] = (),
    interval_label: str | None = None,
    size: tuple[int, int] = (640, 360),
) -> str:
    """Grouped vertical bars from 0, one group per category, with optional error bars and reference lines."""
    values = [v for s in series for v in _finite([*s.values, *s.highs])]
    legend = [LegendEntry(s.name, s.colour) for s in series]
    if interval_label and any(_finite(s.highs) for s in series):
        legend.append(LegendEntry(interval_label, _WHISKER, "whisker"))
    canvas = Canvas(
        title=title,
        x_label=x_label,
        y_label=y_label,
        y_range=(0.0, _y_top(values, ref_lines)),
        legend=[*legend, *_ref_legend(ref_lines)],
        categories=categories,
        size=size,
    )
    slot = canvas.band * 0.8 / max(len(series), 1)
    bar_w = min(slot * 0.85, 56.0)
    for c, centre in enumerate(canvas.centres()):
        start = centre - slot * len(series) / 2
        for s_index, s in enumerate(series):
            value = _at(s.values, c)
            x = start + slot * (s_index + 0.5)
            if value is None or not math.isfinite(value):
                continue
            low, high = _at(s.lows, c), _at(s.highs, c)
            tip = f"{s.name} · {categories[c]}: {fmt_num(value)}"
            if low is not None and high is not None:
                tip += f" [{fmt_num(low)}, {fmt_num(high)}]"
            y = canvas.y(max(value, 0.0))
            canvas.add(
                f'<rect x="{x - bar_w / 2:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{canvas.bottom - y:.1f}" '
                f'fill="{esc(s.colour)}" fill-opacity="0.85"><title>{esc(tip)}</title></rect>'
            )
            top = y
            if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
                canvas.add(_errorbar(canvas, x, low, high, half=min(bar_w / 4, 8.0)))
                top = min(top, canvas.y(high))
            if bar_w >= 26:
                canvas.add(
                    f'<text x="{x:.1f}" y="{top - 5:.1f}" text-anchor="middle" font-size="11" fill="#1f2328">'
                    f"{esc(fmt_num(value))}</text>"
                )
    _draw_refs(canvas, ref_lines)
    return canvas.render()


def box_stats(values: Sequence[float]) -> tuple[float, float, float, float, float]:
    """(p5, p25, p50, p75, p95) with linear interpolation; ValueError for no values."""
    if not values:
        raise ValueError("box_stats needs at least one value")
    p5, p25, p50, p75, p95 = np.percentile(np.asarray(values, dtype=float), [5, 25, 50, 75, 95])
    return float(p5), float(p25), float(p50), float(p75), float(p95)


def box_chart(
    *,
    title: str,
    x_label: str,
    y_label: str,
    boxes: Sequence[BoxSeries],
    size: tuple[int, int] = (420, 340),
) -> str:
    """One box per series (p25-p75, median line, p5-p95 whiskers) with every observation as a dot."""
    values = [v for b in boxes for v in _finite(b.values)]
    legend = [
        LegendEntry("p25–p75", "#9ca3af", "box"),
        LegendEntry("median", "#1f2328", "line"),
        LegendEntry("p5–p95", _WHISKER, "whisker"),
        LegendEntry("requests", "#6b7280", "dot"),
    ]
    canvas = Canvas(
        title=title,
        x_label=x_label,
        y_label=y_label,
        y_range=(0.0, _y_top(values, ())),
        legend=legend,
        categories=[b.label for b in boxes],
        size=size,
    )
    box_w = min(canvas.band * 0.5, 60.0)
    for box, x in zip(boxes, canvas.centres(), strict=True):
        data = _finite(box.values)
        if not data:
            canvas.add(
                f'<text x="{x:.1f}" y="{canvas.bottom - 8:.1f}" text-anchor="middle" font-size="11" '
                f'fill="#57606a">no data</text>'
            )
            continue
        p5, p25, p50, p75, p95 = box_stats(data)
        colour = esc(box.colour)
        tip = esc(f"{box.label}: n={len(data)}, median {fmt_num(p50)}, p95 {fmt_num(p95)}")
        canvas.add(_errorbar(canvas, x, p5, p25, half=box_w / 4) + _errorbar(canvas, x, p75, p95, half=box_w / 4))
        canvas.add(
            f'<rect x="{x - box_w / 2:.1f}" y="{canvas.y(p75):.1f}" width="{box_w:.1f}" '
            f'height="{max(canvas.y(p25) - canvas.y(p75), 1.0):.1f}" fill="{colour}" fill-opacity="0.25" '
            f'stroke="{colour}" stroke-width="1.5"><title>{tip}</title></rect>'
        )
        canvas.add(
            f'<line x1="{x - box_w / 2:.1f}" x2="{x + box_w / 2:.1f}" y1="{canvas.y(p50):.1f}" '
            f'y2="{canvas.y(p50):.1f}" stroke="#1f2328" stroke-width="2.5"/>'
        )
        dots = []
        for i, v in enumerate(data):
            # Golden-ratio jitter: deterministic, evenly spread, no two neighbours on top of each other.
            dx = ((i * 0.6180339887) % 1.0 - 0.5) * box_w * 0.8
            dots.append(f'<circle cx="{x + dx:.1f}" cy="{canvas.y(v):.1f}" r="2.6"/>')
        canvas.add(f'<g fill="{colour}" fill-opacity="0.75">{"".join(dots)}</g>')
    return canvas.render()


def _free_row(placed: list[tuple[float, float, float]], x0: float, x1: float, y: float) -> float:
    """A baseline near `y` where a label spanning x0..x1 overlaps no label placed so far (then records it)."""
    for step in (0, 13, -13, 26, -26, 39, -39):
        ty = y + step
        if all(x1 < a or x0 > b or abs(ty - by) >= 12 for a, b, by in placed):
            placed.append((x0, x1, ty))
            return ty
    placed.append((x0, x1, y))
    return y


def scatter_chart(
    *,
    title: str,
    x_label: str,
    y_label: str,
    points: Sequence[ScatterPoint],
    diagonal_label: str | None = None,
    size: tuple[int, int] = (560, 400),
) -> str:
    """Points on linear axes from 0 (both axes share one range when a y = x diagonal is drawn)."""
    xs = _finite([p.x for p in points])
    ys = _finite([p.y for p in points])
    x_top, y_top = _y_top(xs, ()), _y_top(ys, ())
    if diagonal_label is not None:
        x_top = y_top = max(x_top, y_top)
    legend: list[LegendEntry] = []
    for p in points:
        if all(e.label != p.series for e in legend):
            legend.append(LegendEntry(p.series, p.colour, "dot"))
    if diagonal_label is not None:
        legend.append(LegendEntry(diagonal_label, "#555555", "dash"))
    canvas = Canvas(
        title=title,
        x_label=x_label,
        y_label=y_label,
        y_range=(0.0, y_top),
        x_range=(0.0, x_top),
        legend=legend,
        size=size,
    )
    if diagonal_label is not None:
        end = min(canvas.x_ticks[-1], canvas.y_ticks[-1])
        canvas.add(
            f'<line x1="{canvas.x(0):.1f}" y1="{canvas.y(0):.1f}" x2="{canvas.x(end):.1f}" y2="{canvas.y(end):.1f}" '
            f'stroke="#555555" stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
    placed: list[tuple[float, float, float]] = []
    for p in points:
        if not (math.isfinite(p.x) and math.isfinite(p.y)):
            continue
        cx, cy = canvas.x(p.x), canvas.y(p.y)
        tip = esc(f"{p.series} {p.label}: ({fmt_num(p.x)}, {fmt_num(p.y)})")
        canvas.add(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5.5" fill="{esc(p.colour)}" stroke="#ffffff" '
            f'stroke-width="1"><title>{tip}</title></circle>'
        )
        if p.label:
            anchor, dx = ("end", -8) if cx > canvas.right - 120 else ("start", 8)
            x0 = cx + dx - (text_width(p.label, 11) if anchor == "end" else 0)
            ty = _free_row(placed, x0, x0 + text_width(p.label, 11), cy + 4)
            canvas.add(
                f'<text x="{cx + dx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" font-size="11" '
                f'fill="#1f2328">{esc(p.label)}</text>'
            )
    return canvas.render()


def line_chart(
    *,
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[LineSeries],
    ref_lines: Sequence[RefLine] = (),
    interval_label: str | None = None,
    size: tuple[int, int] = (560, 360),
) -> str:
    """Lines over the sorted distinct x values (evenly spaced, labelled by value), with optional intervals."""
    xs = sorted({p.x for s in series for p in s.points})
    values = [v for s in series for p in s.points for v in _finite([p.y, p.high])]
    legend = [LegendEntry(s.name, s.colour, "line") for s in series]
    if interval_label and any(p.high is not None for s in series for p in s.points):
        legend.append(LegendEntry(interval_label, _WHISKER, "whisker"))
    canvas = Canvas(
        title=title,
        x_label=x_label,
        y_label=y_label,
        y_range=(0.0, _y_top(values, ref_lines)),
        legend=[*legend, *_ref_legend(ref_lines)],
        categories=[fmt_num(x) for x in xs],
        size=size,
    )
    where = dict(zip(xs, canvas.centres(), strict=True))
    _draw_refs(canvas, ref_lines)
    for s_index, s in enumerate(series):
        # A small sideways shift per series keeps overlapping intervals readable.
        shift = (s_index - (len(series) - 1) / 2) * min(8.0, canvas.band * 0.08)
        pts = sorted((p for p in s.points if math.isfinite(p.y)), key=lambda p: p.x)
        coords = [(where[p.x] + shift, canvas.y(p.y)) for p in pts]
        colour = esc(s.colour)
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            canvas.add(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.2"/>')
        for p, (x, y) in zip(pts, coords, strict=True):
            if p.low is not None and p.high is not None:
                canvas.add(_errorbar(canvas, x, p.low, p.high, half=5.0, colour=s.colour))
            tip = esc(f"{s.name} @ {fmt_num(p.x)}: {fmt_num(p.y)}")
            canvas.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{colour}"><title>{tip}</title></circle>')
    return canvas.render()
