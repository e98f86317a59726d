"""Hand-written SVG for the report: scales, 1-2-5 ticks, and a chart canvas with title, legend, axes and labels.

Charts are standalone `<svg>` strings inlined in the page: no JavaScript, no external resources, every string
escaped. The canvas knows nothing about speculative decoding; `charts.py` draws the marks on it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BASELINE_COLOUR",
    "FONT",
    "PALETTE",
    "Canvas",
    "LegendEntry",
    "LinearScale",
    "esc",
    "fmt_num",
    "nice_ticks",
    "text_width",
]

PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C6D31", "#332288")
"""Colour-blind-safe colours (Okabe-Ito, then two darker extras), handed to candidates in plan order."""
BASELINE_COLOUR = "#7A7A7A"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', 'Liberation Sans', sans-serif"
_INK = "#1f2328"
_MUTED = "#57606a"
_GRID = "#e4e7eb"

LegendKind = Literal["box", "line", "dash", "dot", "whisker"]


def esc(value: object) -> str:
    """HTML/SVG-escape any value (quotes included): every label may be user input."""
    return html.escape(str(value), quote=True)


def fmt_num(value: float) -> str:
    """A compact tick/value label: `0`, `0.005`, `0.25`, `1.5`, `12.5`, `340`, `12,000`."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size < 1:
        return f"{value:.3g}"
    text = f"{value:.2f}" if size < 10 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".")


def text_width(text: str, size: float = 12.0) -> float:
    """Rough rendered width of `text` in px (sans-serif averages ~0.58 em per character)."""
    return 0.58 * size * len(text)


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Ticks on a 1-2-2.5-5 grid whose first tick is <= lo and last is >= hi (about `target` intervals)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"nice_ticks needs finite bounds, got {lo!r}..{hi!r}")
    lo, hi = min(lo, hi), max(lo, hi)
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(target, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * magnitude >= raw * (1 - 1e-9))
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    count = round((end - start) / step)
    return [round(start + i * step, 10) for i in range(count + 1)]


@dataclass(frozen=True)
class LinearScale:
    """Maps the domain [d0, d1] linearly onto the pixel range [r0, r1]."""

    d0: float
    d1: float
    r0: float
    r1: float

    def __call__(self, value: float) -> float:
        if self.d1 == self.d0:
            return (self.r0 + self.r1) / 2
        return self.r0 + (value - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)


@dataclass(frozen=True)
class LegendEntry:
    """One legend item: a swatch drawn as `kind` in `colour`, then the label."""

    label: str
    colour: str
    kind: LegendKind = "box"


def _f(value: float) -> str:
    return f"{value:.1f}"


