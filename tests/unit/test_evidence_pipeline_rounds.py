"""Evidence over several server launches per group, from constructed results: THE speedup's interval includes
the launch-to-launch variation, its point is the one the decision and the pair evidence use, and a baseline's own
launches give the A/A noise floor an accept must clear."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from test_evidence_pipeline_tracks import ACTIVE, KEY, scenario_run
from test_evidence_pipeline_tracks import records as one_launch_records

from specselect.artifacts.results import GroupLaunch, GroupResult
from specselect.core.decision import Thresholds
from specselect.core.status import RunStatus
from specselect.engines.acceptance import SpecTelemetry
from specselect.evidence.pipeline import Evidence, EvidenceSettings, InMemoryRecords, build_evidence
from specselect.evidence.pipeline.sequential import continuing_candidates, evidence_plan
from specselect.evidence.sequential import SequentialPolicy
from specselect.evidence.stats import BootstrapPolicy
from specselect.measure.memory import PeakMemory
from specselect.measure.types import RequestRecord

REPEATS = 2
BASELINE = "g0_target_only"


def launch_records(e2e_per_launch: Sequence[float], ttft: Sequence[float] | None = None) -> list[RequestRecord]:
    """Every request of launch j takes about `e2e_per_launch[j]` s (its first token after `ttft[j]` s, default
    0.05); launch j measures passes 2j and 2j + 1."""
    out: list[RequestRecord] = []
    for j, e2e in enumerate(e2e_per_launch):
        first = ttft[j] if ttft is not None else 0.05
        for r in one_launch_records(KEY.name, e2e=e2e, ttft=first, repeats=REPEATS):
            repeat = r.repeat + j * REPEATS
            out.append(r.model_copy(update={"launch": j, "repeat": repeat, "request_id": f"{r.item_id}:r{repeat}"}))
    return out


def group(name: str, recs: Sequence[RequestRecord], *, peaks: Sequence[float] | None = None) -> GroupResult:
    candidate = name != BASELINE
    launches = sorted({r.launch for r in recs})
    runs = [
        scenario_run(
            [r for r in recs if r.launch == j],
            launch=j,
            telemetry=ACTIVE if candidate else SpecTelemetry(source="not_exported"),
            peak_memory=PeakMemory(
                mb=peaks[j] if peaks else 1000.0, source="process_tree_rss", n_samples=5, interval_s=0.2
            ),
        )
        for j in launches
    ]
    return GroupResult.model_validate(
        {
            "group": name,
            "role": "candidate" if candidate else "baseline",
            "family": "ngram" if candidate else "target_only",
            "method": "ngram" if candidate else None,
            "run_status": RunStatus.COMPLETED,
            "reason": "measured",
            "execution_path": "speculative" if candidate else "target_only",
            "target_snapshot": "snap",
            "scenarios": (runs[0],),
            "relaunches": tuple(
                GroupLaunch(index=j, run_status=RunStatus.COMPLETED, reason="measured", scenarios=(runs[j],))
                for j in launches[1:]
            ),
            "launches_planned": len(launches),
            "track": BASELINE,
        }
    )


def evidence(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    candidate_ttft: Sequence[float] | None = None,
    **group_extra: Sequence[float],
) -> Evidence:
    base, cand = launch_records(baseline), launch_records(candidate, candidate_ttft)
    store = InMemoryRecords.of({(BASELINE, KEY.name): base, ("g1_ngram", KEY.name): cand})
    return build_evidence(
        [group(BASELINE, base), group("g1_ngram", cand, **group_extra)],
        [KEY],
        records=store,
        categories={},
        settings=EvidenceSettings(thresholds=Thresholds(), bootstrap=BootstrapPolicy(), repeats_per_launch=REPEATS),
    )


def test_one_launch_per_side_is_the_item_bootstrap_and_the_point_is_the_decisions() -> None:
    entry = evidence([1.0], [0.8]).entries[0]
    assert entry.speedup is not None and not entry.speedup.launch_variance_included
    assert entry.speedup.point == pytest.approx(1.25)
    assert entry.evidence.throughput_speedup == pytest.approx(entry.speedup.point)
    assert entry.stats is not None and entry.stats.speedup_interval is not None
    assert entry.stats.speedup_interval.point == pytest.approx(entry.speedup.point)
    assert entry.decision.decision.value == "accept"


def test_launches_that_disagree_widen_the_interval_until_the_gain_is_not_certain() -> None:
    steady = evidence([1.0, 1.0], [0.8, 0.8]).entries[0]
    drifting = evidence([1.0, 1.0], [0.8, 0.9]).entries[0]
    assert steady.speedup is not None and drifting.speedup is not None
    assert drifting.speedup.launch_variance_included
    assert drifting.speedup.components is not None and drifting.speedup.components.launch_candidate > 0
    assert drifting.speedup.launch_rates_candidate[0] > drifting.speedup.launch_rates_candidate[1]
    # Pooled over both launches: (total baseline time / total candidate time) on the same items.
    assert drifting.speedup.point == pytest.approx(2.0 / 1.7)
    assert drifting.evidence.throughput_speedup == pytest.approx(drifting.speedup.point)
    assert steady.decision.decision.value == "accept"
    assert drifting.decision.decision.value == "tune"
    assert drifting.decision.reason == "insufficient_confidence"
    assert drifting.speedup.low is not None and drifting.speedup.low < 1.10 < drifting.speedup.point


def test_a_gain_inside_the_baselines_own_launch_spread_is_not_accepted() -> None:
    quiet = evidence([1.0, 1.0, 1.0, 1.0], [0.8, 0.82, 0.8, 0.82])
    noisy = evidence([1.0, 0.95, 0.95, 1.0], [0.8, 0.82, 0.8, 0.82])
    assert quiet.entries[0].decision.decision.value == "accept"
    assert quiet.entries[0].decision.checks["outside_noise_floor"] is True
    floor = noisy.noise_floors[0].floor
    assert (noisy.noise_floors[0].track, noisy.noise_floors[0].scenario) == (BASELINE, KEY.name)
    assert floor.verdict == "pass" and floor.band_high is not None and floor.band_high > 1.15
    entry = noisy.entries[0]
    assert entry.speedup is not None and entry.speedup.low is not None
    # The interval clears the 1.10 threshold but not the band identical servers land in.
    assert 1.10 < entry.speedup.low < floor.band_high
    assert (entry.decision.decision.value, entry.decision.reason) == ("tune", "within_noise_floor")
    assert noisy.policy.noise_floor_rule is not None


def test_an_accept_needs_the_ttft_interval_over_both_launches_inside_its_limit() -> None:
    steady = evidence([1.0, 1.0], [0.8, 0.8], candidate_ttft=[0.05, 0.05]).entries[0]
    # The candidate's first launch answered its first token sooner, its second later: the pooled TTFT p95 ratio
    # (1.08) passes the 1.10 limit as a point, but a rerun could land either launch's way.
    split = evidence([1.0, 1.0], [0.8, 0.8], candidate_ttft=[0.045, 0.054]).entries[0]
    assert steady.decision.decision.value == "accept"
    assert set(steady.decision.confidence.latency_intervals) == {
        "max_ttft_regression_ratio",
        "max_e2e_p95_regression_ratio",
    }
    assert split.evidence.ttft_ratio == pytest.approx(1.08)
    assert split.stats is not None and split.stats.ttft_ratio.method == "two_stage_bootstrap_t"
    assert split.stats.ttft_ratio.point == pytest.approx(split.evidence.ttft_ratio)
    assert split.decision.checks["max_ttft_regression_ratio"] is True
    assert (split.decision.decision.value, split.decision.reason) == ("tune", "insufficient_latency_confidence")
    assert split.decision.confidence.unsettled_checks == ("max_ttft_regression_ratio",)
    high = split.decision.confidence.latency_intervals["max_ttft_regression_ratio"].high
    assert high > 1.10
    assert split.decision.detail == f"ttft_ratio interval high {high:.4g} > 1.1 (point 1.08)"


def test_baseline_launches_ten_percent_apart_fail_the_aa_check() -> None:
    floor = evidence([1.0, 0.9], [0.8, 0.8]).noise_floors[0].floor
    assert (floor.verdict, floor.reason) == ("fail", "aa_interval_excludes_one")
    assert floor.parity is not None and floor.parity.verdict.value == "pass"  # same outputs, only slower


def test_acceptance_counts_are_summed_and_the_largest_peak_counts() -> None:
    entry = evidence([1.0, 1.0], [0.8, 0.8], peaks=[1000.0, 1400.0]).entries[0]
    assert entry.telemetry is not None and entry.telemetry.drafts == 2 * (ACTIVE.drafts or 0)
    assert entry.telemetry.acceptance_rate == pytest.approx(ACTIVE.acceptance_rate)
    assert entry.evidence.candidate_peak_memory_mb == 1400.0


def _prefill_records(records: Sequence[RequestRecord], *, decode_scale: float = 1.0) -> list[RequestRecord]:
    """Prompts of 4 lengths whose TTFT grows 1 ms per prompt token; decode time scaled by `decode_scale`."""
    out = []
    for n, r in enumerate(records):
        prompt = 100 * (1 + n % 4)
        send = r.send_time_s or 0.0
        first = send + 0.02 + 0.001 * prompt
        end = first + ((r.end_time_s or 0.0) - (r.first_token_time_s or 0.0)) * decode_scale
        out.append(
            r.model_copy(
                update={
                    "prompt_tokens": prompt,
                    "first_token_time_s": first,
                    "end_time_s": end,
                    "chunk_times_s": [first, end],
                }
            )
        )
    return out


def _predicted(candidate_scale: float) -> tuple[float | None, float | None]:
    base = _prefill_records(launch_records([1.0]))
    cand = _prefill_records(launch_records([1.0]), decode_scale=candidate_scale)
    telemetry = SpecTelemetry(
        source="prometheus",
        drafts=10,
        draft_tokens=30,
        accepted_tokens=15,
        per_position_accepted=(8, 5, 2),
        per_position_rates=(0.8, 0.5, 0.2),
        acceptance_rate=0.5,
    )
    groups = [group(BASELINE, base), group("g1_ngram", cand)]
    groups[1] = groups[1].model_copy(
        update={"scenarios": (groups[1].scenarios[0].model_copy(update={"telemetry": telemetry}),)}
    )
    store = InMemoryRecords.of({(BASELINE, KEY.name): base, ("g1_ngram", KEY.name): cand})
    settings = EvidenceSettings(thresholds=Thresholds(), bootstrap=BootstrapPolicy(), repeats_per_launch=REPEATS)
    entry = build_evidence(groups, [KEY], records=store, categories={}, settings=settings).entries[0]
    assert entry.prediction is not None
    assert entry.prediction.verify_cost is not None and entry.prediction.verify_cost.source == "baseline_prefill"
    return entry.prediction.predicted_decode_speedup, entry.prediction.measured_decode_speedup


def test_the_prediction_uses_the_baselines_prefill_and_none_of_the_candidates_timing() -> None:
    fast, measured_fast = _predicted(0.5)
    slow, measured_slow = _predicted(0.9)
    assert fast is not None and fast == slow  # the candidate's own timing does not enter the prediction
    assert measured_fast is not None and measured_slow is not None and measured_fast > measured_slow


def test_the_sequential_rule_continues_only_the_pair_whose_interval_straddles_a_threshold() -> None:
    policy = SequentialPolicy(max_repeats=REPEATS, max_launches=4, min_launches=2)
    settled = evidence_plan(evidence([1.0, 1.0], [0.8, 0.8]), policy)
    drifting = evidence_plan(evidence([1.0, 1.0], [0.8, 0.9]), policy)
    assert [(s.pair, s.action, s.reason) for s in settled.steps] == [("g1_ngram/w-c1", "settled", "decision_settled")]
    assert settled.steps[0].passes_spent == 4 and settled.steps[0].passes_saved == 4
    assert [(s.action, s.straddled) for s in drifting.steps] == [("add_launch", (1.0, 1.1))]
    assert continuing_candidates(drifting) == ("g1_ngram",) and continuing_candidates(settled) == ()
    spent = evidence_plan(evidence([1.0, 1.0, 1.0, 1.0], [0.8, 0.9, 0.8, 0.9]), policy)
    assert [(s.action, s.reason) for s in spent.steps] == [("stop", "budget_exhausted")]


def test_the_sequential_rule_continues_a_pair_whose_accept_waits_on_a_latency_interval() -> None:
    policy = SequentialPolicy(max_repeats=REPEATS, max_launches=4, min_launches=2)
    split = evidence_plan(evidence([1.0, 1.0], [0.8, 0.8], candidate_ttft=[0.045, 0.054]), policy)
    (step,) = split.steps
    assert (step.action, step.reason, step.straddled) == ("add_launch", "latency_interval_straddles_limit", ())
    assert step.unsettled_checks == ("max_ttft_regression_ratio",)
    assert continuing_candidates(split) == ("g1_ngram",)
    spent = evidence_plan(evidence([1.0] * 4, [0.8] * 4, candidate_ttft=[0.045, 0.054, 0.045, 0.054]), policy).steps[0]
    assert (spent.action, spent.reason) == ("stop", "budget_exhausted")


def test_the_aa_halves_alternate_so_a_drift_across_the_run_is_not_taken_for_launch_noise() -> None:
    # Launches 1 and 4 fast, 2 and 3 slow (a machine that slows down and recovers): 2+4 against 1+3 is even.
    floor = evidence([1.0, 0.9, 0.9, 1.0], [0.8, 0.8, 0.8, 0.8]).noise_floors[0].floor
    assert floor.speedup.point == pytest.approx(1.0)
    assert floor.speedup.launches_baseline == (0, 2) and floor.speedup.launches_candidate == (1, 3)
    assert floor.contains_one is True


def test_identical_servers_taken_as_a_candidate_are_not_accepted() -> None:
    steady = evidence([1.0, 1.0, 1.0, 1.0], [0.8, 0.8, 0.8, 0.8])
    (aa,) = steady.noise_floors
    assert aa.as_candidate is not None
    assert (aa.as_candidate.decision.value, aa.as_candidate.reason) == ("tune", "below_min_speedup")
    assert "outside_noise_floor" not in aa.as_candidate.checks  # the band is this pair's own: not checked
    assert steady.policy.aa_as_candidate_rule is not None


def test_a_machine_that_sped_up_between_launches_would_accept_identical_servers() -> None:
    # Launches 2 and 4 ran 30 % faster than 1 and 3 with the same outputs: the rule accepts the A/A pair, which
    # tells the reader that no accept of this run in that scenario can be told from the machine's drift.
    drifting = evidence([1.0, 0.7, 1.0, 0.7], [0.8, 0.8, 0.8, 0.8])
    (aa,) = drifting.noise_floors
    assert aa.floor.verdict == "fail"
    assert aa.as_candidate is not None and aa.as_candidate.decision.value == "accept"


def test_a_third_launch_has_no_aa_partner_so_the_floor_is_the_first_two_launches() -> None:
    # A sequential round's extra baseline launch (here 40 % slower) stands at the run's end, beside no other:
    # the floor and the A/A-as-candidate pair are those of the first two launches, not a one-degree-of-freedom
    # interval of launches 1 + 3 against 2.
    three = evidence([1.0, 0.9, 0.6], [0.8, 0.8, 0.8]).noise_floors[0]
    two = evidence([1.0, 0.9], [0.8, 0.8]).noise_floors[0]
    assert three.floor.speedup.launches_baseline == (0,) and three.floor.speedup.launches_candidate == (1,)
    assert three.floor.speedup.point == pytest.approx(two.floor.speedup.point)
    assert (three.floor.band_low, three.floor.band_high) == pytest.approx((two.floor.band_low, two.floor.band_high))
    assert three.as_candidate is not None and two.as_candidate is not None
    assert three.as_candidate.reason == two.as_candidate.reason
    # The parity floor still reads every launch: all three gave the same outputs.
    assert three.floor.parity is not None and three.floor.parity.verdict.value == "pass"
