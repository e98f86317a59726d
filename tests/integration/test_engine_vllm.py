"""Real vLLM servers on CPU: a target-only baseline and an n-gram group, one after the other, and a bad launch;
on the baseline's server the measurement client also runs its scenarios at concurrency 1 and 4.

All server work happens in one module fixture (so two servers never run at once); the tests then check
what it observed. Budget: two eager start-ups (~35-55 s each) plus one failed start.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

from specselect._engines.base import LaunchSpec, Proposal, RunningServer
from specselect._engines.http import local_request, port_is_free
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect._engines.vllm.telemetry import request_spec_metrics, spec_decode_delta
from specselect._measure import run_load
from specselect._measure.memory import PeakMemorySampler
from specselect._workloads import load_workload
from specselect.errors import ServerStartError
from specselect.records.measurement import Endpoint, SamplingParams, ScenarioResult, ScenarioSpec
from specselect.records.memory import PeakMemory
from specselect.records.server import ReleaseCheck, SanityResult
from specselect.records.telemetry import SpecTelemetry, build_spec_telemetry, summarize_per_request

pytestmark = pytest.mark.integration

LaunchSpecFactory = Callable[..., LaunchSpec]  # the `cpu_launch_spec` fixture of conftest.py

SAME_PROMPT = "Write two sentences about the sea."
REPETITIVE_PROMPT = "Repeat this list exactly, three times:\n" + "\n".join(
    f"- item {i}: apple banana cherry" for i in range(8)
)
NGRAM = build_speculative_config(Proposal("ngram", None, 4, None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}))


@dataclass
class Observed:
    server: RunningServer
    sanity: SanityResult
    same_answer: str
    telemetry: SpecTelemetry
    per_request: list[dict[str, Any] | None] = field(default_factory=list)
    release: ReleaseCheck | None = None
    loads: dict[int, tuple[ScenarioResult, PeakMemory]] = field(default_factory=dict)
    """The baseline's: the measurement client's scenarios at concurrency 1 and 4, with the server's peak memory."""