class Canvas:
    """One chart: title, wrapped legend rows, a plot area with a linear y axis and a categorical or linear x axis.

    Create it, draw marks with the scales (`y`, and `x` or `centres`), then `render()`. `size` is (width, height)
    in px.
    """

    def __init__(
        self,
        *,
        title: str,
        x_label: str,
        y_label: str,
        y_range: tuple[float, float],
        legend: Sequence[LegendEntry] = (),
        categories: Sequence[str] = (),
        x_range: tuple[float, float] | None = None,
        size: tuple[int, int] = (640, 360),
    ) -> None:
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.width, self.height = size
        self.legend = tuple(legend)
        self.categories = tuple(categories)
        self.parts: list[str] = []
        self.left, self.right = 70.0, self.width - 18.0
        legend_rows = self._legend_rows()
        self.top = 40.0 + 20.0 * len(legend_rows) + (8.0 if legend_rows else 0.0)
        self._rotate = False
        if self.categories:
            band = (self.right - self.left) / len(self.categories)
            widest = max(text_width(c) for c in self.categories)
            self._rotate = widest > band * 0.92
        label_room = 14.0 + (min(max(text_width(c) for c in self.categories), 170.0) * 0.5 if self._rotate else 4.0)
        self.bottom = self.height - 28.0 - label_room
        self.y_ticks = nice_ticks(*y_range)
        self.y = LinearScale(self.y_ticks[0], self.y_ticks[-1], self.bottom, self.top)
        self.x_ticks = nice_ticks(*x_range) if x_range is not None else []
        self.x = LinearScale(
            self.x_ticks[0] if self.x_ticks else 0.0, self.x_ticks[-1] if self.x_ticks else 1.0, self.left, self.right
        )

    @property
    def band(self) -> float:
        """Width of one category band in px."""
        return (self.right - self.left) / max(len(self.categories), 1)

    def centres(self) -> list[float]:
        """The x centre of each category band."""
        return [self.left + self.band * (i + 0.5) for i in range(len(self.categories))]

    def add(self, fragment: str) -> None:
        """Append an SVG fragment (already escaped) to the plot."""
        self.parts.append(fragment)

    def hline(self, value: float, colour: str, dash: str, label: str, *, label_below: bool = False) -> None:
        """A horizontal reference line across the plot with its label at the right end (above, or below)."""
        y = self.y(value)
        self.add(
            f'<line x1="{_f(self.left)}" x2="{_f(self.right)}" y1="{_f(y)}" y2="{_f(y)}" stroke="{esc(colour)}" '
            f'stroke-width="1.5" stroke-dasharray="{esc(dash)}"><title>{esc(label)}</title></line>'
        )
        label_y = y + 13 if label_below else y - 4
        self.add(
            f'<text x="{_f(self.right - 4)}" y="{_f(label_y)}" text-anchor="end" font-size="11" '
            f'fill="{esc(colour)}">{esc(label)}</text>'
        )

    def _legend_rows(self) -> list[list[tuple[LegendEntry, float]]]:
        rows: list[list[tuple[LegendEntry, float]]] = []
        x = self.left
        for entry in self.legend:
            item = 24.0 + text_width(entry.label) + 18.0
            if not rows or (x + item > self.right and rows[-1]):
                rows.append([])
                x = self.left
            rows[-1].append((entry, x))
            x += item
        return rows

    def _swatch(self, entry: LegendEntry, x: float, y: float) -> str:
        colour = esc(entry.colour)
        match entry.kind:
            case "box":
                return f'<rect x="{_f(x)}" y="{_f(y - 6)}" width="16" height="12" rx="2" fill="{colour}"/>'
            case "dot":
                return f'<circle cx="{_f(x + 8)}" cy="{_f(y)}" r="4.5" fill="{colour}"/>'
            case "whisker":
                return (
                    f'<path d="M{_f(x + 8)} {_f(y - 7)}V{_f(y + 7)}M{_f(x + 4)} {_f(y - 7)}H{_f(x + 12)}'
                    f'M{_f(x + 4)} {_f(y + 7)}H{_f(x + 12)}" stroke="{colour}" stroke-width="1.5" fill="none"/>'
                )
        dash = ' stroke-dasharray="5 3"' if entry.kind in ("dash",) else ""
        return (
            f'<line x1="{_f(x)}" x2="{_f(x + 16)}" y1="{_f(y)}" y2="{_f(y)}" stroke="{colour}" '
            f'stroke-width="2.5"{dash}/>'
        )

    def _frame(self) -> list[str]:
        out: list[str] = [
            f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="#ffffff"/>',
            f'<text x="{_f(self.left - 56)}" y="22" font-size="15" font-weight="600" fill="{_INK}">'
            f"{esc(self.title)}</text>",
        ]
        for r, row in enumerate(self._legend_rows()):
            y = 42.0 + 20.0 * r
            for entry, x in row:
                out.append(self._swatch(entry, x, y))
                out.append(
                    f'<text x="{_f(x + 22)}" y="{_f(y + 4)}" font-size="12" fill="{_INK}">{esc(entry.label)}</text>'
                )
        for tick in self.y_ticks:
            y = self.y(tick)
            out.append(f'<line x1="{_f(self.left)}" x2="{_f(self.right)}" y1="{_f(y)}" y2="{_f(y)}" stroke="{_GRID}"/>')
            out.append(
                f'<text x="{_f(self.left - 6)}" y="{_f(y + 4)}" text-anchor="end" font-size="11" fill="{_MUTED}">'
                f"{esc(fmt_num(tick))}</text>"
            )
        out.append(self._x_axis())
        mid_y = (self.top + self.bottom) / 2
        out.append(
            f'<text transform="translate({_f(self.left - 52)} {_f(mid_y)}) rotate(-90)" text-anchor="middle" '
            f'font-size="12" fill="{_INK}">{esc(self.y_label)}</text>'
        )
        out.append(
            f'<text x="{_f((self.left + self.right) / 2)}" y="{_f(self.height - 8)}" text-anchor="middle" '
            f'font-size="12" fill="{_INK}">{esc(self.x_label)}</text>'
        )
        return out

    def _x_axis(self) -> str:
        out = [
            f'<line x1="{_f(self.left)}" x2="{_f(self.right)}" y1="{_f(self.bottom)}" y2="{_f(self.bottom)}" '
            f'stroke="{_MUTED}"/>'
        ]
        label_y = self.bottom + 16
        if self.categories:
            for name, cx in zip(self.categories, self.centres(), strict=True):
                shown = name if len(name) <= 30 else name[:29] + "…"
                if self._rotate:
                    out.append(
                        f'<text transform="translate({_f(cx)} {_f(label_y - 4)}) rotate(-30)" text-anchor="end" '
                        f'font-size="11" fill="{_INK}"><title>{esc(name)}</title>{esc(shown)}</text>'
                    )
                else:
                    out.append(
                        f'<text x="{_f(cx)}" y="{_f(label_y)}" text-anchor="middle" font-size="11" '
                        f'fill="{_INK}"><title>{esc(name)}</title>{esc(shown)}</text>'
                    )
        for tick in self.x_ticks:
            x = self.x(tick)
            out.append(f'<line x1="{_f(x)}" x2="{_f(x)}" y1="{_f(self.top)}" y2="{_f(self.bottom)}" stroke="{_GRID}"/>')
            out.append(
                f'<text x="{_f(x)}" y="{_f(label_y)}" text-anchor="middle" font-size="11" fill="{_MUTED}">'
                f"{esc(fmt_num(tick))}</text>"
            )
        return "".join(out)

    def render(self) -> str:
        """The complete `<svg>` element (sized in px, scales down with the page through CSS)."""
        body = "".join([*self._frame(), *self.parts])
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" style="max-width: {self.width}px" role="img" '
            f'aria-label="{esc(self.title)}" '
            f'font-family="{esc(FONT)}"><title>{esc(self.title)}</title>{body}</svg>'
        )
