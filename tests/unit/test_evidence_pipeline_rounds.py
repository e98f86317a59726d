"""Evidence over paired rounds, from constructed results: launch j of each side is round j, THE speedup is the
rounds' geometric mean with a t interval the decision and the pair evidence share, the mean latencies are gated
the plan's way, the looks settle pairs, a busy round is left out, and an A/A control is judged as a candidate."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from test_evidence_pipeline_tracks import ACTIVE, KEY, scenario_run
from test_evidence_pipeline_tracks import records as one_launch_records

from specselect._core.decision import Thresholds
from specselect._core.status import RunStatus
from specselect._evidence.pipeline import EvidenceSettings, InMemoryRecords, build_evidence
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.rounds import LookSchedule
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.group import GroupLaunch, GroupResult
from specselect.records.host import HostLoad
from specselect.records.measurement import RequestRecord
from specselect.records.memory import PeakMemory
from specselect.records.telemetry import SpecTelemetry

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


def group(
    name: str,
    recs: Sequence[RequestRecord],
    *,
    peaks: Sequence[float] | None = None,
    busy: Sequence[int] = (),
    role: str | None = None,
) -> GroupResult:
    """A completed group whose launch j measured `recs` of launch j (`busy`: launches a neighbour crowded)."""
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
            host_load=BUSY if j in busy else None,
        )
        for j in launches
    ]
    return GroupResult.model_validate(
        {
            "group": name,
            "role": role or ("candidate" if candidate else "baseline"),
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


BUSY = HostLoad(wall_s=10.0, logical_cpus=2, host_busy_cpu_s=20.0, own_cpu_s=12.0, foreign_cpu_s=8.0, foreign_share=0.4)


def settings(looks: Sequence[int] | None = None, **thresholds: object) -> EvidenceSettings:
    schedule = None if looks is None else LookSchedule.of_level(looks, 0.95)
    return EvidenceSettings(
        thresholds=Thresholds.model_validate(thresholds),
        bootstrap=BootstrapPolicy(),
        schedule=schedule,
        host_foreign_cpu_share_limit=0.25,
    )


def evidence(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    candidate_ttft: Sequence[float] | None = None,
    policy: EvidenceSettings | None = None,
    **group_extra: object,
) -> Evidence:
    """One candidate against the baseline: `baseline[j]` and `candidate[j]` are round j's request seconds."""
    base, cand = launch_records(baseline), launch_records(candidate, candidate_ttft)
    store = InMemoryRecords.of({(BASELINE, KEY.name): base, ("g1_ngram", KEY.name): cand})
    return build_evidence(
        [group(BASELINE, base), group("g1_ngram", cand, **group_extra)],  # type: ignore[arg-type]
        [KEY],
        records=store,
        categories={},
        settings=policy or settings(),
    )


def test_one_round_is_the_items_alone_and_cannot_accept_however_fast() -> None:
    entry = evidence([1.0], [0.5]).entries[0]
    assert entry.speedup is not None and not entry.speedup.launch_variance_included
    assert entry.speedup.point == pytest.approx(2.0)
    assert entry.evidence.throughput_speedup == pytest.approx(entry.speedup.point)
    assert (entry.decision.decision.value, entry.decision.reason) == ("tune", "no_launch_replication")


def test_rounds_that_agree_accept_and_the_point_is_the_rounds_geometric_mean() -> None:
    entry = evidence([1.0, 1.0, 1.0], [0.8, 0.81, 0.79]).entries[0]
    assert entry.speedup is not None and entry.speedup.rounds == (0, 1, 2)
    expected = math.exp(sum(math.log(1.0 / c) for c in (0.8, 0.81, 0.79)) / 3)
    assert entry.speedup.point == pytest.approx(expected)
    # The pair evidence's rates are the sides' geometric means: their ratio is the decision's point.
    assert entry.evidence.throughput_speedup == pytest.approx(expected)
    assert entry.stats is not None and entry.stats.throughput_speedup.point == pytest.approx(expected)
    assert (entry.decision.decision.value, entry.decision.reason) == ("accept", "meets_thresholds")
    assert entry.speedup.df == 2.0 and entry.speedup.variance_source == "pair"


