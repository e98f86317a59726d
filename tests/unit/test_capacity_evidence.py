"""A candidate's KV-capacity cost against its baseline, the plan's capacity gate on its decision, and how the report
and closing lines state them (pure: groups and decisions built in memory)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from specselect._core.decision import DecisionResult, Thresholds
from specselect._core.status import Decision, EvidenceStatus
from specselect._evidence.pipeline.capacity import CAPACITY_CHECK, capacity_costs, gate_decision
from specselect._report.capacity_tables import capacity_spec
from specselect._report.trust import capacity_lines
from specselect.records.capacity import KvCapacity, KvLoad, LaunchCapacity
from specselect.records.evidence.capacity import CapacityCost, CapacityPolicy


@dataclass
class Run:
    scenario: str
    kv_load: KvLoad | None = None


@dataclass
class Group:
    group: str
    role: str
    capacity: LaunchCapacity | None
    runs: Sequence[Run] = ()
    track: str | None = None

    def all_scenario_runs(self) -> Sequence[Run]:
        return self.runs


def launch(blocks: int, *, longest: int | None = 300) -> LaunchCapacity:
    """A CPU vLLM launch with 128-token blocks, as the real server on this machine reports them."""
    kv = KvCapacity(tokens=blocks * 128, blocks=blocks, block_size=128, source="cache_config_info")
    return LaunchCapacity(kv=kv, longest_request_tokens=longest)


BASELINE = Group("g0_target_only", "baseline", launch(364))
DRAFT = Group("g2_draft", "candidate", launch(273))
NGRAM = Group("g1_ngram", "candidate", launch(364))


def costs(*groups: Any, **policy: Any) -> dict[str, CapacityCost]:
    return {c.candidate: c for c in capacity_costs([BASELINE, *groups], CapacityPolicy(**policy))}


def test_a_draft_model_costs_the_tokens_its_layers_take_from_the_shared_cache() -> None:
    cost = costs(DRAFT, NGRAM)
    assert cost["g2_draft"].tokens_lost == (364 - 273) * 128
    assert cost["g2_draft"].loss_share == pytest.approx(0.25)
    assert cost["g1_ngram"].tokens_lost == 0
    assert cost["g2_draft"].passed is None  # no gate: the cost is stated, nothing is refused for it


def test_concurrency_is_stated_at_the_plans_length_else_at_the_longest_request_served() -> None:
    assert costs(DRAFT, request_tokens=2048)["g2_draft"].candidate_concurrency == pytest.approx(273 / 16, abs=0.01)
    at_longest = costs(DRAFT)["g2_draft"]
    assert at_longest.request_tokens == 300
    assert at_longest.candidate_concurrency == pytest.approx(273 / 3, abs=0.01)


def test_a_candidate_that_cannot_hold_the_required_concurrency_is_refused_naming_both_numbers() -> None:
    cost = costs(DRAFT, NGRAM, required_concurrency=20, request_tokens=2048)
    assert cost["g1_ngram"].passed is True  # 22.75 >= 20: the same cache as the baseline's
    draft = cost["g2_draft"]
    assert (draft.passed, draft.reason) == (False, "kv_capacity_short")
    assert "holds 17.06 concurrent requests of 2,048 tokens" in draft.detail
    assert "the plan requires 20" in draft.detail


def test_the_largest_acceptable_loss_refuses_a_larger_one_only() -> None:
    assert costs(DRAFT, max_kv_loss=0.3)["g2_draft"].passed is True
    refused = costs(DRAFT, max_kv_loss=0.2)["g2_draft"]
    assert refused.reason == "kv_capacity_loss"
    assert (
        "gives up 25.0% of the baseline's KV cache (11,648 of 46,592 tokens); the plan allows 20.0%" in refused.detail
    )


def test_a_gated_candidate_whose_engine_reported_no_cache_is_not_judged() -> None:
    silent = Group("g3", "candidate", LaunchCapacity(problem="the engine stated no KV-cache size"))
    cost = costs(silent, required_concurrency=4)["g3"]
    assert (cost.passed, cost.reason) == (None, "kv_capacity_unknown")


def test_no_costs_when_no_engine_reported_a_cache() -> None:
    plain = Group("g0_target_only", "baseline", None)
    assert capacity_costs([plain, Group("g1", "candidate", None)], CapacityPolicy(required_concurrency=2)) == ()


def accepted() -> DecisionResult:
    return DecisionResult(
        decision=Decision.ACCEPT,
        reason="all_thresholds_met",
        policy=Thresholds(),
        checks={"quality_ok": True},
        evidence_status=EvidenceStatus.COMPARABLE,
    )


def test_the_gate_turns_an_accept_into_a_reject_with_the_numbers() -> None:
    cost = costs(DRAFT, required_concurrency=20, request_tokens=2048)["g2_draft"]
    gated = gate_decision(accepted(), cost)
    assert (gated.decision, gated.reason) == (Decision.REJECT, "kv_capacity_short")
    assert gated.checks[CAPACITY_CHECK] is False
    assert gated.detail.startswith("kv_capacity: holds 17.06 concurrent requests of 2,048 tokens")


def test_a_passed_gate_records_the_check_and_keeps_the_decision() -> None:
    cost = costs(NGRAM, required_concurrency=20, request_tokens=2048)["g1_ngram"]
    gated = gate_decision(accepted(), cost)
    assert (gated.decision, gated.checks[CAPACITY_CHECK]) == (Decision.ACCEPT, True)


def test_an_unknown_capacity_keeps_an_accept_back() -> None:
    silent = Group("g3", "candidate", LaunchCapacity(problem="no size"))
    gated = gate_decision(accepted(), costs(silent, required_concurrency=4)["g3"])
    assert (gated.decision, gated.reason) == (Decision.TUNE, "kv_capacity_unknown")


def test_without_a_gate_the_decision_is_untouched() -> None:
    assert gate_decision(accepted(), costs(DRAFT)["g2_draft"]) == accepted()


@dataclass
class Evidence:
    """The fields of an `EvidenceFile` the report's capacity table and closing lines read."""

    capacity: tuple[CapacityCost, ...]
    entries: tuple[Any, ...] = ()
    controls: tuple[Any, ...] = field(default_factory=tuple)


