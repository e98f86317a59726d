"""The (launch x item) cells of two sides: the table the two-stage bootstrap reweights.

A cell holds one item's summed output tokens and summed request seconds (as THE speedup statistic counts them,
see `evidence.stats.rate_for_basis`) over that item's usable repeats in one launch. Items are crossed with
launches (every launch runs the same frozen workload), so an item is kept only when it has a usable request in
every launch of both sides: then each launch and each side sums over the same items, and the ratio compares
like with like.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from specselect.evidence.bootstrap import FloatArray
from specselect.evidence.samples import RequestSample

__all__ = ["CellTable", "RateFn", "SideCells", "build_cells"]

RateFn = Callable[[RequestSample], tuple[float, float] | None]
"""(tokens, seconds) of one sample, or None when it cannot be used."""


@dataclass(frozen=True)
class SideCells:
    """One side's cells: rows are its launches (in index order), columns the kept items."""

    launches: tuple[int, ...]
    tokens: FloatArray
    seconds: FloatArray
    n_requests: int
    """Usable requests summed into the kept cells."""

    def launch_rates(self) -> tuple[float, ...]:
        """Tokens per second of each launch over the kept items; () when one of them is not finite."""
        with np.errstate(all="ignore"):
            rates = self.tokens.sum(axis=1) / self.seconds.sum(axis=1)
        return tuple(float(r) for r in rates) if np.all(np.isfinite(rates)) else ()

    def pooled_rate(self) -> float | None:
        """Tokens per second over every launch and kept item; None without data or when not finite."""
        seconds = float(self.seconds.sum())
        with np.errstate(all="ignore"):
            rate = float(np.float64(self.tokens.sum()) / seconds) if seconds > 0 else math.nan
        return rate if math.isfinite(rate) and rate > 0 else None


@dataclass(frozen=True)
class CellTable:
    """Both sides' cells over the same items, and what was left out."""

    items: tuple[str, ...]
    baseline: SideCells
    candidate: SideCells
    dropped_items: tuple[str, ...]
    """Items seen somewhere but missing a usable request in some launch of some side."""
    n_unusable: int
    """Requests with missing, zero or non-finite tokens or time."""


_Cells = dict[tuple[int, str], list[float]]


def _collect(samples: Iterable[RequestSample], rate: RateFn) -> tuple[_Cells, int, set[str]]:
    cells: _Cells = {}
    unusable = 0
    seen: set[str] = set()
    for sample in samples:
        seen.add(sample.item_id)
        value = rate(sample)
        if value is None:
            unusable += 1
            continue
        cell = cells.setdefault((sample.launch, sample.item_id), [0.0, 0.0, 0.0])
        cell[0] += value[0]
        cell[1] += value[1]
        cell[2] += 1
    return cells, unusable, seen


def _side(cells: _Cells, launches: tuple[int, ...], items: tuple[str, ...]) -> SideCells:
    shape = (len(launches), len(items))
    tokens, seconds = np.zeros(shape), np.zeros(shape)
    n = 0
    for row, launch in enumerate(launches):
        for col, item in enumerate(items):
            tok, sec, count = cells[(launch, item)]
            tokens[row, col], seconds[row, col] = tok, sec
            n += int(count)
    return SideCells(launches=launches, tokens=tokens, seconds=seconds, n_requests=n)


def build_cells(baseline: Iterable[RequestSample], candidate: Iterable[RequestSample], rate: RateFn) -> CellTable:
    """Sum each side's usable requests into (launch, item) cells over the items complete on both sides."""
    base, base_bad, base_seen = _collect(baseline, rate)
    cand, cand_bad, cand_seen = _collect(candidate, rate)
    base_launches = tuple(sorted({launch for launch, _ in base}))
    cand_launches = tuple(sorted({launch for launch, _ in cand}))

    def complete(item: str) -> bool:
        return all((j, item) in base for j in base_launches) and all((j, item) in cand for j in cand_launches)

    seen = sorted(base_seen | cand_seen)
    items = tuple(item for item in seen if complete(item)) if base_launches and cand_launches else ()
    return CellTable(
        items=items,
        baseline=_side(base, base_launches if items else (), items),
        candidate=_side(cand, cand_launches if items else (), items),
        dropped_items=tuple(item for item in seen if item not in items),
        n_unusable=base_bad + cand_bad,
    )
