"""Pure tests of stream decoding, per-request latencies and the scenario summary (no server)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from specselect._engines.vllm.telemetry import request_spec_metrics
from specselect._measure import decode_tok_s, e2e_ms, itl_ms, stats_of, summarize, tpot_ms, ttft_ms
from specselect._measure.client import RawExchange
from specselect._measure.requestplan import PlannedRequest
from specselect._measure.stream import build_record, split_events
from specselect.records.measurement import CacheSaltPolicy, ErrorKind, LoadShape, RequestRecord, ScenarioSpec
from specselect.records.telemetry import RequestSpecMetrics, SpecMetricsReader


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chat(content: str | None, *, role: bool = False, usage: int | None = None, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {"content": content}
    obj: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": usage, "total_tokens": 7 + usage}
    return _sse(obj)


def _raw(reads: list[tuple[float, bytes]], *, send: float = 10.0, end: float | None = None) -> RawExchange:
    planned = PlannedRequest("s:r0:a", "a", 0, False, None, b"{}")
    return RawExchange(planned, send_time=send, end_time=end or reads[-1][0], status=200, reads=reads)


def _record(
    reads: list[tuple[float, bytes]], api: str = "chat", read_spec_metrics: SpecMetricsReader | None = None, **kw: Any
) -> RequestRecord:
    return build_record(
        _raw(reads, **kw),
        scenario="s",
        api=api,  # type: ignore[arg-type]
        t0=10.0,
        read_spec_metrics=read_spec_metrics,
    )


def test_an_event_split_across_reads_gets_the_time_of_the_read_that_completed_it() -> None:
    line = _chat("hello", usage=1)
    reads = [(10.1, _chat(None, role=True, usage=0) + line[:9]), (10.2, line[9:]), (10.3, b"data: [DONE]\n\n")]
    rec = _record(reads)
    assert rec.error is None
    assert rec.chunk_times_s == pytest.approx([0.2])  # the role-only chunk is not a token
    assert rec.first_token_time_s == pytest.approx(0.2)
    assert rec.output_text == "hello"


def test_tokens_per_chunk_come_from_cumulative_usage_and_completion_tokens_from_the_last_usage() -> None:
    reads = [
        (10.05, _chat(None, role=True, usage=0)),
        (10.10, _chat("a b c", usage=3)),
        (10.20, _chat("d e", usage=5)),
        (10.30, _chat("", usage=6, finish="stop")),  # e.g. EOS: no text but one token
        (10.31, _sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 6}}) + b"data: [DONE]\n\n"),
    ]
    rec = _record(reads)
    assert rec.chunk_tokens == [3, 2, 1]
    assert rec.completion_tokens == 6
    assert rec.prompt_tokens == 7
    assert rec.finish_reason == "stop"
    assert ttft_ms(rec) == pytest.approx(100.0)
    assert e2e_ms(rec) == pytest.approx(310.0)
    assert tpot_ms(rec) == pytest.approx((310.0 - 100.0) / 5)
    assert decode_tok_s(rec) == pytest.approx(5 / 0.21)
    assert itl_ms(rec) == pytest.approx([100.0, 100.0])


def test_without_per_chunk_usage_chunk_tokens_are_null_and_only_final_usage_counts() -> None:
    final = _sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}})
    reads = [(10.1, _chat("abc")), (10.2, _chat("def")), (10.3, final + b"data: [DONE]\n\n")]
    rec = _record(reads)
    assert rec.chunk_tokens == [None, None]
    assert rec.completion_tokens == 9


def test_token_ids_give_tokens_per_chunk_and_output_ids() -> None:
    chunk = {"choices": [{"index": 0, "text": " x y", "token_ids": [5, 6], "finish_reason": None}]}
    reads = [(10.1, _sse(chunk)), (10.2, b"data: [DONE]\n\n")]
    rec = _record(reads, api="completions")
    assert rec.chunk_tokens == [2]
    assert rec.output_token_ids == [5, 6]
    assert rec.completion_tokens is None
    assert tpot_ms(rec) is None


def test_spec_metrics_and_logprobs_are_kept() -> None:
    spec = {"speculative_decoding": {"num_draft_tokens": 12, "num_accepted_draft_tokens": 6}}
    lp = {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "a", "logprob": -0.1}]}]}
    first = {"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": lp, "finish_reason": "length"}]}
    final = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "metrics": spec}
    rec = _record([(10.1, _sse(first)), (10.2, _sse(final) + b"data: [DONE]\n\n")])
    assert rec.engine_fields == {"metrics": spec}  # kept as sent; no reader, so no counts
    assert rec.speculative is None
    read = _record([(10.2, _sse(final) + b"data: [DONE]\n\n")], read_spec_metrics=request_spec_metrics)
    assert read.speculative == RequestSpecMetrics(num_draft_tokens=12, num_accepted_draft_tokens=6)
    assert rec.logprobs is not None
    assert rec.logprobs[0].token == "a"
    assert rec.logprobs[0].top == (("a", -0.1),)
    comp = {"choices": [{"index": 0, "text": "b", "logprobs": {"tokens": ["b"], "token_logprobs": [-0.5]}}]}
    rec2 = _record([(10.1, _sse(comp)), (10.2, b"data: [DONE]\n\n")], api="completions")
    assert rec2.logprobs is not None
    assert rec2.logprobs[0].logprob == -0.5


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"data: {not json\n\n", "not JSON"),
        (b"hello there\n\n", "not a server-sent event"),
        (b"data: [1, 2]\n\n", "not an object"),
        (_chat("a"), "without data: [DONE]"),
        (b'data: {"choices": 5}\n\ndata: [DONE]\n\n', "unexpected shape"),
    ],
)
def test_malformed_streams_become_protocol_errors(payload: bytes, needle: str) -> None:
    rec = _record([(10.1, payload)])
    assert rec.error_kind is ErrorKind.PROTOCOL_ERROR
    assert rec.error is not None
    assert needle in rec.error
    assert "request s:r0:a" in rec.error


def test_an_in_stream_error_object_is_an_engine_error() -> None:
    rec = _record([(10.1, _sse({"error": {"message": "boom", "code": 500}}) + b"data: [DONE]\n\n")])
    assert rec.error_kind is ErrorKind.ENGINE_ERROR
    assert rec.error is not None
    assert "boom" in rec.error


def test_comments_and_other_sse_fields_are_ignored() -> None:
    events, done, error = split_events(
        [(1.0, b": ping\nevent: x\nid: 3\nretry: 5\r\ndata: {}\r\n\r\ndata: [DONE]")], "w"
    )
    assert events == [(1.0, {})]
    assert done
    assert error is None


def test_stats_of_uses_numpy_percentiles_and_skips_none() -> None:
    values = [float(v) for v in range(1, 101)]
    stats = stats_of([*values, None])
    assert stats.n == 100
    assert stats.mean == pytest.approx(50.5)
    assert stats.p50 == pytest.approx(float(np.percentile(values, 50)))
    assert stats.p99 == pytest.approx(float(np.percentile(values, 99)))
    empty = stats_of([])
    assert empty.n == 0
    assert empty.p50 is None


def _rec(item: str, *, warmup: bool = False, tokens: int = 5, error: ErrorKind | None = None) -> RequestRecord:
    return RequestRecord(
        request_id=f"s:{item}",
        item_id=item,
        scenario="s",
        repeat=-1 if warmup else 0,
        warmup=warmup,
        send_time_s=1.0,
        first_token_time_s=1.1,
        chunk_times_s=[1.1, 1.2, 1.3],
        chunk_tokens=[1, 2, 2],
        end_time_s=1.5,
        completion_tokens=tokens,
        prompt_tokens=3,
        error_kind=error,
        error=None if error is None else "x",
    )


def test_summary_excludes_warmup_and_failed_requests_from_latencies_but_counts_errors() -> None:
    records = [
        _rec("w", warmup=True, tokens=1000),
        _rec("a"),
        _rec("b", tokens=1),
        _rec("c", error=ErrorKind.HTTP_ERROR),
        _rec("d", error=ErrorKind.REQUEST_TIMEOUT),
    ]
    summary = summarize(
        records,
        ScenarioSpec(
            scenario="s",
            concurrency=1,
            load=LoadShape(),
            warmup=1,
            repeats=1,
            first_repeat=0,
            seed=0,
            cache_salt_policy=CacheSaltPolicy.SALT,
        ),
        api="chat",
        started_at="2026-01-01T00:00:00+00:00",
        clock_origin_s=0.0,
        phase_start_s=1.0,
        phase_end_s=3.0,
    )
    assert summary.n_requests == 4
    assert summary.n_success == 2
    assert summary.n_error == 2
    assert summary.errors == {"http_error": 1, "request_timeout": 1}
    assert summary.ttft_ms.n == 2
    assert summary.ttft_ms.p50 == pytest.approx(100.0)
    assert summary.tpot_ms.n == 1  # the 1-token output has no TPOT
    assert summary.tpot_ms.p50 == pytest.approx(400.0 / 4)
    assert summary.itl_ms.n == 4
    assert summary.itl_basis == "per_chunk"
    assert summary.tokens_per_chunk.mean == pytest.approx(5 / 3)
    assert summary.duration_s == pytest.approx(2.0)
    assert summary.output_throughput_tok_s == pytest.approx(6 / 2.0)
    assert summary.request_throughput_rps == pytest.approx(1.0)
    assert summary.cache_salt_policy is CacheSaltPolicy.SALT
    assert not math.isnan(summary.e2e_ms.p99 or math.nan)
