"""kind = "openai": what an endpoint reports when probed (identity, version, metrics), the admission facts
built from it, and which spec-decode reader its metrics get."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from specselect._engines.base import LaunchSpec
from specselect._engines.openai.engine import OpenAIEndpointEngine
from specselect._engines.openai.facts import endpoint_admission_input
from specselect._engines.openai.probe import probe_endpoint
from specselect._engines.prometheus import MetricSample, MetricsSnapshot
from specselect._engines.registry import get_engine
from specselect.errors import ConfigError
from specselect.records.endpoints import EndpointProbe

# -- a tiny endpoint that answers /v1/models, /version and /metrics as configured --------------------------


class _Fake(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, str]]] = {}
    seen_auth: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen_auth.append(self.headers.get("Authorization"))
        status, body = self.routes.get(self.path, (404, '{"detail": "Not Found"}'))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class FakeEndpoints:
    """Local HTTP endpoints answering fixed routes; remembers the Authorization header of every request."""

    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []
        self.auth: dict[str, list[str | None]] = {}

    def start(self, routes: dict[str, tuple[int, str]]) -> str:
        seen: list[str | None] = []
        handler = type("Handler", (_Fake,), {"routes": routes, "seen_auth": seen})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        self.auth[url] = seen
        return url


@pytest.fixture
def fake() -> Iterator[FakeEndpoints]:
    endpoints = FakeEndpoints()
    yield endpoints
    for server in endpoints.servers:
        server.shutdown()
        server.server_close()


VLLM_MODELS = json.dumps(
    {
        "object": "list",
        "data": [
            {"id": "served", "object": "model", "owned_by": "vllm", "root": "/models/smollm2", "max_model_len": 1024},
        ],
    }
)
METRICS = '# TYPE vllm:request_success counter\nvllm:request_success_total{engine="0",finished_reason="stop"} 4.0\n'


def test_a_vllm_endpoint_reports_identity_version_and_metrics(fake: FakeEndpoints) -> None:
    url = fake.start(
        {"/v1/models": (200, VLLM_MODELS), "/version": (200, '{"version": "0.32.0+cpu"}'), "/metrics": (200, METRICS)}
    )
    probe = probe_endpoint(url, "served")
    assert probe.usable and probe.model_ids == ("served",)
    assert probe.identity is not None and probe.identity.root == "/models/smollm2"
    assert probe.target_snapshot == "endpoint:root=/models/smollm2;max_model_len=1024"
    assert (probe.engine_version, probe.version_source) == ("0.32.0+cpu", "version_endpoint")
    assert (probe.metrics, probe.flavor) == ("exported", "vllm")


def test_a_plain_openai_endpoint_exposes_no_version_and_no_metrics(fake: FakeEndpoints, monkeypatch: Any) -> None:
    url = fake.start({"/v1/models": (200, json.dumps({"data": [{"id": "gpt-x"}]}))})
    monkeypatch.setenv("MY_KEY", "sk-test-secret-value")
    probe = probe_endpoint(url, "gpt-x", api_key_env="MY_KEY")
    assert probe.usable and probe.target_snapshot == "endpoint:id=gpt-x;max_model_len=None"
    assert (probe.engine_version, probe.version_source, probe.metrics) == (None, "not_exposed", "not_exported")
    assert "sk-test-secret-value" not in probe.model_dump_json()
    assert set(fake.auth[url]) == {"Bearer sk-test-secret-value"}
    assert probe.api_key_env == "MY_KEY"


def test_probe_failures_are_recorded_not_raised(fake: FakeEndpoints) -> None:
    url = fake.start({"/v1/models": (200, VLLM_MODELS)})
    wrong = probe_endpoint(url, "other")
    assert (wrong.reachable, wrong.model_listed, wrong.usable) == (True, False, False)
    assert wrong.error and "not 'other'" in wrong.error
    denied = probe_endpoint(fake.start({"/v1/models": (401, '{"error": "no key"}')}), "served")
    assert not denied.reachable and denied.error and "HTTP 401" in denied.error
    gone = probe_endpoint("http://127.0.0.1:9", "served", timeout_s=2)
    assert not gone.reachable and gone.error and "cannot connect" in gone.error


def test_a_missing_api_key_variable_is_a_user_error(monkeypatch: Any) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE is not set"):
        probe_endpoint("http://127.0.0.1:9", "m", api_key_env="NOT_SET_ANYWHERE")


def _probe(**extra: Any) -> EndpointProbe:
    fields: dict[str, Any] = {"base_url": "http://h:1", "model": "m", "reachable": True, "model_listed": True, **extra}
    return EndpointProbe.model_validate(fields)


@pytest.mark.parametrize(
    ("probe", "enabled", "reason"),
    [
        (_probe(), True, "ok"),
        (_probe(reachable=False, model_listed=False, error="x"), True, "endpoint_unreachable"),
        (_probe(model_listed=False, model_ids=("a", "b")), True, "model_not_served"),
        (None, True, "endpoint_not_probed"),
        (_probe(), False, "ok"),
    ],
)
def test_endpoint_admission_checks_only_what_it_can_see(
    probe: EndpointProbe | None, enabled: bool, reason: str
) -> None:
    inp = endpoint_admission_input(enabled=enabled, method="ngram", probe=probe)
    assert inp.enabled is enabled and inp.backend.reason == reason
    if enabled and reason == "ok":
        assert inp.asset.facts["declared_by_operator"] is True
        assert inp.compatibility.facts["declared_by_operator"] is True
        assert inp.capacity.facts["evaluated"] is False


def test_the_openai_kind_is_registered_and_never_launches() -> None:
    engine = get_engine("openai")()
    assert isinstance(engine, OpenAIEndpointEngine) and engine.kind == "openai"
    assert engine.launches_servers is False
    spec = LaunchSpec(group="g", model_path=Path("/m"), served_model_name="m", log_path=Path("/l"), run_dir=Path("/r"))
    with pytest.raises(ConfigError, match="does not start servers"):
        engine.launch(spec)


def test_spec_counters_are_read_per_metrics_flavor() -> None:
    engine = OpenAIEndpointEngine()
    vllm = MetricsSnapshot(
        samples=(
            MetricSample(name="vllm:spec_decode_num_drafts_total", labels={"model_name": "m"}, value=4.0),
            MetricSample(name="vllm:spec_decode_num_draft_tokens_total", labels={"model_name": "m"}, value=12.0),
            MetricSample(name="vllm:spec_decode_num_accepted_tokens_total", labels={"model_name": "m"}, value=6.0),
        )
    )
    counters = engine.spec_counters(MetricsSnapshot(), vllm, "m")
    assert (counters.exported, counters.draft_tokens, counters.accepted_tokens) == (True, 12, 6)
    sglang = MetricsSnapshot(samples=(MetricSample(name="sglang:num_requests_total", labels={}, value=1.0),))
    assert engine.spec_counters(sglang, sglang, "m").exported is False  # SGLang reader: no spec counters here
    unknown = MetricsSnapshot(samples=(MetricSample(name="process_cpu_seconds_total", labels={}, value=1.0),))
    assert engine.spec_counters(unknown, unknown, "m").exported is False
