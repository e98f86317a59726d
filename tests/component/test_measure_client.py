"""The client against the local stub server (its own process): failures, time-outs, salts, keys, loads."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer

from specselect._engines.vllm.telemetry import request_spec_metrics
from specselect._measure import run_load
from specselect.errors import ConfigError
from specselect.records.measurement import Endpoint, ErrorKind, LoadShape, SamplingParams, ScenarioResult, ScenarioSpec
from specselect.records.workloads import ChatMessage, WorkloadItem


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(StubBehavior(ttft_s=0.005, chunk_delay_s=0.002, output_tokens=6)) as server:
        yield server


def _item(i: int | str, directive: dict[str, Any] | None = None, *, prompt: bool = False) -> WorkloadItem:
    text = f"question {i}" + (f" [[stub:{json.dumps(directive)}]]" if directive else "")
    if prompt:
        return WorkloadItem(id=str(i), prompt=text)
    return WorkloadItem(id=str(i), messages=(ChatMessage(role="user", content=text),))


def _run(endpoint: Endpoint, items: list[WorkloadItem], **kw: Any) -> ScenarioResult:
    kw.setdefault("scenario", "s")
    hooks = {name: kw.pop(name) for name in ("progress", "before_measured", "read_spec_metrics") if name in kw}
    return asyncio.run(run_load(endpoint, items, ScenarioSpec(**kw), **hooks))


def _endpoint(stub: StubServer, **kw: Any) -> Endpoint:
    return Endpoint(base_url=stub.base_url, model="stub-model", **kw)


def test_every_failure_is_recorded_with_its_kind_and_nothing_is_dropped(stub: StubServer) -> None:
    cases = {
        "ok1": None,
        "http": {"failure": "http_500"},
        "malformed": {"failure": "malformed", "fail_after_chunks": 2},
        "garbage": {"failure": "garbage_line", "fail_after_chunks": 1},
        "engine": {"failure": "engine_error", "fail_after_chunks": 1},
        "nodone": {"failure": "no_done"},
        "drop": {"failure": "disconnect", "fail_after_chunks": 2},
        "ok2": None,
    }
    result = _run(_endpoint(stub), [_item(k, v) for k, v in cases.items()], concurrency=3)
    by_id = {r.item_id: r for r in result.records}
    assert len(result.records) == len(cases)
    assert by_id["ok1"].ok
    assert by_id["ok2"].ok
    assert by_id["http"].error_kind is ErrorKind.HTTP_ERROR
    assert by_id["http"].http_status == 500
    assert "programmed failure" in (by_id["http"].error or "")
    for key, needle in [("malformed", "not JSON"), ("garbage", "not a server-sent event"), ("nodone", "[DONE]")]:
        assert by_id[key].error_kind is ErrorKind.PROTOCOL_ERROR, key
        assert needle in (by_id[key].error or ""), key
        assert by_id[key].http_status == 200
    assert by_id["malformed"].chunk_times_s  # what arrived before the bad line is kept
    assert by_id["engine"].error_kind is ErrorKind.ENGINE_ERROR
    assert by_id["drop"].error_kind is ErrorKind.CONNECTION_ERROR
    summary = result.summary
    assert (summary.n_requests, summary.n_success, summary.n_error) == (8, 2, 6)
    assert summary.errors == {"connection_error": 1, "engine_error": 1, "http_error": 1, "protocol_error": 3}
    assert summary.ttft_ms.n == 2


def test_a_hanging_request_times_out_and_keeps_its_partial_stream(stub: StubServer) -> None:
    items = [_item("hang", {"failure": "hang", "fail_after_chunks": 2}), _item("fine")]
    t = time.monotonic()
    result = _run(_endpoint(stub), items, concurrency=2, request_timeout_s=0.5)
    assert time.monotonic() - t < 5
    hang = next(r for r in result.records if r.item_id == "hang")
    assert hang.error_kind is ErrorKind.REQUEST_TIMEOUT
    assert len(hang.chunk_times_s) == 2
    assert next(r for r in result.records if r.item_id == "fine").ok


def test_scenario_timeout_cancels_in_flight_and_unsent_requests(stub: StubServer) -> None:
    items = [_item(i, {"failure": "hang"}) for i in range(4)]
    t = time.monotonic()
    result = _run(_endpoint(stub), items, concurrency=1, request_timeout_s=60, scenario_timeout_s=0.5)
    assert time.monotonic() - t < 5
    assert len(result.records) == 4
    assert all(r.error_kind is ErrorKind.SCENARIO_TIMEOUT for r in result.records)
    assert sum(r.send_time_s is not None for r in result.records) == 1  # only one was ever sent
    assert result.summary.errors == {"scenario_timeout": 4}
    assert "scenario_timeout" in str(result.records[0].error_kind)


def test_an_unreachable_server_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _run(Endpoint(base_url=f"http://127.0.0.1:{port}", model="m"), [_item(1), _item(2)])
    assert [r.error_kind for r in result.records] == [ErrorKind.CONNECTION_ERROR] * 2


def test_api_key_is_read_at_call_time_and_never_recorded(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = _endpoint(stub, api_key_env="SPECSELECT_TEST_KEY")
    monkeypatch.delenv("SPECSELECT_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="SPECSELECT_TEST_KEY"):
        _run(endpoint, [_item(1)])
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("SPECSELECT_TEST_KEY", secret)
    stub.reset()
    result = _run(endpoint, [_item(1), _item(2, {"failure": "http_500"})])
    assert {r["authorization"] for r in stub.received()} == {f"Bearer {secret}"}
    assert secret not in result.model_dump_json()
    assert secret not in endpoint.model_dump_json()


def test_salts_and_order_are_identical_for_two_groups_and_bodies_are_natural(stub: StubServer) -> None:
    items = [_item(i) for i in range(5)]
    seen = []
    for _group in ("baseline", "candidate"):
        stub.reset()
        _run(_endpoint(stub), items, scenario="general-c1", repeats=2, warmup=1, seed=3, cache_salt_policy="salt")
        seen.append([(r["body"]["messages"][0]["content"], r["body"].get("cache_salt")) for r in stub.received()])
    assert seen[0] == seen[1]
    salts = [salt for _, salt in seen[0]]
    assert len(set(salts)) == 3  # warm-up, repeat 0, repeat 1
    assert salts[1:6] == [salts[1]] * 5
    body = stub.received()[0]["body"]
    assert "ignore_eos" not in body
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def test_completions_api_token_ids_spec_metrics_and_usage_only_at_end(stub: StubServer) -> None:
    items = [
        _item("a", {"spec_metrics": True}, prompt=True),
        _item("b", {"usage_per_chunk": False, "tokens_per_chunk": 2}, prompt=True),
    ]
    sampling = SamplingParams(return_token_ids=True)
    result = _run(_endpoint(stub, api="completions"), items, sampling=sampling, read_spec_metrics=request_spec_metrics)
    a, b = (next(r for r in result.records if r.item_id == k) for k in "ab")
    assert a.ok
    assert b.ok
    assert a.output_text == " t0 t1 t2 t3 t4 t5"
    assert a.output_token_ids == [0, 1, 2, 3, 4, 5]
    assert a.engine_fields is not None
    assert a.engine_fields["metrics"]["speculative_decoding"]["num_draft_tokens"] == 12
    assert a.speculative is not None and a.speculative.num_draft_tokens == 12
    assert b.engine_fields is None and b.speculative is None
    assert a.chunk_tokens == [1] * 6
    assert b.chunk_tokens == [2, 2, 2]  # from token ids, since per-chunk usage is off
    assert b.completion_tokens == 6
    assert result.summary.n_spec_metrics == 1


def test_warmup_is_recorded_but_not_measured_and_progress_is_reported(stub: StubServer) -> None:
    messages: list[str] = []
    result = _run(_endpoint(stub), [_item(i) for i in range(3)], warmup=2, repeats=2, progress=messages.append)
    assert sum(r.warmup for r in result.records) == 2
    assert result.summary.n_requests == 6
    assert len(result.measured()) == 6
    assert messages[0] == "s: 2 warm-up requests"
    assert messages[-1] == "s: done"
    assert result.summary.output_throughput_tok_s is not None
    assert result.summary.output_throughput_tok_s > 0


def test_before_measured_runs_once_after_warmup_and_before_any_measured_request(stub: StubServer) -> None:
    marks: list[float] = []
    result = _run(
        _endpoint(stub),
        [_item(i) for i in range(3)],
        warmup=2,
        repeats=1,
        before_measured=lambda: marks.append(time.perf_counter()),
    )
    assert len(marks) == 1
    origin = result.summary.clock_origin_s
    warm_ends = [r.end_time_s for r in result.records if r.warmup]
    sends = [r.send_time_s for r in result.measured()]
    assert all(end is not None and origin + end <= marks[0] for end in warm_ends)
    assert all(send is not None and origin + send >= marks[0] for send in sends)


def test_open_loop_follows_the_arrival_process_and_respects_the_cap(stub: StubServer) -> None:
    # How late each request leaves against its schedule is a wall-clock bound: test_measure_timing.py judges it.
    items = [_item(i) for i in range(40)]
    load = LoadShape(kind="open", request_rate=100.0)
    result = _run(_endpoint(stub), items, load=load, seed=5)
    measured = sorted(result.measured(), key=lambda r: r.scheduled_time_s or 0.0)
    assert all(r.ok for r in measured)
    scheduled = np.array([r.scheduled_time_s for r in measured], dtype=float)
    sent = np.array([r.send_time_s for r in measured], dtype=float)
    assert (sent >= scheduled).all()  # never before its arrival time
    assert np.diff(scheduled).mean() == pytest.approx(1 / 100.0, rel=0.5)  # 39 gaps of an exponential

    slow = [_item(i, {"ttft_s": 0.05}) for i in range(6)]
    capped = _run(_endpoint(stub), slow, load=LoadShape(kind="open", request_rate=float("inf"), max_concurrency=2))
    spans = [(r.send_time_s or 0.0, r.end_time_s or 0.0) for r in capped.records]
    in_flight = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert in_flight == 2
