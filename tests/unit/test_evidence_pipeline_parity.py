"""The logprob parity pass classifies first divergences; other traffic, a speculating baseline and declared
memory change the pair's evidence as documented."""

from __future__ import annotations

from typing import Any

import pytest
from test_evidence_pipeline_tracks import KEY, TOKENS, Store, candidate_run, evidence, group, records, scenario_run

from specselect._evidence.parity import pass_logprobs
from specselect._evidence.pipeline import CONTAMINATION_RULE, MISSING_UNCONTAMINATED
from specselect.records.endpoints import IdleWindow, TrafficCheck
from specselect.records.evidence.result import ParityPassPolicy
from specselect.records.host import HostLoad
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import SpecTelemetry

PASS = f"{KEY.name}.parity"
FLAT = (-0.1, -5.0)
"""A confident position: top-2 gap 4.9 nats."""


def diverged(at: int) -> dict[str, list[int]]:
    """Candidate tokens: item `a` takes another token at position `at`."""
    out = {k: list(v) for k, v in TOKENS.items()}
    out["a"][at] = 999
    return out


def pass_records(*, gap_at_2: tuple[float, float], tokens: dict[str, list[int]] | None = None) -> list[RequestRecord]:
    lp = {item: [FLAT, FLAT, gap_at_2, FLAT, FLAT] for item in TOKENS}
    return records(PASS, e2e=1.0, repeats=1, tokens=tokens, logprobs=lp)


def run(
    cand_tokens: dict[str, list[int]],
    *,
    base_pass: list[RequestRecord] | None = None,
    cand_pass: list[RequestRecord] | None = None,
    host_limit: float | None = None,
    **cand_extra: Any,
) -> Any:
    store: Store = {
        ("g0_target_only", KEY.name): records(KEY.name, e2e=1.0),
        ("g1", KEY.name): records(KEY.name, e2e=0.6, tokens=cand_tokens),
    }
    passes = {"g0_target_only": base_pass, "g1": cand_pass}
    groups = [
        group(
            "g0_target_only",
            track="g0_target_only",
            snapshot="s",
            run=scenario_run(store[("g0_target_only", KEY.name)]),
        ),
        group("g1", track="g0_target_only", snapshot="s", run=candidate_run(store[("g1", KEY.name)], **cand_extra)),
    ]
    policy = ParityPassPolicy(mode="auto", ran=True, near_tie_threshold_nats=0.1, rule="r")
    ev = evidence(
        groups,
        store,
        parity_passes=passes,
        parity_pass=policy,
        host_foreign_cpu_share_limit=host_limit,
    )
    return ev, ev.entries[0]


def test_without_logprobs_a_mismatch_on_a_self_consistent_baseline_is_a_quality_failure() -> None:
    _, entry = run(diverged(2))
    assert entry.parity.verdict.value == "fail"
    assert entry.decision.decision.value == "reject"
    assert entry.parity_pass is None


def test_a_near_tie_at_the_divergence_makes_parity_inconclusive_not_failed() -> None:
    ev, entry = run(
        diverged(2),
        base_pass=pass_records(gap_at_2=(-0.70, -0.72)),
        cand_pass=pass_records(gap_at_2=FLAT, tokens=diverged(2)),
    )
    divergences = entry.parity.divergences
    assert {(d.item_id, d.classification, d.attribution) for d in divergences} == {("a", "near_tie", "near_tie")}
    assert all(d.logprob_gap_nats == pytest.approx(0.02) for d in divergences)
    assert entry.parity.verdict.value == "inconclusive"
    assert entry.parity.policy.near_tie_threshold_nats == 0.1
    # Quality unknown -> incomplete evidence -> tune (collect evidence), never a reject for numerics.
    assert entry.evidence.evidence_status.value == "incomplete"
    assert entry.decision.decision.value == "tune"
    # The untimed pass itself compares baseline and candidate at concurrency 1, divergence classified.
    assert entry.parity_pass is not None
    (d,) = entry.parity_pass.divergences
    assert (d.item_id, d.repeat, d.classification) == ("a", 0, "near_tie")
    assert ev.policy.parity_pass is not None and ev.policy.parity_pass.near_tie_threshold_nats == 0.1


def test_a_clear_gap_at_the_divergence_is_a_real_difference() -> None:
    _, entry = run(diverged(2), base_pass=pass_records(gap_at_2=(-0.05, -3.0)))
    assert {d.classification for d in entry.parity.divergences} == {"real_difference"}
    assert entry.parity.verdict.value == "fail"
    assert entry.decision.decision.value == "reject"


def test_logprobs_of_a_pass_that_took_another_path_before_the_divergence_are_not_used() -> None:
    # The baseline's parity pass itself left the timed tokens at position 1: its position-2 logprobs
    # describe another continuation and must not classify the timed divergence at 2.
    other = diverged(1)
    _, entry = run(diverged(2), base_pass=pass_records(gap_at_2=(-0.70, -0.72), tokens=other))
    assert {d.classification for d in entry.parity.divergences} == {None}
    assert entry.parity.verdict.value == "fail"


def test_pass_logprobs_are_cut_after_the_first_position_where_the_pass_differs() -> None:
    timed = {("a", 0): [1, 2, 3, 4], ("a", 1): [1, 2, 3, 4], ("b", 0): "text"}
    lp = [(-0.1, -0.2), (-0.3, -0.4), (-0.5, -0.6), (-0.7, -0.8)]
    pass_recs = records(PASS, e2e=1.0, repeats=1, tokens={**TOKENS, "a": [1, 2, 9, 4]}, logprobs={"a": lp})
    got = pass_logprobs(timed, pass_recs)
    assert set(got) == {("a", 0), ("a", 1)}
    assert got[("a", 0)] == [[-0.1, -0.2], [-0.3, -0.4], [-0.5, -0.6]]


