"""The KV cache each engine reports, read into specselect's terms: vLLM 0.32's `cache_config_info` and start-up
line as recorded from a real CPU server on this machine (`data/vllm032_cpu_*`), SGLang's `/server_info` as its
fakes answer it (no SGLang runs here). Nothing is started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specselect._engines.prometheus import parse_metrics_named, parse_prometheus
from specselect._engines.sglang.capacity import kv_capacity as sglang_capacity
from specselect._engines.sglang.capacity import kv_usage as sglang_usage
from specselect._engines.sglang.serverinfo import ServerInfoSnapshot, parse_server_info
from specselect._engines.vllm.capacity import KV_USAGE_GAUGES, kv_capacity, kv_usage, preemptions
from specselect.records.capacity import KvCapacity, concurrency_for

DATA = Path(__file__).parent / "data"
METRICS = (DATA / "vllm032_cpu_metrics_after_start.txt").read_text()
LOG = (DATA / "vllm032_cpu_startup_excerpt.log").read_text()


def test_a_real_vllm_cpu_server_states_its_cache_in_tokens_blocks_and_concurrency() -> None:
    kv = kv_capacity(LOG, parse_prometheus(METRICS))
    assert kv == KvCapacity(
        tokens=46_592,
        blocks=364,
        block_size=128,
        max_model_len=2048,
        engine_max_concurrency=22.75,
        source="cache_config_info + start-up log",
    )


def test_concurrency_counts_whole_blocks_per_request_as_the_engine_does() -> None:
    kv = kv_capacity(LOG, parse_prometheus(METRICS))
    assert kv is not None
    assert kv.concurrency_at(2048) == pytest.approx(22.75)  # the engine's own figure
    assert kv.concurrency_at(2049) == pytest.approx(364 / 17)  # one token more takes a whole block more
    assert concurrency_for(46_592, 2048) == pytest.approx(22.75)  # without blocks: tokens / length


def test_the_log_line_alone_still_gives_the_size_when_the_metric_is_missing() -> None:
    kv = kv_capacity(LOG, parse_prometheus(""))
    assert kv is not None
    assert (kv.tokens, kv.blocks, kv.engine_max_concurrency, kv.source) == (46_592, None, 22.75, "start-up log")


def test_a_gpu_servers_line_reads_the_same_and_the_last_line_wins() -> None:
    line = (
        "INFO [kv_cache_utils.py:2327] GPU KV cache size: {} tokens, "
        "Maximum concurrency for 8,192 tokens per request: {}x"
    )
    kv = kv_capacity("\n".join([line.format("1,000", "0.12"), line.format("812,400", "99.17")]), None)
    assert kv is not None
    assert (kv.tokens, kv.max_model_len, kv.engine_max_concurrency) == (812_400, 8192, 99.17)


def test_a_server_that_states_no_size_has_no_capacity() -> None:
    assert kv_capacity("INFO started\n", parse_prometheus("")) is None


def test_usage_and_preemptions_come_from_the_metrics_with_the_one_counter_delta() -> None:
    before = parse_prometheus(METRICS)
    after = parse_prometheus(
        METRICS.replace(
            'vllm:kv_cache_usage_perc{engine="0",model_name="smollm2"} 0.0',
            'vllm:kv_cache_usage_perc{engine="0",model_name="smollm2"} 0.97',
        ).replace(
            'vllm:num_preemptions_total{engine="0",model_name="smollm2"} 0.0',
            'vllm:num_preemptions_total{engine="0",model_name="smollm2"} 4.0',
        )
    )
    assert kv_usage(before) == 0.0
    assert kv_usage(after) == pytest.approx(0.97)
    assert preemptions(before, after, "smollm2") == 4
    assert preemptions(before, before, "smollm2") == 0
    assert kv_usage(parse_prometheus("")) is None


def test_sglang_states_its_pool_in_server_info() -> None:
    answer = json.loads((DATA / "sglang_server_info_eagle3_after.json").read_text())
    snap = ServerInfoSnapshot(server_info=parse_server_info(answer))
    kv = sglang_capacity(snap)
    assert kv is not None
    assert (kv.tokens, kv.max_model_len) == (412_160, 8192)
    assert kv.engine_max_concurrency == pytest.approx(412_160 / 8192)
    assert sglang_capacity(ServerInfoSnapshot(server_info_error="HTTP 500")) is None


def test_sglang_usage_is_its_token_usage_gauge() -> None:
    snap = parse_prometheus('sglang:token_usage{model_name="m"} 0.28\n')
    assert sglang_usage(snap) == pytest.approx(0.28)
    assert sglang_usage(parse_prometheus("")) is None


def test_the_usage_read_every_second_parses_the_gauge_lines_alone() -> None:
    only = parse_metrics_named(METRICS, KV_USAGE_GAUGES)
    assert {s.name for s in only.samples} == {"vllm:kv_cache_usage_perc"}
    assert kv_usage(only) == 0.0
