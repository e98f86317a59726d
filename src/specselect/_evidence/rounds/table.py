"""The (round x item) table of a pair: both sides' requests summed per round and per frozen item.

Round j of a pair is the baseline's launch j and the candidate's launch j, which the design ran next to each
other. A round enters when both launches measured the scenario and neither is excluded (`exclude`, e.g. a
launch a busy neighbour slowed); an item enters when it has a usable request in every entered round on both
sides, so every round compares the same frozen items.

Each metric is a ratio of totals per side, sum(numerator) / sum(denominator) over the items:
- throughput: output tokens / request seconds (THE speedup statistic, `evidence.stats.rate_for_basis`);
- TTFT mean: TTFT seconds / requests; E2E mean: request seconds / requests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from specselect._evidence.bootstrap import FloatArray
from specselect._evidence.samples import RequestSample
from specselect._evidence.stats import rate_for_basis
from specselect.records.evidence.rounds import Metric
from specselect.records.evidence.stats import ThroughputBasis

__all__ = ["METRICS", "RoundTable", "SideTable", "round_table"]

METRICS: tuple[Metric, ...] = ("throughput", "ttft_mean", "e2e_mean")

_FIELDS = ("tokens", "seconds", "ttft", "ttft_n", "e2e", "n", "rated")


@dataclass(frozen=True)
class SideTable:
    """One side's sums, rows the entered rounds, columns the kept items."""

    tokens: FloatArray
    seconds: FloatArray
    ttft: FloatArray
    ttft_n: FloatArray
    e2e: FloatArray
    n: FloatArray

    def parts(self, metric: Metric) -> tuple[FloatArray, FloatArray]:
        """(numerator, denominator) cells of `metric`."""
        if metric == "throughput":
            return self.tokens, self.seconds
        if metric == "ttft_mean":
            return self.ttft, self.ttft_n
        return self.e2e, self.n

    def values(self, metric: Metric) -> FloatArray:
        """The metric per round over the kept items (tokens/s, or mean seconds)."""
        num, den = self.parts(metric)
        with np.errstate(all="ignore"):
            return np.asarray(num.sum(axis=1) / den.sum(axis=1), dtype=np.float64)


@dataclass(frozen=True)
class RoundTable:
    """Both sides over the same rounds and items, and what was left out."""

    rounds: tuple[int, ...]
    items: tuple[str, ...]
    baseline: SideTable
    candidate: SideTable
    excluded_rounds: Mapping[int, str]
    """Rounds measured on both sides but left out, with why."""
    unpaired_rounds: tuple[int, ...]
    """Rounds only one side completed."""
    dropped_items: tuple[str, ...]
    """Items without a usable request in some entered round of some side."""

    def log_ratios(self, metric: Metric) -> FloatArray:
        """log(candidate / baseline) of `metric` in each round."""
        with np.errstate(all="ignore"):
            return np.asarray(np.log(self.candidate.values(metric) / self.baseline.values(metric)), dtype=np.float64)

    def item_influence(self, metric: Metric) -> FloatArray:
        """(rounds x items) linearised contribution of each item to each round's log ratio: the resampling
        variance of log(ratio of totals) over I items is var_i(z) / I (zero mean over items in every round)."""
        out = np.zeros((len(self.rounds), len(self.items)))
        for sign, side in ((1.0, self.candidate), (-1.0, self.baseline)):
            num, den = side.parts(metric)
            with np.errstate(all="ignore"):
                share = num / num.mean(axis=1, keepdims=True) - den / den.mean(axis=1, keepdims=True)
            out += sign * share
        return out


_Cells = dict[tuple[int, str], list[float]]


def _collect(samples: Iterable[RequestSample], basis: ThroughputBasis) -> _Cells:
    rate = rate_for_basis(basis)
    cells: _Cells = {}
    for sample in samples:
        value = rate(sample)
        if value is None:
            continue
        cell = cells.setdefault((sample.launch, sample.item_id), [0.0] * len(_FIELDS))
        cell[0] += value[0]
        cell[1] += value[1]
        cell[6] += 1
        if sample.ttft_s is not None and math.isfinite(sample.ttft_s) and sample.ttft_s > 0:
            cell[2] += sample.ttft_s
            cell[3] += 1
        if sample.e2e_s is not None and math.isfinite(sample.e2e_s) and sample.e2e_s > 0:
            cell[4] += sample.e2e_s
            cell[5] += 1
    return cells


def _side(cells: _Cells, rounds: tuple[int, ...], items: tuple[str, ...]) -> SideTable:
    arrays = np.zeros((len(_FIELDS), len(rounds), len(items)))
    for row, r in enumerate(rounds):
        for col, item in enumerate(items):
            arrays[:, row, col] = cells[(r, item)]
    return SideTable(*(np.asarray(a, dtype=np.float64) for a in arrays[:6]))


def _complete(cells: _Cells, r: int, item: str) -> bool:
    # An item counts when it has a usable rate: a missing TTFT leaves only the latency means without it.
    cell = cells.get((r, item))
    return cell is not None and cell[6] > 0


def round_table(
    baseline: Iterable[RequestSample],
    candidate: Iterable[RequestSample],
    *,
    basis: ThroughputBasis = "e2e",
    exclude: Mapping[int, str] | None = None,
) -> RoundTable:
    """The pair's table over the rounds both sides measured, `exclude` (round -> why) left out."""
    base, cand = _collect(baseline, basis), _collect(candidate, basis)
    base_rounds, cand_rounds = {r for r, _ in base}, {r for r, _ in cand}
    excluded = {r: why for r, why in (exclude or {}).items() if r in base_rounds & cand_rounds}
    rounds = tuple(sorted((base_rounds & cand_rounds) - set(excluded)))
    seen = sorted({item for _, item in (*base, *cand)})
    kept = tuple(i for i in seen if all(_complete(base, r, i) and _complete(cand, r, i) for r in rounds))
    kept = kept if rounds else ()
    return RoundTable(
        rounds=rounds if kept else (),
        items=kept,
        baseline=_side(base, rounds if kept else (), kept),
        candidate=_side(cand, rounds if kept else (), kept),
        excluded_rounds=dict(sorted(excluded.items())),
        unpaired_rounds=tuple(sorted(base_rounds ^ cand_rounds)),
        dropped_items=tuple(i for i in seen if i not in kept),
    )
