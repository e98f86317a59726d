"""The engine of kind "openai": attaches to a running endpoint, scrapes its metrics, never launches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Literal, NoReturn

from pydantic import BaseModel, ConfigDict

from specselect.engines.base import LaunchSpec, SanityResult
from specselect.engines.localnet import local_request
from specselect.engines.openai.probe import EndpointProbe, endpoint_headers, metrics_flavor, probe_endpoint
from specselect.engines.serving import sanity_check
from specselect.engines.telemetry import MetricsSnapshot, SpecDecodeCounters, parse_prometheus, spec_decode_delta
from specselect.errors import ConfigError, ProtocolError, ServerTimeoutError

__all__ = ["DEFAULT_SPEC_READERS", "AttachedServer", "OpenAIEndpointEngine", "OpenAIKindInfo", "SpecCountersFn"]

SpecCountersFn = Callable[[MetricsSnapshot, MetricsSnapshot, str], SpecDecodeCounters]
"""(before, after, served model name) -> the spec-decode counter deltas of that window."""


def _sglang_counters(before: MetricsSnapshot, after: MetricsSnapshot, model: str) -> SpecDecodeCounters:
    from specselect.engines.sglang.telemetry import sglang_spec_counters  # only for SGLang endpoints

    return sglang_spec_counters(before, after, model)


DEFAULT_SPEC_READERS: Mapping[str, SpecCountersFn] = MappingProxyType(
    {"vllm": spec_decode_delta, "sglang": _sglang_counters}
)
"""Spec-decode readers by metrics flavor; an endpoint of another flavor reports acceptance as null
(`not_exported`), never inferred."""


class OpenAIKindInfo(BaseModel):
    """What `probe()` can say about kind "openai" without an endpoint: there is no installation to probe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["openai"] = "openai"
    launches_servers: bool = False


class AttachedServer(BaseModel):
    """A running endpoint being measured: like `RunningServer`, but specselect owns no process of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    served_model: str
    api_key_env: str | None = None
    pid: None = None
    """No process to sample: peak memory comes from the operator (`endpoint.peak_memory_mb`) or stays null."""
    log_path: Path | None = None


class OpenAIEndpointEngine:
    """Engine kind "openai": measures endpoints the user runs; `launch` refuses, `attach` connects."""

    kind = "openai"

    def __init__(self, *, spec_readers: Mapping[str, SpecCountersFn] | None = None, timeout_s: float = 30.0) -> None:
        self._readers = dict(DEFAULT_SPEC_READERS if spec_readers is None else spec_readers)
        self._timeout_s = timeout_s

    def probe(self) -> OpenAIKindInfo:
        """Nothing is installed for this kind; endpoints are probed one by one with `probe_endpoint`."""
        return OpenAIKindInfo()

    def probe_endpoint(self, base_url: str, model: str, api_key_env: str | None = None) -> EndpointProbe:
        """Identity, version and metrics of one endpoint (no completion is sent)."""
        return probe_endpoint(base_url, model, api_key_env=api_key_env, timeout_s=min(self._timeout_s, 10.0))

    def launch(self, spec: LaunchSpec) -> NoReturn:
        """Always refuses: this kind measures servers the user started."""
        raise ConfigError(
            f"engine kind 'openai' does not start servers (asked to launch {spec.group})",
            location="engine.kind",
            fix='start the server yourself and give its endpoint, or use kind = "vllm"',
        )

    def attach(self, base_url: str, model: str, api_key_env: str | None = None) -> AttachedServer:
        """The running endpoint as a server value (nothing is started or checked here)."""
        return AttachedServer(base_url=base_url, served_model=model, api_key_env=api_key_env)

    def scrape_metrics(self, server: AttachedServer) -> str:
        """GET /metrics as text ("" when the endpoint exports none)."""
        url = f"{server.base_url}/metrics"
        try:
            status, body = local_request(
                "GET", url, headers=endpoint_headers(server.api_key_env), timeout_s=self._timeout_s
            )
        except TimeoutError as exc:
            raise ServerTimeoutError(f"/metrics did not answer within {self._timeout_s:g} s", location=url) from exc
        except OSError as exc:
            raise ProtocolError(f"/metrics failed: {exc}", location=url, fix="check that the server runs") from exc
        if status in (404, 405):
            return ""
        if status != 200:
            raise ProtocolError(f"/metrics answered HTTP {status}", location=url, fix="check the endpoint")
        return body.decode("utf-8", errors="replace")

    def snapshot(self, server: AttachedServer) -> MetricsSnapshot:
        """Scrape and parse /metrics (an empty snapshot when none is exported)."""
        return parse_prometheus(self.scrape_metrics(server))

    def sanity(self, server: AttachedServer) -> SanityResult:
        """The model is listed by /v1/models and one short chat completion returns text."""
        headers = endpoint_headers(server.api_key_env)
        key = headers.get("Authorization", "").removeprefix("Bearer ") or None
        return sanity_check(server.base_url, server.served_model, api_key=key, timeout_s=max(self._timeout_s, 60.0))

    def spec_counters(self, before: MetricsSnapshot, after: MetricsSnapshot, model: str) -> SpecDecodeCounters:
        """Spec-decode counter deltas read the way the endpoint's engine exports them (null when unknown)."""
        reader = self._readers.get(metrics_flavor(after))
        if reader is None:
            return SpecDecodeCounters(model_name=model, exported=False)
        return reader(before, after, model)
