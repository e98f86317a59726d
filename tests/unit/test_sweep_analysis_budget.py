"""Goodput under SLOs, the sweep duration budget, and early stop on a real bootstrap estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from specselect._evidence import ScenarioLoad, SweepPoint, early_stop_reason, estimate_duration, goodput
from specselect._evidence.samples import RequestSample, pair_requests
from specselect._evidence.stats import paired_stats
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.evidence.sweeps import DurationEstimate, Goodput
from specselect.records.telemetry import RequestSpecMetrics


@dataclass(frozen=True)
class Record:
    """A measured request as the client records it (satisfies RecordLike)."""

    item_id: str = "a"
    repeat: int = 0
    warmup: bool = False
    send_time_s: float | None = 0.0
    first_token_time_s: float | None = 0.1
    end_time_s: float | None = 1.1
    completion_tokens: int | None = 101
    output_text: str | None = "x"
    speculative: RequestSpecMetrics | None = None
    error: str | None = None


def req(ttft_ms: float, tpot_ms: float, tokens: int = 11, **kw: Any) -> Record:
    first = ttft_ms / 1000.0
    return Record(
        first_token_time_s=first, end_time_s=first + tpot_ms * (tokens - 1) / 1000.0, completion_tokens=tokens, **kw
    )


# TTFT/TPOT in ms: fast, slow start, slow decode, both slow.
MIX = [req(100, 20), req(600, 20), req(100, 80), req(600, 80)]


def test_goodput_with_each_limit_alone_and_both() -> None:
    ttft_only = goodput(MIX, slo_ttft_ms=500, slo_tpot_ms=None, duration_s=2.0)
    assert (ttft_only.n_met, ttft_only.goodput_rps, ttft_only.share_met) == (2, 1.0, 0.5)
    tpot_only = goodput(MIX, slo_ttft_ms=None, slo_tpot_ms=50, duration_s=2.0)
    assert tpot_only.n_met == 2 and tpot_only.status == "computed"
    both = goodput(MIX, slo_ttft_ms=500, slo_tpot_ms=50, duration_s=2.0)
    assert (both.n_met, both.goodput_rps, both.share_met) == (1, 0.5, 0.25)
    assert both.throughput_rps == 2.0 and both.n_requests == 4
    assert (both.slo_ttft_ms, both.slo_tpot_ms, both.duration_s) == (500, 50, 2.0)
    assert "TPOT = (end - first_token) / (completion_tokens - 1)" in both.rule


def test_limits_are_inclusive() -> None:
    exact = goodput([req(250, 25)], slo_ttft_ms=250, slo_tpot_ms=25, duration_s=1.0)
    assert exact.n_met == 1


def test_errors_never_meet_and_do_not_count_as_throughput() -> None:
    records = [*MIX, Record(error="HTTP 500", first_token_time_s=None, end_time_s=None)]
    result = goodput(records, slo_ttft_ms=10_000, slo_tpot_ms=10_000, duration_s=5.0)
    assert (result.n_requests, result.n_errors, result.n_met) == (5, 1, 4)
    assert result.throughput_rps == pytest.approx(4 / 5.0)
    assert result.share_met == pytest.approx(4 / 5)


def test_one_token_requests_meet_tpot_and_are_counted() -> None:
    one = Record(first_token_time_s=0.1, end_time_s=0.1, completion_tokens=1)
    slow_start = Record(first_token_time_s=0.9, end_time_s=0.9, completion_tokens=1)
    result = goodput([one, slow_start], slo_ttft_ms=500, slo_tpot_ms=1.0, duration_s=1.0)
    assert (result.n_single_token, result.n_met, result.n_unmeasured) == (2, 1, 0)


def test_warmup_excluded_and_missing_times_unmeasured() -> None:
    records = [
        req(100, 20, warmup=True),
        req(100, 20),
        Record(first_token_time_s=None),  # no first token time: TTFT unknown
        Record(completion_tokens=None),  # no token count: TPOT unknown
    ]
    both = goodput(records, slo_ttft_ms=500, slo_tpot_ms=50, duration_s=1.0)
    assert (both.n_requests, both.n_met, both.n_unmeasured) == (3, 1, 2)
    # Only the limit a request lacks data for makes it unmeasured.
    ttft_only = goodput(records, slo_ttft_ms=500, slo_tpot_ms=None, duration_s=1.0)
    assert (ttft_only.n_met, ttft_only.n_unmeasured) == (2, 1)


def test_no_limits_is_not_computed() -> None:
    result = goodput(MIX, slo_ttft_ms=None, slo_tpot_ms=None, duration_s=2.0)
    assert result.status == "not_computed"
    assert result.n_met is None and result.goodput_rps is None and result.share_met is None
    assert result.throughput_rps == 2.0
    assert Goodput.model_validate_json(result.model_dump_json()) == result


def test_no_requests() -> None:
    result = goodput([], slo_ttft_ms=100, slo_tpot_ms=None, duration_s=1.0)
    assert (result.n_requests, result.n_met, result.share_met, result.goodput_rps) == (0, 0, None, 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"slo_ttft_ms": 100, "slo_tpot_ms": None, "duration_s": 0.0},
        {"slo_ttft_ms": 100, "slo_tpot_ms": None, "duration_s": math.inf},
        {"slo_ttft_ms": -1, "slo_tpot_ms": None, "duration_s": 1.0},
        {"slo_ttft_ms": None, "slo_tpot_ms": math.nan, "duration_s": 1.0},
    ],
)
def test_goodput_rejects_bad_inputs(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="goodput"):
        goodput(MIX, **kwargs)


def test_duration_estimate_arithmetic() -> None:
    loads = [
        ScenarioLoad(name="general-c1", concurrency=1, n_requests=10, max_tokens=100),
        ScenarioLoad(name="general-c4", concurrency=4, n_requests=10, max_tokens=100),
        ScenarioLoad(name="tiny-c16", concurrency=16, n_requests=8, max_tokens=50),
    ]
    result = estimate_duration(servers_to_start=3, startup_s=60.0, scenarios=loads, tokens_per_s=10.0)
    # 10*100/(10*1) = 100; 10*100/(10*4) = 25; concurrency capped at 8 requests: 8*50/(10*8) = 5.
    assert [(d.name, d.seconds) for d in result.per_scenario] == [
        ("general-c1", 100),
        ("general-c4", 25),
        ("tiny-c16", 5),
    ]
    assert result.seconds == pytest.approx(3 * 60 + 130)
    assert (result.servers, result.startup_s, result.tokens_per_s, result.requests_per_s) == (3, 60.0, 10.0, None)
    assert "budget, not a promise" in result.rule and "batching" in result.rule
    paced = estimate_duration(
        servers_to_start=3, startup_s=60.0, scenarios=loads, tokens_per_s=10.0, requests_per_s=0.5
    )
    assert [d.seconds for d in paced.per_scenario] == [100, 25, 16]
    assert DurationEstimate.model_validate_json(paced.model_dump_json()) == paced


def test_duration_estimate_validates_inputs() -> None:
    load = [ScenarioLoad(name="s", concurrency=1, n_requests=1, max_tokens=1)]
    cases: tuple[dict[str, Any], ...] = (
        {"servers_to_start": -1, "startup_s": 1.0, "tokens_per_s": 1.0},
        {"servers_to_start": 1, "startup_s": -1.0, "tokens_per_s": 1.0},
        {"servers_to_start": 1, "startup_s": 1.0, "tokens_per_s": 0.0},
        {"servers_to_start": 1, "startup_s": 1.0, "tokens_per_s": math.nan},
        {"servers_to_start": 1, "startup_s": 1.0, "tokens_per_s": 1.0, "requests_per_s": 0.0},
    )
    for kwargs in cases:
        with pytest.raises(ValueError, match="estimate_duration"):
            estimate_duration(scenarios=load, **kwargs)
    for bad in ({"concurrency": 0}, {"n_requests": 0}, {"max_tokens": -3}):
        with pytest.raises(ValueError, match="greater than 0"):
            ScenarioLoad.model_validate({"name": "s", "concurrency": 1, "n_requests": 1, "max_tokens": 1, **bad})
    # An already running server: nothing to start.
    assert estimate_duration(servers_to_start=0, startup_s=0.0, scenarios=load, tokens_per_s=1.0).seconds == 1.0


def test_early_stop_triggers_on_a_real_clear_slowdown_only_with_enough_items() -> None:
    rng = np.random.default_rng(5)

    def point(n_items: int) -> SweepPoint:
        base = [
            RequestSample(item_id=f"i{i}", repeat=r, completion_tokens=100, e2e_s=float(rng.lognormal(1.0, 0.2)))
            for i in range(n_items)
            for r in range(3)
        ]
        cand = [s.model_copy(update={"e2e_s": (s.e2e_s or 1.0) / 0.8 * float(rng.lognormal(0, 0.05))}) for s in base]
        stats = paired_stats(list(pair_requests(base, cand).pairs), BootstrapPolicy(n_resamples=500))
        return SweepPoint(candidate="ngram", workload="general", concurrency=8, speedup=stats.throughput_speedup)

    assert early_stop_reason(point(12)) is not None
    # Two items: point estimate only (too few clusters), which never stops a sweep.
    few = point(2)
    assert few.speedup.point is not None and few.speedup.point < 1.0
    assert early_stop_reason(few) is None