def test_the_report_states_each_candidates_cost_and_gate() -> None:
    evidence: Any = Evidence(tuple(costs(DRAFT, NGRAM, required_concurrency=20, request_tokens=2048).values()))
    spec = capacity_spec(evidence)
    assert spec is not None
    rows = {row[0]: row for row in spec.rows}
    assert rows["g2_draft"][2:6] == ("46,592", "34,944", "11,648 (25.0%)", "2,048")
    assert rows["g2_draft"][8].startswith("kv_capacity_short: holds 17.06")
    assert rows["g1_ngram"][8] == "passed"


def test_the_closing_lines_state_the_cost_and_name_preemptions_where_they_appeared_only() -> None:
    full = Run("chat-c16", KvLoad(peak_usage=1.0, preemptions=7, samples=30))
    quiet = Run("chat-c1", KvLoad(peak_usage=0.05, preemptions=0, samples=10))
    draft = Group("g2_draft", "candidate", launch(273), runs=(quiet, full))
    evidence: Any = Evidence(tuple(costs(draft, NGRAM).values()))
    lines = capacity_lines(evidence)  # n-gram costs nothing and preempted nothing: no line
    assert lines == [
        "g2_draft holds 34,944 KV tokens, 11,648 (25.0%) fewer than g0_target_only: 91 requests of 300 tokens at "
        "once (g0_target_only: 121.33)",
        "g2_draft chat-c16: the engine preempted 7 requests (g0_target_only: 0), KV cache at 100% at its peak: at "
        "this concurrency its KV cache (34,944 tokens) is what limits it; compare at a lower concurrency or give "
        "the server more KV cache",
    ]
