"""The hand-off's answer for a traffic mix: where each candidate is enabled (workloads, a concurrency cut-off),
its mix speedup with the propagated interval, the recommendation and its serve flags."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from specselect._artifacts.handoff.mix import MixInputs, mix_advice
from specselect._core.decision import Confidence, DecisionResult, SpeedupInterval, Thresholds
from specselect._core.pairing import PairEvidence
from specselect._core.status import Decision, EvidenceStatus
from specselect._plan.traffic import TrafficConfig
from specselect.records.evidence.mix import MixPolicy
from specselect.records.evidence.result import EvidencePolicy, ScenarioEvidence
from specselect.records.evidence.rounds import RoundEstimate
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.proposals import ScheduleRange
from specselect.records.results import EvidenceFile
from specselect.records.server import ServeFlags

FLAGS = ServeFlags(engine_kind="vllm", engine_version="0.32.0+cpu", program=("python",), args=("--model", "m"))


def _speedup(point: float, low: float, high: float) -> RoundEstimate:
    """THE speedup of a scenario as the pipeline writes it (what the mix reads)."""
    return RoundEstimate.model_construct(point=point, low=low, high=high, level=0.95, df=None)


def _entry(
    candidate: str, workload: str, level: int, decision: Decision, speedup: tuple[float, float, float]
) -> ScenarioEvidence:
    point, low, high = speedup
    interval = SpeedupInterval(low=low, high=high, level=0.95, method="m", point=point, launch_variance_included=True)
    result = DecisionResult.model_construct(
        decision=decision,
        reason="accepted" if decision is Decision.ACCEPT else "below_min_speedup",
        policy=Thresholds(),
        checks={},
        confidence=Confidence(status="confident", interval=interval),
        evidence_status=EvidenceStatus.COMPARABLE,
    )
    return ScenarioEvidence.model_construct(
        candidate=candidate,
        family="ngram",
        scenario=f"{workload}-c{level}",
        workload=workload,
        concurrency=level,
        evidence=PairEvidence.model_construct(evidence_status=EvidenceStatus.COMPARABLE, throughput_speedup=point),
        decision=result,
        stats=None,
        speedup=_speedup(point, low, high),
        categories=None,
    )


def _evidence(entries: Sequence[ScenarioEvidence]) -> EvidenceFile:
    policy = EvidencePolicy.model_construct(rule="r", bootstrap=BootstrapPolicy())
    return EvidenceFile.model_construct(policy=policy, entries=tuple(entries), verdicts={})


ACCEPT, TUNE = Decision.ACCEPT, Decision.TUNE
ENTRIES = [
    # ngram: 2x on repetition up to concurrency 2, a loss on general.
    _entry("g1", "repetition", 1, ACCEPT, (2.2, 2.0, 2.4)),
    _entry("g1", "repetition", 2, ACCEPT, (1.8, 1.6, 2.0)),
    _entry("g1", "general", 1, TUNE, (0.95, 0.9, 1.0)),
    _entry("g1", "general", 2, TUNE, (0.9, 0.85, 0.95)),
    # a draft model: accepted at concurrency 1 everywhere, lost at 2.
    _entry("g2", "repetition", 1, ACCEPT, (1.3, 1.2, 1.4)),
    _entry("g2", "repetition", 2, TUNE, (1.0, 0.9, 1.1)),
    _entry("g2", "general", 1, ACCEPT, (1.2, 1.15, 1.25)),
    _entry("g2", "general", 2, TUNE, (0.95, 0.9, 1.0)),
]
SECONDS = {("general", 1): 2.0, ("general", 2): 3.0, ("repetition", 1): 1.0, ("repetition", 2): 1.5}


def _inputs(workloads: dict[str, float], entries: Sequence[ScenarioEvidence] = ENTRIES) -> MixInputs:
    traffic = TrafficConfig(workloads=workloads, concurrency={1: 0.5, 2: 0.5})
    return MixInputs(traffic, [1, 2], _evidence(entries), SECONDS, MixPolicy(n_draws=4000))


def _serve(seen: list[tuple[str, Sequence[ScheduleRange] | None]]):  # type: ignore[no-untyped-def]
    def serve(name: str, ranges: Sequence[ScheduleRange] | None) -> tuple[ServeFlags | None, bool]:
        seen.append((name, ranges))
        return FLAGS, ranges is not None

    return serve


def test_each_candidate_is_enabled_where_every_level_up_to_the_cut_off_was_accepted() -> None:
    seen: list[tuple[str, Sequence[ScheduleRange] | None]] = []
    mix = mix_advice(
        _inputs({"general": 0.7, "repetition": 0.3}),
        {"g1": "ngram", "g2": "draft_model"},
        serve=_serve(seen),
        cutoff=lambda name, level: ((1, level, 3), (level + 1, None, 0)),
    )
    options = {o.candidate: o for o in mix.options}
    g1 = options["g1"]
    assert [(s.workload, s.enabled, s.levels) for s in g1.segments] == [
        ("general", False, ()),
        ("repetition", True, (1, 2)),
    ]
    assert g1.segments[0].why == "not accepted at concurrency 1 (tune: below_min_speedup)"
    assert g1.concurrency_cutoff is None  # on repetition at every measured level
    g2 = options["g2"]
    assert [s.levels for s in g2.segments] == [(1,), (1,)] and g2.concurrency_cutoff == 1
    # Enabled everywhere, ngram's loss on 70% general traffic eats its gain; only on its segments is it sure.
    assert g1.everywhere is not None and g1.everywhere.low < 1.0
    assert g1.on_segments is not None and g1.on_segments.low > 1.0
    assert mix.recommended == mix.options[0].candidate
    assert mix.recommendation.startswith(f"use {mix.recommended} (")
    assert "expected speedup of the mix" in mix.recommendation


def test_the_recommendations_flags_carry_its_cut_off_and_say_it_was_derived() -> None:
    seen: list[tuple[str, Sequence[ScheduleRange] | None]] = []
    only_g2 = [e for e in ENTRIES if e.candidate == "g2"]
    mix = mix_advice(
        _inputs({"general": 0.5, "repetition": 0.5}, only_g2),
        {"g2": "draft_model"},
        serve=_serve(seen),
        cutoff=lambda name, level: ((1, level, 3), (level + 1, None, 0)),
    )
    assert mix.recommended == "g2" and mix.serve == FLAGS
    assert seen == [("g2", ((1, 1, 3), (2, None, 0)))]
    assert mix.serve_note is not None and "not measured as such" in mix.serve_note
    est = mix.options[0].on_segments
    assert est is not None
    # Half the requests at concurrency 2 run off: the mix gain is well below the per-scenario 1.2-1.3x.
    assert 1.0 < est.point < 1.2
    assert [c.enabled for c in est.cells] == [True, False, True, False]


def test_nothing_surely_faster_for_the_mix_keeps_the_baseline() -> None:
    losing = [e for e in ENTRIES if e.candidate == "g1" and e.workload == "general"]
    mix = mix_advice(
        _inputs({"general": 1.0}, losing), {"g1": "ngram"}, serve=_serve([]), cutoff=lambda name, level: None
    )
    assert mix.recommended is None and mix.serve is None
    assert mix.recommendation.startswith("keep the target-only baseline")
    (option,) = mix.options
    assert option.on_segments is None and option.everywhere is not None
    assert option.everywhere.high < 1.0
    assert option.everywhere.point == pytest.approx(1 / (0.4 / 0.95 + 0.6 / 0.9), rel=1e-6)


def test_the_mix_reads_the_speedup_over_every_round() -> None:
    g2 = [e for e in ENTRIES if e.candidate == "g2"]
    # The same decisions, but the rounds disagreed: THE speedup's interval (launch variance in) is wide.
    wide = [e.model_copy(update={"speedup": _speedup(1.3, 0.8, 2.1)}) if e.concurrency == 1 else e for e in g2]
    narrow_mix, wide_mix = (
        mix_advice(_inputs({"repetition": 1.0}, e), {"g2": "draft_model"}, serve=_serve([]), cutoff=lambda n, lv: None)
        for e in (g2, wide)
    )
    narrow, spread = narrow_mix.options[0].on_segments, wide_mix.options[0].on_segments
    assert narrow is not None and spread is not None
    assert narrow.low > 1.0 and narrow_mix.recommended == "g2"
    assert spread.low < 1.0 < spread.high and wide_mix.recommended is None
