"""The traffic mix: one speedup for the deployment's mix, its interval propagated from each scenario's own interval,
checked against a brute-force bootstrap over the per-scenario paired records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specselect._evidence.mix import CellSpeedup, MixCell, mix_ratio, mix_speedup
from specselect._evidence.rounds.estimate import pair_estimate
from specselect._evidence.samples import RequestPair, RequestSample
from specselect._evidence.stats import throughput_speedup
from specselect.records.evidence.mix import MixPolicy
from specselect.records.evidence.stats import BootstrapPolicy

TOKENS = 64
N_ITEMS = 24
REPEATS = 2


def _pairs(
    item_base_s: np.ndarray, item_gain: np.ndarray, noise: np.random.Generator, *, level_slowdown: float
) -> list[RequestPair]:
    """Paired requests of one scenario: each item has its own baseline time and gain, plus per-request noise."""
    out: list[RequestPair] = []
    for i in range(N_ITEMS):
        for r in range(REPEATS):
            base = item_base_s[i] * level_slowdown * math.exp(noise.normal(0, 0.03))
            cand = base / item_gain[i] * math.exp(noise.normal(0, 0.03))
            key = {"item_id": f"i{i:02d}", "repeat": r}
            out.append(
                RequestPair(
                    **key,
                    baseline=RequestSample(**key, completion_tokens=TOKENS, e2e_s=base),
                    candidate=RequestSample(**key, completion_tokens=TOKENS, e2e_s=cand),
                )
            )
    return out


def _scenarios(seed: int, levels: tuple[int, ...]) -> dict[tuple[str, int], list[RequestPair]]:
    """Two workloads; within one, every level sends the same items, so their gains are shared."""
    rng = np.random.default_rng(seed)
    out: dict[tuple[str, int], list[RequestPair]] = {}
    for workload, gain_centre in (("general", 1.05), ("repetition", 2.0)):
        item_base = rng.uniform(1.0, 3.0, N_ITEMS)
        item_gain = gain_centre * np.exp(rng.normal(0, 0.25, N_ITEMS))
        for level in levels:
            out[(workload, level)] = _pairs(item_base, item_gain, rng, level_slowdown=1.0 + 0.3 * (level - 1))
    return out


def _ratio_of_totals(pairs: list[RequestPair], weights: dict[str, float]) -> float:
    w = np.asarray([weights[p.item_id] for p in pairs])
    cand_tok = np.asarray([p.candidate.completion_tokens or 0 for p in pairs], dtype=float)
    cand_s = np.asarray([p.candidate.e2e_s or 0.0 for p in pairs])
    base_tok = np.asarray([p.baseline.completion_tokens or 0 for p in pairs], dtype=float)
    base_s = np.asarray([p.baseline.e2e_s or 0.0 for p in pairs])
    return float(((w @ cand_tok) / (w @ cand_s)) / ((w @ base_tok) / (w @ base_s)))


def _brute_force(
    scenarios: dict[tuple[str, int], list[RequestPair]], shares: dict[tuple[str, int], float], n: int, seed: int
) -> tuple[float, float]:
    """Resample the items of each workload (the same draw at every level), recompute every scenario's speedup
    from its records and the mix from those, with the time weights of the original records."""
    rng = np.random.default_rng(seed)
    a = {key: shares[key] * float(np.mean([p.baseline.e2e_s for p in pairs])) for key, pairs in scenarios.items()}
    items = sorted({p.item_id for pairs in scenarios.values() for p in pairs})
    draws = []
    for _ in range(n):
        weights = {
            workload: dict(zip(items, rng.multinomial(len(items), np.full(len(items), 1 / len(items))), strict=True))
            for workload in ("general", "repetition")
        }
        s = {key: _ratio_of_totals(pairs, weights[key[0]]) for key, pairs in scenarios.items()}
        draws.append(sum(a.values()) / sum(a[k] / s[k] for k in scenarios))
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def _cells(scenarios: dict[tuple[str, int], list[RequestPair]], shares: dict[tuple[str, int], float]) -> list[MixCell]:
    """Each scenario as the mix sees it: only its own interval (as the pipeline reports it), share and time."""
    cells = []
    for (workload, level), pairs in scenarios.items():
        est = throughput_speedup(pairs, BootstrapPolicy(n_resamples=4000, seed=3))
        assert est.point is not None
        cells.append(
            MixCell(
                workload=workload,
                concurrency=level,
                share=shares[(workload, level)],
                baseline_seconds=float(np.mean([p.baseline.e2e_s for p in pairs])),
                speedup=CellSpeedup.from_interval(est.point, est.low, est.high, est.level),
            )
        )
    return cells


def _log_width(low: float, high: float) -> float:
    return math.log(high) - math.log(low)


def test_the_mix_interval_matches_a_brute_force_bootstrap_over_the_records_of_independent_workloads() -> None:
    scenarios = _scenarios(seed=11, levels=(1,))
    shares = {("general", 1): 0.7, ("repetition", 1): 0.3}
    mix = mix_speedup(_cells(scenarios, shares), MixPolicy(seed=5))
    low, high = _brute_force(scenarios, shares, n=3000, seed=7)
    assert mix.low < mix.point < mix.high
    assert abs(math.log(mix.low) - math.log(low)) < 0.02 and abs(math.log(mix.high) - math.log(high)) < 0.02
    assert _log_width(mix.low, mix.high) == pytest.approx(_log_width(low, high), rel=0.15)


def test_levels_of_one_workload_share_items_so_the_mix_propagates_them_together() -> None:
    scenarios = _scenarios(seed=12, levels=(1, 2))
    shares = {("general", 1): 0.35, ("general", 2): 0.35, ("repetition", 1): 0.15, ("repetition", 2): 0.15}
    cells = _cells(scenarios, shares)
    together = mix_speedup(cells, MixPolicy(seed=5))
    low, high = _brute_force(scenarios, shares, n=3000, seed=7)
    # Fully correlated levels are the widest case: the brute force lies inside (up to Monte Carlo error) ...
    assert together.low <= low * 1.01 and together.high >= high * 0.99
    assert _log_width(together.low, together.high) < 1.3 * _log_width(low, high)
    # ... while treating every cell as independent would claim a narrower interval than the records support.
    apart = mix_speedup(
        [c.model_copy(update={"workload": f"{c.workload}-c{c.concurrency}"}) for c in cells], MixPolicy(seed=5)
    )
    assert _log_width(apart.low, apart.high) < 0.9 * _log_width(low, high)


def test_the_point_is_the_time_weighted_harmonic_mean_not_the_average_of_the_speedups() -> None:
    cells = [
        MixCell(
            workload="general", concurrency=1, share=0.5, baseline_seconds=2.0, speedup=CellSpeedup(point=1.0, log_se=0)
        ),
        MixCell(
            workload="repetition",
            concurrency=1,
            share=0.5,
            baseline_seconds=2.0,
            speedup=CellSpeedup(point=3.0, log_se=0),
        ),
    ]
    mix = mix_speedup(cells)
    # Half the requests at 1x and half at 3x: 2 + 2 seconds become 2 + 2/3, a 1.5x gain, not the mean 2.0x.
    assert mix.point == pytest.approx(1.5)
    assert (mix.low, mix.high) == pytest.approx((1.5, 1.5))
    assert [round(c.candidate_time_share, 3) for c in mix.cells] == [0.75, 0.25]


def test_a_cell_left_off_counts_at_exactly_the_baseline_speed() -> None:
    on = MixCell(
        workload="repetition",
        concurrency=1,
        share=0.3,
        baseline_seconds=1.0,
        speedup=CellSpeedup(point=2.0, log_se=0.05),
    )
    off = MixCell(workload="general", concurrency=1, share=0.7, baseline_seconds=1.0, speedup=None)
    mix = mix_speedup([on, off])
    assert mix.point == pytest.approx(1.0 / (0.7 + 0.3 / 2.0))
    assert [c.enabled for c in mix.cells] == [True, False]
    only_on = mix_speedup([on])
    assert _log_width(mix.low, mix.high) < _log_width(only_on.low, only_on.high)


def test_a_t_interval_is_read_with_its_degrees_of_freedom() -> None:
    normal = CellSpeedup.from_interval(2.0, 1.8, 2.2, 0.95)
    t3 = CellSpeedup.from_interval(2.0, 1.8, 2.2, 0.95, df=3)
    assert t3.log_se < normal.log_se
    assert CellSpeedup.from_interval(2.0, None, None, 0.95).log_se == 0.0


def _launches(pairs: list[RequestPair], slow: tuple[float, float]) -> tuple[list[RequestSample], list[RequestSample]]:
    """The same requests measured again in a second launch of each side, that side's launch `slow` times slower."""
    base, cand = [], []
    for launch, factor in ((0, 1.0), (1, slow[0])):
        base += [p.baseline.model_copy(update={"launch": launch, "e2e_s": p.baseline.e2e_s * factor}) for p in pairs]
    for launch, factor in ((0, 1.0), (1, slow[1])):
        cand += [p.candidate.model_copy(update={"launch": launch, "e2e_s": p.candidate.e2e_s * factor}) for p in pairs]
    return base, cand


