"""The measurement client against a real vLLM server on CPU: concurrency 1 and 4, complete records and summaries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from specselect.engines.base import LaunchSpec
from specselect.engines.vllm.engine import VllmEngine
from specselect.measure import Endpoint, SamplingParams, run_scenario
from specselect.measure.memory import PeakMemorySampler
from specselect.workloads import load_workload

pytestmark = pytest.mark.integration


def test_scenarios_at_concurrency_1_and_4_produce_complete_records(
    vllm_engine: VllmEngine, cpu_launch_spec: Callable[..., LaunchSpec]
) -> None:
    items = load_workload("builtin:general").items[:4]
    sampling = SamplingParams(max_tokens=24, temperature=0.0, seed=0, return_token_ids=True)
    with vllm_engine.launch(cpu_launch_spec("measure")) as server:
        endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
        results = {}
        for concurrency in (1, 4):
            with PeakMemorySampler(server.pid, interval_s=0.2) as sampler:
                results[concurrency] = asyncio.run(
                    run_scenario(
                        endpoint,
                        items,
                        scenario=f"general-c{concurrency}",
                        concurrency=concurrency,
                        warmup=1,
                        repeats=2,
                        sampling=sampling,
                        request_timeout_s=120,
                    )
                )
            peak = sampler.result
            assert peak.source == "process_tree_rss"
            assert peak.mb is not None
            assert peak.mb > 500  # a real vLLM process tree, not the client
    for concurrency, result in results.items():
        measured = result.measured()
        assert len(measured) == 8
        assert len([r for r in result.records if r.warmup]) == 1
        for rec in measured:
            assert rec.ok, rec.error
            assert rec.http_status == 200
            assert rec.send_time_s is not None
            assert rec.first_token_time_s is not None
            assert rec.end_time_s is not None
            assert rec.send_time_s < rec.first_token_time_s <= rec.end_time_s
            assert rec.prompt_tokens and rec.completion_tokens
            assert rec.output_token_ids is not None
            assert len(rec.output_token_ids) == rec.completion_tokens
            assert rec.chunk_times_s
            assert sum(t or 0 for t in rec.chunk_tokens) == rec.completion_tokens
            assert rec.finish_reason in {"stop", "length"}
        summary = result.summary
        assert summary.concurrency == concurrency
        assert summary.n_success == 8
        assert summary.n_error == 0
        assert summary.ttft_ms.n == 8
        assert summary.e2e_ms.p50 is not None
        assert summary.tpot_ms.p50 is not None
        assert summary.output_throughput_tok_s is not None
        assert summary.output_throughput_tok_s > 0
    # Same paired order for both levels (seeded), and more requests in flight means more throughput on CPU.
    keys1 = [(r.item_id, r.repeat) for r in results[1].measured()]
    keys4 = [(r.item_id, r.repeat) for r in results[4].measured()]
    assert sorted(keys1) == sorted(keys4)
    assert results[1].summary.output_throughput_tok_s is not None
    assert results[4].summary.output_throughput_tok_s is not None
    assert results[4].summary.output_throughput_tok_s > results[1].summary.output_throughput_tok_s