def test_rounds_that_disagree_leave_the_gain_uncertain() -> None:
    entry = evidence([1.0, 1.0], [0.8, 0.95]).entries[0]
    assert entry.speedup is not None and entry.speedup.low is not None
    assert entry.speedup.low < 1.10 < entry.speedup.point  # type: ignore[operator]
    assert (entry.decision.decision.value, entry.decision.reason) == ("tune", "insufficient_confidence")


def test_a_first_token_clearly_slower_in_every_round_fails_the_mean_gate_too() -> None:
    entry = evidence([1.0, 1.0, 1.0], [0.8, 0.81, 0.79], candidate_ttft=[0.08, 0.081, 0.079]).entries[0]
    assert entry.latency["ttft_mean"].point == pytest.approx(1.6, rel=0.02)
    assert entry.decision.reason == "ttft_regression+ttft_mean_regression"
    assert entry.decision.failed_checks == ("max_ttft_regression_ratio", "ttft_mean_gate")


def test_shown_within_holds_back_an_accept_whose_ttft_interval_reaches_past_the_limit() -> None:
    ttft = [0.045, 0.054, 0.05]  # the candidate's first token: quicker, slower, the same, one round each
    default = evidence([1.0, 1.0, 1.0], [0.8, 0.81, 0.79], candidate_ttft=ttft).entries[0]
    strict = evidence(
        [1.0, 1.0, 1.0], [0.8, 0.81, 0.79], candidate_ttft=ttft, policy=settings(latency_gate="shown_within")
    ).entries[0]
    assert default.decision.decision.value == "accept"
    interval = default.decision.confidence.latency_intervals["max_ttft_regression_ratio"]
    assert interval.low < 1.10 < interval.high
    assert (strict.decision.decision.value, strict.decision.reason) == ("tune", "insufficient_latency_confidence")
    assert strict.decision.confidence.unsettled_checks == ("max_ttft_regression_ratio",)


def test_a_round_a_busy_neighbour_crowded_is_left_out_and_named() -> None:
    entry = evidence([1.0, 1.0, 1.0], [0.8, 1.3, 0.79], busy=[1]).entries[0]
    assert entry.speedup is not None and entry.speedup.rounds == (0, 2)
    assert list(entry.speedup.excluded_rounds) == [1]
    assert "host busy: 40.0% of all CPU time" in entry.speedup.excluded_rounds[1]
    assert entry.contamination == (entry.speedup.excluded_rounds[1],)
    assert entry.decision.decision.value == "accept"


def test_a_pair_whose_every_round_was_crowded_is_incomplete_and_open() -> None:
    ev = evidence([1.0, 1.0], [0.8, 0.8], busy=[0, 1], policy=settings(looks=(2, 3)))
    entry = ev.entries[0]
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "uncontaminated_measurement" in entry.evidence.missing_evidence
    assert ev.plan is not None and ev.plan.continuing == ("g1_ngram",)


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
    entry = build_evidence(groups, [KEY], records=store, categories={}, settings=settings()).entries[0]
    assert entry.prediction is not None
    assert entry.prediction.verify_cost is not None and entry.prediction.verify_cost.source == "baseline_prefill"
    return entry.prediction.predicted_decode_speedup, entry.prediction.measured_decode_speedup


def test_the_prediction_uses_the_baselines_prefill_and_none_of_the_candidates_timing() -> None:
    fast, measured_fast = _predicted(0.5)
    slow, measured_slow = _predicted(0.9)
    assert fast is not None and fast == slow  # the candidate's own timing does not enter the prediction
    assert measured_fast is not None and measured_slow is not None and measured_fast > measured_slow