def test_the_speedup_over_several_rounds_enters_the_mix_with_its_own_interval() -> None:
    pairs = _scenarios(seed=4, levels=(1,))[("repetition", 1)]
    base, cand = _launches(pairs, slow=(1.2, 0.9))
    est = pair_estimate(base, cand, level=0.95)
    assert est.launch_variance_included and est.df == 1.0
    assert est.point is not None and est.low is not None and est.high is not None
    cell = CellSpeedup.of_estimate(est)
    assert cell is not None and cell.df == est.df
    # The cell's distribution has exactly the estimate's interval: the mix of one scenario alone gives it back.
    alone = mix_speedup(
        [MixCell(workload="w", concurrency=1, share=1.0, baseline_seconds=1.0, speedup=cell)], MixPolicy(n_draws=40000)
    )
    assert alone.point == pytest.approx(est.point)
    assert alone.low == pytest.approx(est.low, rel=0.02) and alone.high == pytest.approx(est.high, rel=0.02)
    # Rounds that disagree widen THE interval, and the mix carries that width: one round's items would not.
    one_round = pair_estimate([p.baseline for p in pairs], [p.candidate for p in pairs], level=0.95)
    assert one_round.low is not None and one_round.high is not None
    assert _log_width(est.low, est.high) > 2 * _log_width(one_round.low, one_round.high)
    assert CellSpeedup.of_estimate(one_round.model_copy(update={"point": None})) is None


