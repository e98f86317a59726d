"""The engine of kind "openai": attaches to a running endpoint, scrapes its metrics, never launches."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict

from specselect._admission.gather import Gathered
from specselect._core.families import classify_family
from specselect._engines.base import (
    EngineSetup,
    Finding,
    GroupContext,
    GroupIdentity,
    LaunchSpec,
    ProgressFn,
    ServeOptions,
    Session,
)
from specselect._engines.http import local_request, sanity_check
from specselect._engines.openai.facts import endpoint_admission_input, endpoint_findings
from specselect._engines.openai.foreign_traffic import EndpointTrafficGuard
from specselect._engines.openai.probe import endpoint_headers, metrics_flavor, probe_endpoint
from specselect._engines.prometheus import MetricsSnapshot, parse_prometheus
from specselect._engines.vllm.telemetry import request_spec_metrics, spec_decode_delta
from specselect._plan import BASELINE_GROUP, EngineConfig, Plan
from specselect.errors import ConfigError, ProtocolError, ServerTimeoutError
from specselect.records.endpoints import EndpointProbe
from specselect.records.proposals import ScheduleRange
from specselect.records.server import ReleaseCheck, SanityResult
from specselect.records.telemetry import SpecDecodeCounters

__all__ = ["DEFAULT_SPEC_READERS", "TRAFFIC_GAP_S", "AttachedServer", "OpenAIEndpointEngine", "SpecCountersFn"]

TRAFFIC_GAP_S = 1.0
"""Idle gap (s) of the foreign-traffic check around each scenario on an endpoint specselect does not own."""

SpecCountersFn = Callable[[MetricsSnapshot, MetricsSnapshot, str], SpecDecodeCounters]
"""(before, after, served model name) -> the spec-decode counter deltas of that window."""


def _sglang_counters(before: MetricsSnapshot, after: MetricsSnapshot, model: str) -> SpecDecodeCounters:
    from specselect._engines.sglang.telemetry import sglang_spec_counters  # only for SGLang endpoints

    return sglang_spec_counters(before, after, model)


DEFAULT_SPEC_READERS: Mapping[str, SpecCountersFn] = MappingProxyType(
    {"vllm": spec_decode_delta, "sglang": _sglang_counters}
)
"""Spec-decode readers by metrics flavor; an endpoint of another flavor reports acceptance as null
(`not_exported`), never inferred."""


class AttachedServer(BaseModel):
    """A running endpoint being measured: like `RunningServer`, but specselect owns no process of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    served_model: str
    api_key_env: str | None = None
    pid: None = None
    """No process to sample: peak memory comes from the operator (`endpoint.peak_memory_mb`) or stays null."""
    log_path: Path | None = None