def chat(server: RunningServer, prompt: str, max_tokens: int, *, stream: bool = False) -> tuple[str, Any]:
    """(text, raw `metrics` object or None) of one temperature-0 chat completion."""
    body: dict[str, Any] = {
        "model": server.served_model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    status, raw = local_request(
        "POST",
        f"{server.base_url}/v1/chat/completions",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        timeout_s=180,
    )
    assert status == 200, raw[:300]
    if not stream:
        answer = json.loads(raw)
        return answer["choices"][0]["message"]["content"], answer.get("metrics")
    text, metrics = [], None
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: ") :])
        for choice in chunk.get("choices", []):
            text.append(choice.get("delta", {}).get("content") or "")
        if chunk.get("usage"):
            metrics = chunk.get("metrics")  # per-request metrics ride on the final usage chunk
    return "".join(text), metrics


@pytest.fixture(scope="module")
def observed(vllm_engine: VllmEngine, cpu_launch_spec: LaunchSpecFactory) -> dict[str, Observed]:
    caps = vllm_engine.probe()
    results: dict[str, Observed] = {}
    for group, cfg in (("g0_target_only", None), ("ngram_k4", NGRAM)):
        spec = cpu_launch_spec(
            group,
            speculative_config=cfg,
            per_request_spec_metrics=cfg is not None and caps.per_request_spec_metrics_flag,
        )
        launcher = vllm_engine.launch(spec)
        with launcher as server:
            sanity = vllm_engine.sanity(server)
            same, _ = chat(server, SAME_PROMPT, 48)
            before = vllm_engine.snapshot(server)
            per_request = [
                chat(server, REPETITIVE_PROMPT, 96)[1],
                chat(server, REPETITIVE_PROMPT, 64, stream=True)[1],
            ]
            after = vllm_engine.snapshot(server)
            loads = _measure(server) if cfg is None else {}
        telemetry = build_spec_telemetry(
            spec_decode_delta(before, after, server.served_model),
            summarize_per_request(None if r is None else request_spec_metrics({"metrics": r}) for r in per_request),
        )
        results[group] = Observed(server, sanity, same, telemetry, per_request, launcher.release_check, loads)
    return results


def _measure(server: RunningServer) -> dict[int, tuple[ScenarioResult, PeakMemory]]:
    """Two scenarios of the measurement client on `server`: 4 general items twice, at concurrency 1 and 4."""
    items = load_workload("builtin:general").items[:4]
    sampling = SamplingParams(max_tokens=24, temperature=0.0, seed=0, return_token_ids=True)
    endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
    loads: dict[int, tuple[ScenarioResult, PeakMemory]] = {}
    for concurrency in (1, 4):
        spec = ScenarioSpec(
            scenario=f"general-c{concurrency}",
            concurrency=concurrency,
            warmup=1,
            repeats=2,
            sampling=sampling,
            request_timeout_s=120,
        )
        with PeakMemorySampler(server.pid, interval_s=0.2) as sampler:
            result = asyncio.run(run_load(endpoint, items, spec))
        loads[concurrency] = (result, sampler.result)
    return loads


def test_both_servers_serve_the_model_and_answer_the_same_prompt(observed: dict[str, Observed]) -> None:
    base, ngram = observed["g0_target_only"], observed["ngram_k4"]
    for obs in (base, ngram):
        assert obs.sanity.model_ids == (obs.server.served_model,)
        assert obs.sanity.reply_text.strip()
        assert obs.same_answer.strip()
    # float32 + eager: verification in batches keeps temperature-0 output identical.
    assert ngram.same_answer == base.same_answer
    assert ngram.server.spec_config == NGRAM
    assert "--speculative-config" in ngram.server.command
    assert "--speculative-config" not in base.server.command


def test_baseline_exports_no_acceptance(observed: dict[str, Observed]) -> None:
    base = observed["g0_target_only"]
    assert base.telemetry == SpecTelemetry(source="not_exported")
    assert base.per_request == [None, None]


def test_ngram_acceptance_is_visible_and_sources_agree(observed: dict[str, Observed]) -> None:
    tel = observed["ngram_k4"].telemetry
    assert tel.source == "both"
    assert tel.accepted_tokens is not None
    assert tel.accepted_tokens > 0
    assert tel.drafts is not None
    assert tel.drafts > 0
    assert tel.cross_check is not None
    assert tel.cross_check.agree is True, tel.cross_check.details
    assert tel.per_position_accepted is not None
    assert len(tel.per_position_accepted) == 4
    assert tel.acceptance_rate is not None
    assert 0 < tel.acceptance_rate <= 1
    keys = set(observed["ngram_k4"].per_request[1]["speculative_decoding"])  # type: ignore[index]
    assert {"num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens", "acceptance_histogram"} <= keys


def test_the_client_measures_complete_records_at_concurrency_1_and_4(observed: dict[str, Observed]) -> None:
    loads = observed["g0_target_only"].loads
    for peak in (peak for _, peak in loads.values()):
        assert peak.source == "process_tree_rss"
        assert peak.mb is not None
        assert peak.mb > 500  # a real vLLM process tree, not the client
    results = {concurrency: result for concurrency, (result, _) in loads.items()}
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


def test_teardown_releases_port_and_processes(observed: dict[str, Observed]) -> None:
    for obs in observed.values():
        assert obs.release is not None
        assert obs.release.port_free
        assert obs.release.processes_gone
        assert not psutil.pid_exists(obs.server.pid)
        assert port_is_free("127.0.0.1", obs.server.port)


def test_missing_model_path_fails_with_tail_and_leaves_nothing(
    vllm_engine: VllmEngine, cpu_launch_spec: LaunchSpecFactory, tmp_path_factory: pytest.TempPathFactory
) -> None:
    missing = tmp_path_factory.mktemp("absent") / "no-such-model"
    launcher = vllm_engine.launch(cpu_launch_spec("bad_model", model_path=missing))
    with pytest.raises(ServerStartError) as info, launcher:
        pytest.fail("a server without a model must not become ready")
    err = info.value
    assert err.log_path is not None
    assert err.log_tail
    assert str(missing) in err.log_tail or "no-such-model" in err.log_tail
    assert launcher.release_check is not None
    assert launcher.release_check.processes_gone
    assert launcher.port is not None
    assert port_is_free("127.0.0.1", launcher.port)
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(missing) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []
