"""The hand-off's answer for a traffic mix: the best single configuration first (one candidate on every request, or
the baseline), then routing -- where each candidate is enabled (workloads, a concurrency cut-off), its mix speedup
with the propagated interval and its gain over the single configuration -- and their serve flags."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from specselect._artifacts.handoff.mix import MixInputs, mix_advice
from specselect._core.decision import Confidence, DecisionResult, SpeedupInterval, Thresholds
from specselect._core.pairing import PairEvidence
from specselect._core.status import Decision, EvidenceStatus
from specselect._plan.traffic import TrafficConfig
from specselect._report.console import mix_closing_lines
from specselect.records.evidence.mix import MixPolicy
from specselect.records.evidence.result import EvidencePolicy, ScenarioEvidence
from specselect.records.evidence.rounds import RoundEstimate
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.handoff import Handoff
from specselect.records.proposals import ScheduleRange
from specselect.records.results import EvidenceFile
from specselect.records.server import ServeFlags

FLAGS = ServeFlags(engine_kind="vllm", engine_version="0.32.0+cpu", program=("python",), args=("--model", "m"))


def _speedup(point: float, low: float, high: float) -> RoundEstimate:
    """THE speedup of a scenario as the pipeline writes it (what the mix reads)."""
    return RoundEstimate.model_construct(point=point, low=low, high=high, level=0.95, df=None)


def _entry(
    candidate: str,
    workload: str,
    level: int,
    decision: Decision,
    speedup: tuple[float, float, float],
    checks: dict[str, bool | None] | None = None,
) -> ScenarioEvidence:
    point, low, high = speedup
    interval = SpeedupInterval(low=low, high=high, level=0.95, method="m", point=point, launch_variance_included=True)
    result = DecisionResult.model_construct(
        decision=decision,
        reason="accepted" if decision is Decision.ACCEPT else "below_min_speedup",
        policy=Thresholds(),
        checks=checks or {},
        failed_checks=(),
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
    # Routing: ngram on repetition only is the surest gain; but clearly slower on general, it cannot serve every
    # request, so the single configuration is the draft model everywhere, the first answer.
    assert mix.routing is not None and mix.routing.candidate == mix.options[0].candidate == "g1"
    assert g1.single_excluded is not None
    assert g1.single_excluded.startswith("clearly slower than the baseline on general: 0.92x [")
    assert mix.single is not None and mix.single.eligible == ("g2",) and mix.recommended == "g2"
    assert mix.recommendation.startswith("use g2 (draft_model) on every request: expected speedup of the mix 1.05x")


def test_the_recommendations_flags_carry_its_cut_off_and_say_it_was_derived() -> None:
    seen: list[tuple[str, Sequence[ScheduleRange] | None]] = []
    only_g2 = [e for e in ENTRIES if e.candidate == "g2"]
    mix = mix_advice(
        _inputs({"general": 0.5, "repetition": 0.5}, only_g2),
        {"g2": "draft_model"},
        serve=_serve(seen),
        cutoff=lambda name, level: ((1, level, 3), (level + 1, None, 0)),
    )
    # First the single configuration's flags (every request, no cut-off), then the routed one's, cut off at 1.
    assert mix.recommended == "g2" and mix.serve == FLAGS and mix.serve_note is None
    assert seen == [("g2", ((1, 1, 3), (2, None, 0))), ("g2", None)]
    assert mix.routing is not None and mix.routing.serve == FLAGS
    assert mix.routing.serve_note is not None and "not measured as such" in mix.routing.serve_note
    est = mix.routing.estimate
    assert est == mix.options[0].on_segments
    # Half the requests at concurrency 2 run off: the mix gain is well below the per-scenario 1.2-1.3x.
    assert 1.0 < est.point < 1.2
    assert [c.enabled for c in est.cells] == [True, False, True, False]


def test_nothing_surely_faster_for_the_mix_keeps_the_baseline() -> None:
    losing = [e for e in ENTRIES if e.candidate == "g1" and e.workload == "general"]
    seen: list[tuple[str, Sequence[ScheduleRange] | None]] = []
    mix = mix_advice(
        _inputs({"general": 1.0}, losing), {"g1": "ngram"}, serve=_serve(seen), cutoff=lambda name, level: None
    )
    assert mix.recommended is None and mix.routing is None
    # The first answer is the target alone, and the line to deploy is the baseline's own.
    assert mix.serve == FLAGS and seen == [("g0_target_only", None)]
    assert mix.recommendation.startswith(
        "keep the target-only baseline on every request: no candidate can serve every request "
        "(g1: clearly slower than the baseline on general"
    )
    assert mix.routing_note == "none: no candidate was accepted in any scenario of the mix"
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
    assert narrow.low > 1.0 and narrow_mix.routing is not None
    assert spread.low < 1.0 < spread.high and wide_mix.routing is None
    # On every request it is still the best point (1.10x), but no longer told apart from the baseline.
    assert narrow_mix.single is not None and narrow_mix.single.faster_than_baseline
    assert wide_mix.single is not None and not wide_mix.single.faster_than_baseline
    assert wide_mix.recommended == "g2"
    assert wide_mix.recommendation.endswith("not distinguishable from the target-only baseline at this level")


def _one_level(workloads: dict[str, float], entries: Sequence[ScenarioEvidence]) -> MixInputs:
    traffic = TrafficConfig(workloads=workloads)
    seconds = {("general", 1): 2.0, ("repetition", 1): 1.0}
    return MixInputs(traffic, [1], _evidence(entries), seconds, MixPolicy(n_draws=4000))


# The default run's shape: n-gram wins big on the copy task (accepted) and is not measurably worse on chat (tune).
DEFAULT_RUN = [
    _entry("g1_ngram", "repetition", 1, ACCEPT, (2.75, 2.31, 3.26)),
    _entry("g1_ngram", "general", 1, TUNE, (1.07, 0.92, 1.25)),
]


def test_one_candidate_on_every_request_comes_first_and_routing_second_with_its_gain() -> None:
    seen: list[tuple[str, Sequence[ScheduleRange] | None]] = []
    mix = mix_advice(
        _one_level({"general": 0.7, "repetition": 0.3}, DEFAULT_RUN),
        {"g1_ngram": "ngram"},
        serve=_serve(seen),
        cutoff=lambda name, level: None,
    )
    single, routing = mix.single, mix.routing
    assert single is not None and single.candidate == mix.recommended == "g1_ngram"
    assert single.estimate is not None and single.faster_than_baseline and single.estimate.low > 1.0
    assert mix.recommendation.startswith("use g1_ngram (ngram) on every request: expected speedup of the mix 1.2")
    assert mix.recommendation.endswith("faster than the target-only baseline")
    # Routing n-gram to the copy task only and chat to the baseline gives up chat's small gain: a ratio below 1.
    assert routing is not None and routing.candidate == "g1_ngram" and routing.gain is not None
    assert routing.estimate.point < single.estimate.point
    assert routing.gain.point == pytest.approx(routing.estimate.point / single.estimate.point)
    assert routing.gain.low <= routing.gain.point < 1.0 < routing.gain.high
    assert routing.recommendation.startswith(
        "g1_ngram (ngram) on repetition (30% of requests) at concurrency 1, and the target-only baseline on "
        "general (70%), two server pools and a router: expected speedup of the mix"
    )
    assert "not distinguishable from g1_ngram on every request: 0." in routing.recommendation
    assert mix.serve == FLAGS and ("g1_ngram", None) in seen


def test_the_routed_gain_is_paired_on_the_same_draws_as_the_single_configuration() -> None:
    # The copy task's gain is uncertain (few items), chat's small and well measured.
    entries = [
        _entry("g1", "repetition", 1, ACCEPT, (2.75, 1.8, 4.2)),
        _entry("g1", "general", 1, TUNE, (1.05, 1.0, 1.1)),
    ]
    mix = mix_advice(
        _one_level({"general": 0.7, "repetition": 0.3}, entries),
        {"g1": "ngram"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    assert mix.single is not None and mix.single.estimate is not None
    assert mix.routing is not None and mix.routing.gain is not None
    single, routed, gain = mix.single.estimate, mix.routing.estimate, mix.routing.gain
    # Both mixes share the copy task's draw, so its uncertainty cancels: the gain is far narrower than the two
    # intervals set against each other (the ratio they allow if unpaired), and it tells routing apart as slower.
    unpaired = math.log(routed.high / single.low) - math.log(routed.low / single.high)
    assert math.log(gain.high / gain.low) < 0.6 * unpaired
    assert routed.high > single.low and gain.high < 1.0 and gain.distinguishable
    assert "slower than g1 on every request: 0.9" in mix.routing.recommendation


def test_a_candidate_clearly_slower_on_one_workload_is_not_the_single_configuration() -> None:
    entries = [
        # 5x on the copy task but clearly slower on chat: the highest whole-mix point, and still not chosen.
        _entry("g1", "repetition", 1, ACCEPT, (5.0, 4.5, 5.5)),
        _entry("g1", "general", 1, TUNE, (0.9, 0.85, 0.95)),
        _entry("g2", "repetition", 1, TUNE, (1.1, 1.0, 1.2)),
        _entry("g2", "general", 1, TUNE, (1.1, 1.0, 1.2)),
    ]
    mix = mix_advice(
        _one_level({"general": 0.5, "repetition": 0.5}, entries),
        {"g1": "ngram", "g2": "draft_model"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    options = {o.candidate: o for o in mix.options}
    g1, g2 = options["g1"].everywhere, options["g2"].everywhere
    assert g1 is not None and g2 is not None and g1.point > g2.point
    assert options["g1"].single_excluded is not None
    assert options["g1"].single_excluded.startswith("clearly slower than the baseline on general: 0.90x [0.8")
    assert mix.single is not None and mix.single.candidate == "g2" and mix.single.eligible == ("g2",)
    # Routing can still send the copy task to n-gram, measured against g2 on every request.
    assert mix.routing is not None and mix.routing.candidate == "g1" and mix.routing.gain is not None
    assert mix.routing.gain.low > 1.0 and "a gain over g2 on every request of" in mix.routing.recommendation


def test_a_candidate_whose_outputs_failed_on_one_workload_leaves_the_baseline() -> None:
    entries = [
        _entry("g1", "repetition", 1, ACCEPT, (2.0, 1.8, 2.2)),
        _entry("g1", "general", 1, Decision.REJECT, (1.5, 1.4, 1.6), checks={"quality_ok": False}),
    ]
    mix = mix_advice(
        _one_level({"general": 0.7, "repetition": 0.3}, entries),
        {"g1": "ngram"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    assert mix.options[0].single_excluded == "its outputs failed the quality check on general-c1 (below_min_speedup)"
    assert mix.single is not None and mix.single.candidate is None and mix.recommended is None
    assert mix.recommendation.startswith("keep the target-only baseline on every request: no candidate can serve")
    assert mix.serve == FLAGS  # the baseline's line: the first answer to deploy
    # The baseline is the single configuration: routing's gain over it is its own mix speedup.
    assert mix.routing is not None and mix.routing.gain is not None
    assert mix.routing.gain.point == pytest.approx(mix.routing.estimate.point)
    assert "a gain over the baseline on every request of" in mix.routing.recommendation


def _everywhere(name: str, speedup: tuple[float, float, float]) -> list[ScenarioEvidence]:
    return [_entry(name, w, 1, TUNE, speedup) for w in ("general", "repetition")]


def test_the_winner_is_chosen_by_its_point_and_said_to_be_apart_from_the_runner_up_only_when_it_is() -> None:
    close = mix_advice(
        _one_level(
            {"general": 0.5, "repetition": 0.5},
            _everywhere("a", (1.3, 1.2, 1.4)) + _everywhere("b", (1.28, 1.18, 1.38)),
        ),
        {"a": "ngram", "b": "suffix"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    assert close.single is not None and close.single.candidate == "a" and close.single.runner_up == "b"
    assert close.single.versus_runner_up is not None and not close.single.versus_runner_up.distinguishable
    assert "next best b on every request (1.28x): a / b 1.02x [" in close.recommendation
    assert close.recommendation.endswith("not distinguishable from it")
    far = mix_advice(
        _one_level(
            {"general": 0.5, "repetition": 0.5},
            _everywhere("a", (1.3, 1.2, 1.4)) + _everywhere("b", (1.02, 0.98, 1.06)),
        ),
        {"a": "ngram", "b": "suffix"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    assert far.single is not None and far.single.versus_runner_up is not None
    assert far.single.versus_runner_up.distinguishable and far.recommendation.endswith("ahead of it")


def test_the_console_closes_with_the_single_configuration_then_routing() -> None:
    mix = mix_advice(
        _one_level({"general": 0.7, "repetition": 0.3}, DEFAULT_RUN),
        {"g1_ngram": "ngram"},
        serve=_serve([]),
        cutoff=lambda name, level: None,
    )
    lines = mix_closing_lines(Handoff.model_construct(mix=mix))
    assert [line.split(": ", 1)[0] for line in lines] == ["traffic mix, one configuration", "traffic mix, routed"]
    assert lines[0] == f"traffic mix, one configuration: {mix.recommendation}"
    assert lines[0].startswith("traffic mix, one configuration: use g1_ngram (ngram) on every request:")
    assert mix.routing is not None and lines[1] == f"traffic mix, routed: {mix.routing.recommendation}"
    assert mix_closing_lines(Handoff.model_construct(mix=None)) == []
