"""`specselect check`'s preparation, before any server starts: which configuration and scenarios it checks, the
plan it measures (reduced to them), its stated cost, and the refusals. (The check against a real engine:
tests/integration/test_handoff_real_engine.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specselect._common.fileio import atomic_write_json
from specselect._plan import load_plan
from specselect._runner.check import check_cost, load_recorded, reduced_plan
from specselect.errors import ResultsError, UsageError
from specselect.records.handoff import Handoff, HandoffCandidate, HandoffGroup, HandoffScenario


def _candidate(name: str, decision: str, speedup: float) -> HandoffCandidate:
    return HandoffCandidate(
        candidate=name,
        family="ngram",
        method="ngram",
        decision=decision,
        reason="accepted" if decision == "accept" else "below_min_speedup",
        confidence="confident",
        throughput_speedup=speedup,
        speedup_low=speedup - 0.1,
        speedup_high=speedup + 0.1,
        ttft_ratio=1.0,
        e2e_p95_ratio=0.5,
        peak_memory_mb=5000.0,
        parity="pass",
        acceptance_rate=0.6,
        mean_acceptance_length=2.0,
        telemetry_source="both",
        speculative_config={"method": "ngram", "num_speculative_tokens": 3},
        proposer_snapshot=None,
    )


def _scenario(level: int, recommended: str | None, *candidates: HandoffCandidate) -> HandoffScenario:
    return HandoffScenario(
        scenario=f"repetition-c{level}",
        workload="repetition",
        concurrency=level,
        candidates=candidates,
        recommended=recommended,
        workload_key="key",
        baseline_seconds=1.5,
    )


def _handoff(tmp_path: Path, *scenarios: HandoffScenario, plan: bool = True, rounds: int = 1) -> Path:
    loaded = load_plan("builtin:cpu-sweep")
    handoff = Handoff(
        label="cpu-sweep",
        plan_hash=loaded.plan_hash,
        engine_kind="vllm",
        engine_version="0.32.0+cpu",
        target_ref="builtin:smollm2-135m",
        target_snapshot="s" * 40,
        rule="r",
        scenarios=scenarios,
        groups=(
            HandoffGroup(
                group="g0_target_only",
                role="baseline",
                family="target_only",
                run_status="completed",
                serve=None,
                startup_s=30.0,
            ),
            HandoffGroup(
                group="g1_ngram.k3",
                role="candidate",
                family="ngram",
                run_status="completed",
                serve=None,
                startup_s=34.0,
            ),
        ),
        plan=loaded.plan.model_dump(mode="json") if plan else None,
        plan_source="builtin:cpu-sweep",
        rounds=rounds,
    )
    run = tmp_path / "results" / "cpu-sweep"
    atomic_write_json(run / "handoff.json", handoff.model_dump(mode="json"))
    return run


K3, K5 = "g1_ngram.k3", "g1_ngram.k5"


def test_the_recommendation_is_checked_only_where_it_was_recommended(tmp_path: Path) -> None:
    run = _handoff(
        tmp_path,
        _scenario(1, K3, _candidate(K3, "accept", 2.0), _candidate(K5, "accept", 1.8)),
        _scenario(2, None, _candidate(K3, "tune", 1.2), _candidate(K5, "tune", 1.1)),
    )
    recorded = load_recorded(run, None)
    assert (recorded.candidate, list(recorded.entries)) == (K3, ["repetition-c1"])
    assert recorded.group is not None and recorded.baseline is not None
    named = load_recorded(run / "handoff.json", K5)
    assert list(named.entries) == ["repetition-c1", "repetition-c2"]  # not recommended anywhere: every scenario


def test_the_plan_measured_now_holds_only_the_candidate_and_its_checked_scenarios(tmp_path: Path) -> None:
    run = _handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0)))
    recorded = load_recorded(run, None)
    loaded = reduced_plan(load_plan("builtin:cpu-sweep"), recorded, repeats=1)
    assert loaded.plan.thresholds.estimand == "frozen_prompts"  # a regression check asks about these prompts
    plan = loaded.plan
    assert [c.name for c in plan.groups] == ["g0_target_only", K3]
    (cand,) = plan.candidates
    assert cand.sweep is None and cand.schedule_of is None and cand.num_speculative_tokens == 3
    assert (plan.run.concurrency, plan.run.repeats, plan.run.parity_pass, plan.run.early_stop) == (
        (1,),
        1,
        "off",
        False,
    )
    assert list(plan.workloads) == ["repetition"] and plan.traffic is None
    assert plan.label == "cpu-sweep-check"
    # As many rounds as the recorded run's first look (cpu-sweep: 2), unless asked for fewer; one look only.
    assert (plan.run.rounds, plan.run.look_rounds) == (2, (2,))
    assert reduced_plan(load_plan("builtin:cpu-sweep"), recorded, repeats=1, rounds=1).plan.run.rounds == 1


def test_a_plan_with_later_looks_and_a_time_budget_is_checked_in_its_first_looks_rounds(tmp_path: Path) -> None:
    # builtin:cpu-smoke sets both; the budget means nothing with one look and would be refused.
    recorded = load_recorded(_handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0))), None)
    loaded = load_plan("builtin:cpu-sweep")
    run = loaded.plan.run.model_copy(update={"rounds": 3, "looks": (3, 4), "sequential_budget_s": 540.0})
    sequential = loaded.model_copy(update={"plan": loaded.plan.model_copy(update={"run": run})})
    plan = reduced_plan(sequential, recorded, repeats=1).plan
    assert (plan.run.rounds, plan.run.looks, plan.run.sequential_budget_s) == (3, (), None)


def test_the_cost_is_stated_from_the_recorded_timings(tmp_path: Path) -> None:
    run = _handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0)))
    cost = check_cost(load_recorded(run, None), {"repetition": 8}, repeats=1, warmup=1)
    # 9 requests a side at 1.5 s on the baseline and 0.75 s on the 2x candidate, after 30 + 34 s of start-up.
    assert (cost.servers, cost.requests) == (2, 18)
    assert cost.measure_s == pytest.approx(9 * 1.5 + 9 * 0.75)
    assert cost.seconds == pytest.approx(64 + 20.25)
    assert cost.line() == (
        "2 server starts (1 round, ~64 s) and 18 requests (~20 s): ~1.4 min, from the recorded run's "
        "timings; the speedup is shown, not judged: 1 round's interval has no launch-to-launch variance "
        "(--rounds 2 judges it)"
    )


def test_the_cost_counts_every_round_and_says_what_one_round_misses(tmp_path: Path) -> None:
    recorded = load_recorded(_handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0)), rounds=2), None)
    two = check_cost(recorded, {"repetition": 8}, repeats=1, warmup=1, rounds=2)
    assert (two.servers, two.requests, two.seconds) == (4, 36, pytest.approx(2 * (64 + 20.25)))
    assert two.line().startswith("4 server starts (2 rounds, ~128 s) and 36 requests")
    assert "not judged" not in two.line()
    one = check_cost(recorded, {"repetition": 8}, repeats=1, warmup=1, rounds=1)
    assert one.line().endswith(
        "; the speedup is shown, not judged: 1 round's interval has no launch-to-launch variance (--rounds 2 judges it)"
    )


def test_nothing_to_check_is_refused_with_the_names_to_choose_from(tmp_path: Path) -> None:
    run = _handoff(tmp_path, _scenario(1, None, _candidate(K3, "tune", 1.0)))
    with pytest.raises(UsageError) as info:
        load_recorded(run, None)
    assert info.value.one_line() == (
        "--candidate: the hand-off recommends no candidate (fix: name the configuration to check with --candidate "
        f"({K3}))"
    )
    with pytest.raises(UsageError, match="g9 has no comparable evidence"):
        load_recorded(run, "g9")


def test_a_hand_off_without_its_plan_or_no_hand_off_at_all_is_refused(tmp_path: Path) -> None:
    old = _handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0)), plan=False)
    with pytest.raises(ResultsError, match="does not record its plan"):
        load_recorded(old, None)
    with pytest.raises(ResultsError, match="no hand-off to check"):
        load_recorded(tmp_path / "nowhere", None)


def test_a_plan_without_the_candidate_is_refused(tmp_path: Path) -> None:
    recorded = load_recorded(_handoff(tmp_path, _scenario(1, K3, _candidate(K3, "accept", 2.0))), None)
    other: Any = load_plan("builtin:cpu-smoke")
    with pytest.raises(UsageError, match=f"has no candidate {K3}"):
        reduced_plan(other, recorded, repeats=1)