def _two(candidates: dict[str, Sequence[float]], baseline: Sequence[float], policy: EvidenceSettings) -> Evidence:
    base = launch_records(baseline)
    store = {(BASELINE, KEY.name): base} | {(n, KEY.name): launch_records(c) for n, c in candidates.items()}
    groups = [group(BASELINE, base)] + [
        group(n, launch_records(c), role="control" if n.endswith(".aa") else None) for n, c in candidates.items()
    ]
    return build_evidence(groups, [KEY], records=InMemoryRecords.of(store), categories={}, settings=policy)


def test_at_a_look_only_the_candidate_with_an_open_pair_runs_on() -> None:
    ev = _two({"g1_ngram": [0.5, 0.51], "g2_ngram": [0.8, 0.95]}, [1.0, 1.0], settings(looks=(2, 3)))
    assert ev.plan is not None
    assert [(p.candidate, p.state) for p in ev.plan.pairs] == [("g1_ngram", "accepted"), ("g2_ngram", "open")]
    assert (ev.plan.look, ev.plan.continuing, ev.plan.next_rounds) == (0, ("g2_ngram",), 3)


def test_the_run_pools_its_pairs_round_variances() -> None:
    ev = _two({"g1_ngram": [0.8, 0.82, 0.79], "g2_ngram": [0.6, 0.61, 0.62]}, [1.0, 1.0, 1.0], settings())
    (throughput,) = [p for p in ev.pools if p.metric == "throughput"]
    assert throughput.members == ("g1_ngram/w-c1", "g2_ngram/w-c1") and throughput.pooled_df == 4
    assert all(e.speedup is not None and e.speedup.df == 4.0 for e in ev.entries)


def test_a_pair_accepted_at_the_first_look_keeps_that_decision() -> None:
    # Round 3 ran while another pair was open; it would have made this one a tune, but the accept was taken at
    # look 1 with that look's share of the error budget.
    entry = evidence([1.0, 1.0, 1.0], [0.8, 0.81, 1.4], policy=settings(looks=(2, 3))).entries[0]
    assert entry.decision.decision.value == "accept"
    assert entry.look is not None and (entry.look.look, entry.look.rounds) == (0, 2)
    assert entry.speedup is not None and entry.speedup.rounds == (0, 1)
    assert entry.speedup.level == pytest.approx(LookSchedule.of_level((2, 3), 0.95).level_at(0))
    assert [(p.look, p.state) for p in entry.looks] == [(0, "accepted"), (1, "open")]  # each look's own


def test_an_aa_control_is_judged_as_a_candidate_kept_apart_and_pooled() -> None:
    ev = _two({"g0_target_only.aa": [1.0, 1.02, 0.99], "g1_ngram": [0.8, 0.82, 0.79]}, [1.0, 1.0, 1.0], settings())
    assert [e.candidate for e in ev.entries] == ["g1_ngram"]
    (control,) = ev.controls
    assert control.speedup is not None and control.speedup.low < 1.0 < control.speedup.high  # type: ignore[operator]
    assert (control.decision.decision.value, control.decision.reason) == ("tune", "below_min_speedup")
    (throughput,) = [p for p in ev.pools if p.metric == "throughput"]
    assert "g0_target_only.aa/w-c1" in throughput.members
    assert ev.policy.aa_control_rule is not None
    assert "g0_target_only.aa" not in ev.verdicts


def test_the_latency_gates_are_judged_at_the_plans_level_at_every_look_the_speedup_at_the_looks() -> None:
    # The speedup's accept spends its error over the looks; a latency limit is a guard judged at the plan's level.
    entry = evidence([1.0] * 3, [0.8, 0.81, 0.79], policy=settings(looks=(3, 4))).entries[0]
    assert entry.speedup is not None
    assert entry.speedup.level == pytest.approx(LookSchedule.of_level((3, 4), 0.95).level_at(0))
    assert entry.latency["ttft_mean"].level == entry.latency["e2e_mean"].level == 0.95
    assert entry.decision.confidence.latency_intervals["max_ttft_regression_ratio"].level == 0.95
