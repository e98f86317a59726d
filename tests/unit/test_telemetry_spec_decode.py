"""Acceptance telemetry on /metrics text and per-request objects recorded from a real vLLM 0.32 CPU server.

Recorded with: n-gram (k=4, prompt_lookup 2..5), served model name `smollm2`, float32, --enforce-eager,
`--per-request-spec-decode-metrics summary`. `before` is the fresh server; `after` follows three repetitive
requests (two non-streaming, one streaming) whose `metrics` objects are in the JSON file; `after_prose`
follows one more prose request (64 tokens). The baseline file is a target-only server after two requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specselect._engines.prometheus import parse_prometheus
from specselect._engines.vllm.telemetry import request_spec_metrics, spec_decode_delta
from specselect.errors import ProtocolError
from specselect.records.telemetry import (
    PerRequestSpecSummary,
    RequestSpecMetrics,
    SpecDecodeCounters,
    SpecTelemetry,
    build_spec_telemetry,
    cross_check,
    summarize_per_request,
)

DATA = Path(__file__).parent / "data"


def load(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def snaps() -> dict[str, Any]:
    return {
        "before": parse_prometheus(load("engine_metrics_ngram_k4_before.txt")),
        "after": parse_prometheus(load("engine_metrics_ngram_k4_after.txt")),
        "prose": parse_prometheus(load("engine_metrics_ngram_k4_after_prose.txt")),
        "baseline": parse_prometheus(load("engine_metrics_baseline.txt")),
    }


@pytest.fixture(scope="module")
def raw_per_request() -> list[dict[str, Any] | None]:
    data: list[dict[str, Any] | None] = json.loads(load("engine_per_request_ngram_k4.json"))
    return data


@pytest.fixture(scope="module")
def per_request(raw_per_request: list[dict[str, Any] | None]) -> list[RequestSpecMetrics | None]:
    """The recorded `metrics` objects as vLLM's session reads them (each was a response's `metrics` field)."""
    return [None if raw is None else request_spec_metrics({"metrics": raw}) for raw in raw_per_request]


def test_parse_keeps_total_and_created_samples_apart(snaps: dict[str, Any]) -> None:
    after = snaps["after"]
    names = after.names()
    assert "vllm:spec_decode_num_drafts_total" in names
    assert "vllm:spec_decode_num_drafts_created" in names
    [total] = after.values("vllm:spec_decode_num_drafts_total", model_name="smollm2")
    assert total.value == 47.0
    assert total.labels == {"engine": "0", "model_name": "smollm2"}


def test_delta_over_three_requests(snaps: dict[str, Any]) -> None:
    delta = spec_decode_delta(snaps["before"], snaps["after"], "smollm2")
    assert delta == SpecDecodeCounters(
        model_name="smollm2",
        exported=True,
        drafts=47,
        draft_tokens=188,
        accepted_tokens=133,
        per_position_accepted=(47, 42, 37, 7),
        style="v1_counters",
    )


def test_delta_of_the_prose_request(snaps: dict[str, Any]) -> None:
    delta = spec_decode_delta(snaps["after"], snaps["prose"], "smollm2")
    assert (delta.drafts, delta.draft_tokens, delta.accepted_tokens) == (14, 55, 18)
    assert delta.per_position_accepted == (7, 4, 4, 3)


def test_other_model_name_or_baseline_is_not_exported(snaps: dict[str, Any]) -> None:
    assert not spec_decode_delta(snaps["before"], snaps["after"], "other-model").exported
    base = spec_decode_delta(snaps["baseline"], snaps["baseline"], "smollm2")
    assert base == SpecDecodeCounters(model_name="smollm2", exported=False)
    telemetry = build_spec_telemetry(base, summarize_per_request([None, None]))
    assert telemetry == SpecTelemetry(source="not_exported")
    assert telemetry.acceptance_rate is None
    assert telemetry.mean_acceptance_length is None
    assert telemetry.mechanism_active is None


def test_counter_reset_is_a_protocol_error(snaps: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="went backwards"):
        spec_decode_delta(snaps["after"], snaps["before"], "smollm2")


def test_per_request_summary_matches_real_keys(raw_per_request: list[dict[str, Any] | None]) -> None:
    extras: list[dict[str, Any]] = [{"metrics": r} for r in raw_per_request if r is not None]
    extras += [{}, {"metrics": {"time_to_first_token_ms": 3.0}}]
    summary = summarize_per_request(request_spec_metrics(e) for e in extras)
    assert summary == PerRequestSpecSummary(
        n_requests=5,
        n_with_metrics=3,
        spec_steps=47,
        draft_tokens=188,
        accepted_tokens=133,
        num_spec_tokens=4,
        per_position_accepted=(47, 42, 37, 7),
    )
    inner_only = summarize_per_request(
        request_spec_metrics({"metrics": r["speculative_decoding"]}) for r in raw_per_request if r
    )
    assert inner_only.accepted_tokens == 133


def test_vllm_reads_its_per_request_counts_into_common_terms(raw_per_request: list[dict[str, Any] | None]) -> None:
    first = next(r for r in raw_per_request if r is not None)["speculative_decoding"]
    read = request_spec_metrics({"metrics": {"speculative_decoding": first}, "prompt_token_ids": None})
    assert read is not None and read.proposal_length == 4
    assert (read.num_draft_tokens, read.num_accepted_draft_tokens) == (
        first["num_draft_tokens"],
        first["num_accepted_draft_tokens"],
    )
    assert read.acceptance_histogram == tuple(first["acceptance_histogram"])


@pytest.mark.parametrize(
    "extras", [{}, {"metrics": None}, {"metrics": {"speculative_decoding": None}}, {"metrics": {"other": 1}}, {"x": 1}]
)
def test_vllm_reader_finds_no_counts(extras: dict[str, Any]) -> None:
    assert request_spec_metrics(extras) is None


def test_a_count_that_is_not_one_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="num_draft_tokens is 'x', expected a count"):
        request_spec_metrics({"metrics": {"num_spec_steps": 3.0, "num_draft_tokens": "x"}})
    read = request_spec_metrics(
        {"metrics": {"num_spec_steps": 3.0, "num_draft_tokens": 8, "mean_acceptance_length": "?"}}
    )
    assert read == RequestSpecMetrics(num_spec_steps=3, num_draft_tokens=8)


def test_both_sources_agree_and_rates(snaps: dict[str, Any], per_request: list[RequestSpecMetrics | None]) -> None:
    delta = spec_decode_delta(snaps["before"], snaps["after"], "smollm2")
    telemetry = build_spec_telemetry(delta, summarize_per_request(per_request))
    assert telemetry.source == "both"
    assert telemetry.cross_check is not None
    assert telemetry.cross_check.agree is True
    assert telemetry.acceptance_rate == pytest.approx(133 / 188)
    assert telemetry.mean_acceptance_length == pytest.approx(1 + 133 / 47)
    assert telemetry.per_position_rates == pytest.approx((1.0, 42 / 47, 37 / 47, 7 / 47))
    assert telemetry.mechanism_active is True
    round_trip = SpecTelemetry.model_validate_json(telemetry.model_dump_json())
    assert round_trip == telemetry


def test_disagreement_is_recorded_and_prometheus_wins(
    snaps: dict[str, Any], per_request: list[RequestSpecMetrics | None]
) -> None:
    delta = spec_decode_delta(snaps["before"], snaps["prose"], "smollm2")  # includes one request more
    summary = summarize_per_request(per_request)
    check = cross_check(delta, summary)
    assert check.agree is False
    assert "draft_tokens: prometheus 243 != per_request 188" in check.details
    telemetry = build_spec_telemetry(delta, summary)
    assert telemetry.draft_tokens == 243
    assert telemetry.cross_check == check


def test_single_sources(snaps: dict[str, Any], per_request: list[RequestSpecMetrics | None]) -> None:
    only_prom = build_spec_telemetry(spec_decode_delta(snaps["before"], snaps["after"], "smollm2"), None)
    assert only_prom.source == "prometheus"
    assert only_prom.cross_check is not None
    assert only_prom.cross_check.agree is None
    only_req = build_spec_telemetry(None, summarize_per_request(per_request))
    assert only_req.source == "per_request"
    assert (only_req.drafts, only_req.accepted_tokens) == (47, 133)


def test_zero_drafts_keeps_rates_null() -> None:
    text = (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{model_name="m"} 0\n'
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 0\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 0\n'
    )
    snap = parse_prometheus(text)
    telemetry = build_spec_telemetry(spec_decode_delta(snap, snap, "m"), None)
    assert telemetry.source == "prometheus"
    assert telemetry.draft_tokens == 0
    assert telemetry.acceptance_rate is None
    assert telemetry.mean_acceptance_length is None
    assert telemetry.mechanism_active is False


def test_v0_style_counters_and_gauges_are_tolerated() -> None:
    def v0(draft: int, accepted: int) -> str:
        return (
            "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n"
            'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.5\n'
            "# TYPE vllm:spec_decode_efficiency gauge\n"
            'vllm:spec_decode_efficiency{model_name="m"} 0.4\n'
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
            f'vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}\n'
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
            f'vllm:spec_decode_num_draft_tokens_total{{model_name="m"}} {draft}\n'
            "# TYPE vllm:spec_decode_num_emitted_tokens_total counter\n"
            'vllm:spec_decode_num_emitted_tokens_total{model_name="m"} 9\n'
        )

    delta = spec_decode_delta(parse_prometheus(v0(10, 4)), parse_prometheus(v0(30, 14)), "m")
    assert delta.style == "v0_counters"
    assert (delta.drafts, delta.draft_tokens, delta.accepted_tokens) == (None, 20, 10)
    telemetry = build_spec_telemetry(delta, None)
    assert telemetry.acceptance_rate == pytest.approx(0.5)
    assert telemetry.mean_acceptance_length is None


def test_engines_are_summed_and_lazy_positions_count_from_zero() -> None:
    before = parse_prometheus(
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 5\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1\n'
    )
    after = parse_prometheus(
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 10\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 7\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 3\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 2\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 1\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 3\n'
    )
    delta = spec_decode_delta(before, after, "m")
    assert (delta.draft_tokens, delta.accepted_tokens) == (12, 4)
    assert delta.per_position_accepted == (3, 1)


def test_bad_inputs() -> None:
    with pytest.raises(ProtocolError, match="not Prometheus text"):
        parse_prometheus("this is {not prometheus\n")
    with pytest.raises(ProtocolError, match="expected a count"):
        request_spec_metrics({"metrics": {"speculative_decoding": {"num_draft_tokens": "many"}}})
    assert parse_prometheus("").samples == ()