def _traffic(status: str) -> TrafficCheck:
    moved = {"vllm:request_success": 3.0} if status == "contaminated" else {}
    return TrafficCheck(
        status=status,  # type: ignore[arg-type]
        reason="other traffic on the endpoint: idle 1 s gap before the scenario: vllm:request_success 3"
        if moved
        else "no counter moved while specselect was idle",
        idle_before=IdleWindow(gap_s=1.0, moved=moved),
        idle_after=IdleWindow(gap_s=1.0, moved={}),
        requests_sent=8,
        requests_finished=8,
    )


def test_other_traffic_makes_comparable_evidence_incomplete_with_the_reason() -> None:
    ev, entry = run(TOKENS, traffic=_traffic("contaminated"))
    assert entry.evidence.evidence_status.value == "incomplete"
    assert entry.evidence.missing_evidence == (MISSING_UNCONTAMINATED,)
    assert entry.evidence.missing_detail == (f"candidate.{MISSING_UNCONTAMINATED}",)
    assert entry.contamination and entry.contamination[0].startswith("candidate: other traffic on the endpoint")
    assert entry.decision.decision.value == "tune"
    assert ev.policy.contamination_rule == CONTAMINATION_RULE


def test_other_traffic_keeps_the_quality_verdict_since_outputs_do_not_depend_on_it() -> None:
    _, clean = run(TOKENS, traffic=_traffic("clean"))
    _, busy = run(TOKENS, traffic=_traffic("contaminated"))
    assert busy.evidence.throughput_speedup is None and clean.evidence.throughput_speedup is not None
    assert (busy.evidence.quality_ok, busy.evidence.quality_check) == (True, "exact_output")
    assert (busy.evidence.quality_ok, busy.evidence.quality_check) == (
        clean.evidence.quality_ok,
        clean.evidence.quality_check,
    )


def test_a_clean_traffic_check_changes_nothing() -> None:
    ev, entry = run(TOKENS, traffic=_traffic("clean"))
    assert entry.evidence.evidence_status.value == "comparable" and entry.contamination == ()
    assert ev.policy.contamination_rule == CONTAMINATION_RULE


def _host(share: float) -> HostLoad:
    return HostLoad(
        wall_s=10.0,
        logical_cpus=2,
        host_busy_cpu_s=20.0,
        own_cpu_s=20.0 - share * 20.0,
        foreign_cpu_s=share * 20.0,
        foreign_share=share,
    )


def test_a_busy_host_makes_the_pair_incomplete_and_a_quiet_one_changes_nothing() -> None:
    ev, busy = run(TOKENS, host_limit=0.25, host_load=_host(0.4))
    assert busy.evidence.evidence_status.value == "incomplete"
    assert busy.evidence.missing_detail == (f"candidate.{MISSING_UNCONTAMINATED}",)
    assert busy.contamination == (
        f"candidate: host busy: 40.0% of all CPU time went to other processes during {KEY.name} (round 1) "
        "(limit 25.0%)",
    )
    assert busy.decision.decision.value == "tune" and busy.decision.reason == "incomplete_evidence"
    assert ev.policy.contamination_rule == CONTAMINATION_RULE and ev.policy.host_foreign_cpu_share_limit == 0.25
    _, quiet = run(TOKENS, host_limit=0.25, host_load=_host(0.05))
    assert quiet.evidence.evidence_status.value == "comparable" and quiet.contamination == ()
    _, unchecked = run(TOKENS, host_limit=None, host_load=_host(0.9))  # the plan turned the check off
    assert unchecked.evidence.evidence_status.value == "comparable"


def test_runs_without_traffic_checks_state_no_contamination_rule() -> None:
    ev, entry = run(TOKENS)
    assert entry.evidence.evidence_status.value == "comparable"
    assert ev.policy.contamination_rule is None


def test_declared_memory_is_used_when_nothing_was_sampled_and_missing_memory_is_incomplete() -> None:
    _, entry = run(TOKENS, peak_memory=None, declared_peak_memory_mb=1234.0, peak_memory_source="declared")
    assert entry.evidence.evidence_status.value == "comparable"
    assert entry.evidence.candidate_peak_memory_mb == 1234.0
    _, entry = run(TOKENS, peak_memory=None, peak_memory_source="not_available")
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "candidate.peak_memory_mb" in entry.evidence.missing_detail


def test_a_baseline_whose_engine_reports_proposals_is_not_target_only() -> None:
    store: Store = {
        ("g0_target_only", KEY.name): records(KEY.name, e2e=1.0),
        ("g1", KEY.name): records(KEY.name, e2e=0.6),
    }
    spec = SpecTelemetry(source="prometheus", drafts=3, draft_tokens=9, accepted_tokens=4)
    groups = [
        group(
            "g0_target_only",
            track="g0_target_only",
            snapshot="s",
            run=scenario_run(store[("g0_target_only", KEY.name)], telemetry=spec),
        ),
        group("g1", track="g0_target_only", snapshot="s", run=candidate_run(store[("g1", KEY.name)])),
    ]
    entry = evidence(groups, store).entries[0]
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "target_only_execution_path" in entry.evidence.missing_evidence
