"""SGLang acceptance telemetry on /server_info answers and /metrics scrapes.

The answers under data/sglang_* are hand-made in the exact shapes SGLang returns (server arguments,
scheduler info and `internal_states` merged into one object; the older 0.4 shape with the internal state
merged into the top level), not captured from a server: SGLang needs CUDA and cannot run here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from specselect._engines.prometheus import MetricsSnapshot, parse_prometheus
from specselect._engines.sglang.serverinfo import ServerInfoReading, ServerInfoSnapshot, parse_server_info
from specselect._engines.sglang.telemetry import (
    SglangCounterDelta,
    acceptance_from_snapshots,
    acceptance_to_counters,
    acceptance_window,
    sglang_counter_delta,
    sglang_spec_counters,
    to_spec_telemetry,
)
from specselect.errors import ProtocolError
from specselect.records.telemetry import SpecTelemetry, build_spec_telemetry

DATA = Path(__file__).parent / "data"
MODEL = "llama-3.1-8b"
SERVER_INFO_SOURCE = "server_info" in get_args(SpecTelemetry.model_fields["source"].annotation)


def info(name: str) -> ServerInfoReading:
    return parse_server_info(json.loads((DATA / name).read_text()))


def metrics(name: str) -> MetricsSnapshot:
    return parse_prometheus((DATA / name).read_text())


def test_newer_shape_reads_algorithm_budget_and_rank_average() -> None:
    reading = info("sglang_server_info_eagle3_after.json")
    assert reading.version == "0.5.4"
    assert (reading.algorithm, reading.num_steps, reading.eagle_topk, reading.num_draft_tokens) == ("EAGLE3", 3, 1, 4)
    assert reading.decode_log_interval == 40
    assert [s.avg_spec_accept_length for s in reading.states] == [2.9375]
    assert reading.states[0].accept_tokens is None and reading.states[0].verify_steps is None
    assert reading.proposals_per_step == 3


def test_older_top_level_shape_is_one_state() -> None:
    reading = info("sglang_get_server_info_v043.json")
    assert reading.version == "0.4.3"
    assert reading.algorithm == "EAGLE"
    assert [s.avg_spec_accept_length for s in reading.states] == [3.41]
    assert reading.proposals_per_step is None  # eagle_topk 4: a tree


def test_counts_dp_ranks_target_only_and_ngram() -> None:
    counts = info("sglang_server_info_counts_after.json").states[0]
    assert (counts.accept_tokens, counts.verify_steps) == (3900, 1400)
    assert [s.avg_spec_accept_length for s in info("sglang_server_info_dp2.json").states] == [2.4, 2.7]
    target = info("sglang_server_info_target_only.json")
    assert target.algorithm is None and target.states[0].avg_spec_accept_length is None
    assert info("sglang_server_info_ngram_after.json").proposals_per_step is None


def test_reading_never_keeps_the_api_key() -> None:
    answer = json.loads((DATA / "sglang_server_info_eagle3_after.json").read_text())
    answer["api_key"] = "sk-very-secret"
    assert "sk-very-secret" not in parse_server_info(answer).model_dump_json()


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {"internal_states": {"avg_spec_accept_length": 2.0}},
        {"internal_states": ["x"]},
        {"internal_states": [{"avg_spec_accept_length": "2.1"}]},
        {"internal_states": [{"avg_spec_accept_length": -1}]},
        {"speculative_num_steps": True},
    ],
)
def test_malformed_answers_are_protocol_errors(answer: Any) -> None:
    with pytest.raises(ProtocolError, match="/server_info"):
        parse_server_info(answer)


def test_counter_deltas_of_the_served_model() -> None:
    delta = sglang_counter_delta(
        metrics("sglang_metrics_eagle3_before.txt"), metrics("sglang_metrics_eagle3_after.txt"), MODEL
    )
    assert delta == SglangCounterDelta(generation_tokens=10240, verify_calls=3400, requests=40)
    other = sglang_counter_delta(
        metrics("sglang_metrics_eagle3_before.txt"), metrics("sglang_metrics_eagle3_after.txt"), "other"
    )
    assert other == SglangCounterDelta()


def test_counter_going_backwards_means_a_restart() -> None:
    with pytest.raises(ProtocolError, match="restarted"):
        sglang_counter_delta(
            metrics("sglang_metrics_eagle3_after.txt"), metrics("sglang_metrics_eagle3_before.txt"), MODEL
        )


def test_a_nan_counter_is_a_protocol_error_not_a_traceback() -> None:
    before = parse_prometheus('sglang:num_requests_total{model_name="llama-3.1-8b"} 3\n')
    after = parse_prometheus('sglang:num_requests_total{model_name="llama-3.1-8b"} NaN\n')
    with pytest.raises(ProtocolError, match="not a finite count"):
        sglang_counter_delta(before, after, MODEL)


def test_server_info_counts_give_exact_window_numbers() -> None:
    acc = acceptance_window(
        info("sglang_server_info_counts_before.json"), info("sglang_server_info_counts_after.json"), None
    )
    assert acc.source == "server_info_counts" and acc.exact
    # 2900 emitted tokens over 1000 verify steps: 1900 accepted proposals; k = 3 per step.
    assert (acc.drafts, acc.accepted_tokens, acc.draft_tokens) == (1000, 1900, 3000)
    assert acc.mean_acceptance_length == pytest.approx(2.9)
    assert acc.acceptance_rate == pytest.approx(1900 / 3000)
    assert acc.engine_accept_length_before == (2.5,) and acc.engine_accept_length_after == (2.9,)


def test_request_counters_give_the_window_when_server_info_has_only_averages() -> None:
    counters = SglangCounterDelta(generation_tokens=10240, verify_calls=3400, requests=40)
    acc = acceptance_window(
        info("sglang_server_info_eagle3_before.json"), info("sglang_server_info_eagle3_after.json"), counters
    )
    assert acc.source == "prometheus_counters" and not acc.exact
    # One prefill token per request: 10240 - 40 = 10200 emitted by 3400 verify steps.
    assert acc.mean_acceptance_length == pytest.approx(3.0)
    assert (acc.drafts, acc.accepted_tokens, acc.draft_tokens) == (3400, 6800, 10200)
    assert acc.acceptance_rate == pytest.approx(6800 / 10200)
    assert any("slightly low" in n for n in acc.notes)


def test_both_sources_are_cross_checked() -> None:
    counters = SglangCounterDelta(generation_tokens=2940, verify_calls=1000, requests=40)
    acc = acceptance_window(
        info("sglang_server_info_counts_before.json"), info("sglang_server_info_counts_after.json"), counters
    )
    assert acc.source == "server_info_counts"
    assert acc.cross_check is not None and acc.cross_check.agree is True
    far = SglangCounterDelta(generation_tokens=5040, verify_calls=1000, requests=40)
    checked = acceptance_window(
        info("sglang_server_info_counts_before.json"), info("sglang_server_info_counts_after.json"), far
    )
    assert checked.cross_check is not None and checked.cross_check.agree is False


def test_two_cumulative_averages_give_no_window_value() -> None:
    acc = acceptance_window(
        info("sglang_server_info_eagle3_before.json"), info("sglang_server_info_eagle3_after.json"), None
    )
    assert acc.source == "none"
    assert acc.mean_acceptance_length is None and acc.drafts is None and acc.acceptance_rate is None
    assert acc.reason is not None and "server-cumulative" in acc.reason
    # SGLang's own numbers are still recorded, with their definition.
    assert acc.engine_accept_length_before == (2.8125,) and acc.engine_accept_length_after == (2.9375,)
    assert "bonus token included" in acc.definition


def test_average_from_a_fresh_server_is_the_window_value_as_is() -> None:
    acc = acceptance_window(
        info("sglang_server_info_eagle3_fresh.json"), info("sglang_server_info_eagle3_after.json"), None
    )
    assert acc.source == "server_info_average"
    # SGLang's accept length already counts the bonus token: the common mean is the same number, not + 1.
    assert acc.mean_acceptance_length == 2.9375
    assert acc.acceptance_rate == pytest.approx((2.9375 - 1) / 3)
    assert acc.drafts is None and acc.accepted_tokens is None
    assert any("decode_log_interval (40)" in n for n in acc.notes)


def test_dp_ranks_with_averages_only_cannot_be_combined() -> None:
    acc = acceptance_window(info("sglang_server_info_eagle3_fresh.json"), info("sglang_server_info_dp2.json"), None)
    assert acc.source == "none" and acc.reason is not None and "ranks" in acc.reason


def test_target_only_and_tree_drafting() -> None:
    target = info("sglang_server_info_target_only.json")
    acc = acceptance_window(target, target, None)
    assert acc.source == "none" and acc.reason == "target-only server: no speculative algorithm"
    counters = SglangCounterDelta(generation_tokens=1010, verify_calls=300, requests=10)
    tree = acceptance_window(None, info("sglang_server_info_ngram_after.json"), counters)
    assert tree.mean_acceptance_length == pytest.approx(1000 / 300)
    assert tree.draft_tokens is None and tree.acceptance_rate is None
    assert any("tree drafting" in n for n in tree.notes)


def test_no_verify_step_means_speculation_did_not_run() -> None:
    counters = SglangCounterDelta(generation_tokens=100, verify_calls=0, requests=10)
    acc = acceptance_window(None, info("sglang_server_info_eagle3_after.json"), counters)
    assert (acc.drafts, acc.accepted_tokens, acc.draft_tokens, acc.mean_acceptance_length) == (0, 0, 0, None)
    assert to_spec_telemetry(acc).mechanism_active is False


def eagle3_snapshot(when: str) -> ServerInfoSnapshot:
    """/metrics and /server_info of the EAGLE-3 server `before` or `after` its window."""
    return ServerInfoSnapshot(
        samples=metrics(f"sglang_metrics_eagle3_{when}.txt").samples,
        server_info=info(f"sglang_server_info_eagle3_{when}.json"),
    )


def test_inconsistent_counters_are_not_used() -> None:
    counters = SglangCounterDelta(generation_tokens=50, verify_calls=300, requests=10)
    acc = acceptance_window(
        info("sglang_server_info_eagle3_before.json"), info("sglang_server_info_eagle3_after.json"), counters
    )
    assert acc.source == "none"
    assert any("inconsistent counters" in n for n in acc.notes)


def test_snapshots_carry_server_info_and_counters() -> None:
    before, after = eagle3_snapshot("before"), eagle3_snapshot("after")
    acc = acceptance_from_snapshots(before, after, MODEL)
    assert acc.source == "prometheus_counters" and acc.mean_acceptance_length == pytest.approx(3.0)
    plain = acceptance_from_snapshots(MetricsSnapshot(), MetricsSnapshot(), MODEL)
    assert plain.source == "none" and plain.reason == "no /server_info answer and no counters were read"


def test_common_telemetry_uses_the_shared_definitions() -> None:
    counters = SglangCounterDelta(generation_tokens=10240, verify_calls=3400, requests=40)
    acc = acceptance_window(None, info("sglang_server_info_eagle3_after.json"), counters)
    common = to_spec_telemetry(acc)
    assert common.source == "prometheus"
    assert (common.drafts, common.accepted_tokens, common.draft_tokens) == (3400, 6800, 10200)
    # The same definition vLLM's numbers use: 1 + accepted / drafts.
    assert common.mean_acceptance_length == pytest.approx(1 + common.accepted_tokens / common.drafts)
    assert common.acceptance_rate == pytest.approx(6800 / 10200)
    assert common.mechanism_active is True


def test_server_info_numbers_in_the_common_record() -> None:
    acc = acceptance_window(
        info("sglang_server_info_counts_before.json"), info("sglang_server_info_counts_after.json"), None
    )
    common = to_spec_telemetry(acc)
    if SERVER_INFO_SOURCE:
        assert common.source == "server_info" and common.mean_acceptance_length == pytest.approx(2.9)
    else:  # until SpecTelemetry has the `server_info` source, the numbers stay in SglangAcceptance
        assert common.source == "not_exported" and common.mean_acceptance_length is None
    none = to_spec_telemetry(acceptance_window(info("sglang_server_info_eagle3_before.json"), None, None))
    assert none.source == "not_exported" and none.drafts is None


def test_counter_reader_for_attached_endpoints() -> None:
    before, after = metrics("sglang_metrics_eagle3_before.txt"), metrics("sglang_metrics_eagle3_after.txt")
    counters = sglang_spec_counters(before, after, MODEL)
    assert counters.exported and (counters.drafts, counters.accepted_tokens, counters.draft_tokens) == (
        3400,
        6800,
        None,
    )
    common = build_spec_telemetry(counters, None)
    assert common.source == "prometheus" and common.mean_acceptance_length == pytest.approx(3.0)
    assert common.acceptance_rate is None  # the verify width is only in /server_info
    assert not sglang_spec_counters(before, after, "other-model").exported


def test_counter_shape_keeps_the_verify_width_from_server_info() -> None:
    before, after = eagle3_snapshot("before"), eagle3_snapshot("after")
    counters = acceptance_to_counters(acceptance_from_snapshots(before, after, MODEL), MODEL)
    assert (counters.drafts, counters.accepted_tokens, counters.draft_tokens) == (3400, 6800, 10200)
    assert build_spec_telemetry(counters, None).acceptance_rate == pytest.approx(6800 / 10200)
    average_only = acceptance_window(
        info("sglang_server_info_eagle3_fresh.json"), info("sglang_server_info_eagle3_after.json"), None
    )
    assert not acceptance_to_counters(average_only, MODEL).exported


def test_plugs_into_the_attached_endpoint_engine() -> None:
    from specselect._engines.openai.engine import OpenAIEndpointEngine

    engine = OpenAIEndpointEngine(spec_readers={"sglang": sglang_spec_counters})
    before, after = metrics("sglang_metrics_eagle3_before.txt"), metrics("sglang_metrics_eagle3_after.txt")
    counters = engine.spec_counters(before, after, MODEL)
    assert counters.exported and counters.drafts == 3400
