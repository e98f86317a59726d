"""Real vLLM servers on CPU: a target-only baseline and an n-gram group, one after the other, and a bad launch.

All server work happens in one module fixture (so two servers never run at once); the tests then check
what it observed. Budget: two eager start-ups (~35 s each on an idle machine) plus one failed start.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

from specselect.engines.base import LaunchSpec, ReleaseCheck, RunningServer, SanityResult
from specselect.engines.localnet import local_request, port_is_free
from specselect.engines.telemetry import (
    SpecTelemetry,
    build_spec_telemetry,
    spec_decode_delta,
    summarize_per_request,
)
from specselect.engines.vllm.engine import VllmEngine
from specselect.engines.vllm.specconfig import build_speculative_config
from specselect.errors import ServerStartError

pytestmark = pytest.mark.integration

LaunchSpecFactory = Callable[..., LaunchSpec]  # the `cpu_launch_spec` fixture of conftest.py

SAME_PROMPT = "Write two sentences about the sea."
REPETITIVE_PROMPT = "Repeat this list exactly, three times:\n" + "\n".join(
    f"- item {i}: apple banana cherry" for i in range(8)
)
NGRAM = build_speculative_config("ngram", None, 4, None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5})


@dataclass
class Observed:
    server: RunningServer
    sanity: SanityResult
    same_answer: str
    telemetry: SpecTelemetry
    per_request: list[dict[str, Any] | None] = field(default_factory=list)
    release: ReleaseCheck | None = None


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
        telemetry = build_spec_telemetry(
            spec_decode_delta(before, after, server.served_model), summarize_per_request(per_request)
        )
        results[group] = Observed(server, sanity, same, telemetry, per_request, launcher.release_check)
    return results


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