def test_a_mix_without_traffic_is_refused() -> None:
    cell = MixCell(workload="w", concurrency=1, share=0.0, baseline_seconds=1.0, speedup=None)
    with pytest.raises(ValueError, match="positive share"):
        mix_speedup([cell])


def test_two_configurations_compared_on_the_same_draws_cancel_what_they_share() -> None:
    copy = MixCell(
        workload="repetition",
        concurrency=1,
        share=0.3,
        baseline_seconds=1.0,
        speedup=CellSpeedup.from_interval(2.75, 1.8, 4.2, 0.95),
        source="g1",
    )
    chat = MixCell(
        workload="general",
        concurrency=1,
        share=0.7,
        baseline_seconds=2.0,
        speedup=CellSpeedup.from_interval(1.05, 1.0, 1.1, 0.95),
        source="g1",
    )
    routed = [copy, chat.model_copy(update={"speedup": None, "source": ""})]
    same = mix_ratio([copy, chat], [copy, chat], ("g1", "g1 again"))
    assert (same.point, same.low, same.high) == pytest.approx((1.0, 1.0, 1.0)) and not same.distinguishable
    paired = mix_ratio(routed, [copy, chat], ("routed", "g1 everywhere"))
    assert paired.point == pytest.approx(mix_speedup(routed).point / mix_speedup([copy, chat]).point)
    # The same cells as another candidate's: drawn independently, the copy task's wide interval no longer cancels.
    apart = mix_ratio(routed, [c.model_copy(update={"source": "g2"}) for c in (copy, chat)], ("routed", "g2"))
    assert apart.point == pytest.approx(paired.point)
    assert _log_width(paired.low, paired.high) < 0.75 * _log_width(apart.low, apart.high)
    assert paired.high < 1.0 and paired.distinguishable and not apart.distinguishable