class AttachedServing:
    """A group's endpoint for a `with` block: nothing is started on enter and nothing is stopped on exit."""

    def __init__(
        self, engine: OpenAIEndpointEngine, server: AttachedServer, probe: EndpointProbe, declared: float | None
    ):
        self._engine, self._server, self._probe, self._declared = engine, server, probe, declared

    def __enter__(self) -> Session:
        engine, server = self._engine, self._server
        sanity = engine.sanity(server)
        snapshot = lambda: engine.snapshot(server)  # noqa: E731
        return Session(
            base_url=server.base_url,
            model=server.served_model,
            api_key_env=server.api_key_env,
            snapshot=snapshot,
            spec_counters=lambda before, after: engine.spec_counters(before, after, server.served_model),
            # Per-request counts arrive only from a vLLM behind the endpoint (asked for them); others send none.
            request_spec_metrics=request_spec_metrics,
            check_alive=lambda: None,
            log_location=server.base_url,
            log_tail=lambda: None,
            sanity=sanity,
            declared_peak_memory_mb=self._declared,
            traffic=EndpointTrafficGuard(
                snapshot, exported=self._probe.metrics == "exported", gap_s=engine.traffic_gap_s
            ),
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def stop(self) -> ReleaseCheck | None:
        return None

    def log_tail(self) -> str | None:
        return None


class OpenAIEndpointEngine:
    """Engine kind "openai": measures endpoints the user runs; nothing is started, nothing is stopped."""

    kind = "openai"
    launches_servers = False

    def __init__(
        self,
        *,
        spec_readers: Mapping[str, SpecCountersFn] | None = None,
        timeout_s: float = 30.0,
        traffic_gap_s: float = TRAFFIC_GAP_S,
    ) -> None:
        self._readers = dict(DEFAULT_SPEC_READERS if spec_readers is None else spec_readers)
        self._timeout_s = timeout_s
        self.traffic_gap_s = traffic_gap_s

    @classmethod
    def from_config(cls, config: EngineConfig) -> OpenAIEndpointEngine:
        """The engine of a plan with kind "openai" (its endpoints are per group)."""
        return cls()

    # -- preflight ----------------------------------------------------------------------------------------

    def prepare(self, plan: Plan, *, home: Path | None, progress: ProgressFn) -> EngineSetup:
        """Probe every group's endpoint (models, version, metrics); no completion is sent.

        An endpoint whose API-key variable is unset is not probed (the audit reports the variable).
        """
        endpoints = {
            group.name: self._probe_group(group.endpoint, plan.engine.api_key_env, progress, group.name)
            for group in plan.groups
            if group.endpoint is not None
        }
        baseline = endpoints.get(BASELINE_GROUP)
        return EngineSetup(
            kind=self.kind, endpoints=endpoints, engine_version=baseline.engine_version if baseline else None
        )

    def _probe_group(self, ep: Any, default_key_env: str | None, progress: ProgressFn, name: str) -> EndpointProbe:
        key_env = ep.api_key_env or default_key_env
        if key_env and not os.environ.get(key_env):
            return EndpointProbe(
                base_url=ep.base_url,
                model=ep.model,
                api_key_env=key_env,
                reachable=False,
                error=f"not probed: environment variable {key_env} is not set",
            )
        probe = self.probe_endpoint(ep.base_url, ep.model, key_env)
        if probe.usable:
            version = probe.engine_version or "version not exposed"
            progress(f"{name}: {ep.base_url} serves {ep.model} ({version}; metrics {probe.metrics})")
        else:
            progress(f"{name}: {ep.base_url}: {probe.error}")
        return probe

    def plan_problems(self, plan: Plan) -> list[str]:
        """None that need no probe: its arguments are checked against the probed version's own."""
        return []

    def audit(self, plan: Plan, setup: EngineSetup) -> list[Finding]:
        """Unusable baselines, targets that differ within a track, silent metrics, undeclared memory."""
        return endpoint_findings(plan, setup.endpoints)

    def probe_endpoint(self, base_url: str, model: str, api_key_env: str | None = None) -> EndpointProbe:
        """Identity, version and metrics of one endpoint (no completion is sent)."""
        return probe_endpoint(base_url, model, api_key_env=api_key_env, timeout_s=min(self._timeout_s, 10.0))

    # -- admission ----------------------------------------------------------------------------------------

    def admit(self, ctx: GroupContext, *, home: Path | None) -> Gathered:
        """Only the backend gate can be checked on a server someone else runs (`facts`)."""
        cand = ctx.candidate
        method = (cand.method or classify_family(cand.family).family).strip().lower()
        probe = ctx.setup.endpoints.get(cand.name)
        return Gathered(input=endpoint_admission_input(enabled=cand.enabled, method=method, probe=probe), method=method)

    def identity(self, ctx: GroupContext) -> GroupIdentity:
        """An endpoint's group is attributed to what its endpoint reports."""
        probe = ctx.setup.endpoints.get(ctx.candidate.name)
        return GroupIdentity(
            target_snapshot=(probe.target_snapshot or "") if probe else "",
            engine_version=probe.engine_version if probe else None,
            has_log=False,
        )

    # -- serving ------------------------------------------------------------------------------------------

    def serve(self, ctx: GroupContext, gathered: Gathered | None, options: ServeOptions) -> AttachedServing:
        """The group's endpoint, as probed in preflight (ConfigError when it has none)."""
        ep = ctx.candidate.endpoint
        probe = ctx.setup.endpoints.get(ctx.candidate.name)
        if ep is None or probe is None:
            raise ConfigError(
                f"{ctx.candidate.name} has no probed endpoint", location="preflight", fix="give the group an endpoint"
            )
        server = self.attach(ep.base_url, ep.model, ep.api_key_env or ctx.engine.api_key_env)
        return AttachedServing(self, server, probe, ep.peak_memory_mb)

    def serve_flags(
        self,
        ctx: GroupContext,
        gathered: Gathered | None,
        *,
        disable_prefix_caching: bool = False,
        extra_speculative: Mapping[str, Any] | None = None,
    ) -> None:
        """None: the operator started this server with flags specselect never saw."""
        return None

    def batch_schedule(self, schedule: Sequence[ScheduleRange], ctx: GroupContext) -> Mapping[str, Any] | None:
        """Unknown for a server specselect did not configure."""
        return None

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
