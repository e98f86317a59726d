"""Value types of the measurement client: endpoint, sampling, load shape, per-request records, summaries.

All times in a `RequestRecord` are seconds on `time.perf_counter()`, relative to the start of the scenario
(`ScenarioSummary.started_at` gives the wall-clock anchor), so records from one scenario share one clock.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specselect._common.canonical import canonical_sha256
from specselect.records.telemetry import RequestSpecMetrics

__all__ = [
    "MEASURE_SCHEMA_VERSION",
    "CacheSaltPolicy",
    "Endpoint",
    "ErrorKind",
    "LoadShape",
    "RequestRecord",
    "SamplingParams",
    "ScenarioResult",
    "ScenarioSpec",
    "ScenarioSummary",
    "Stats",
    "TokenLogprob",
]

MEASURE_SCHEMA_VERSION = 1
"""Schema version of `RequestRecord`, `ScenarioSummary` and `ScenarioResult` on disk."""


class CacheSaltPolicy(StrEnum):
    """How the plan treats the engine's prefix cache across requests.

    `fresh_server`: one new server per group, so no group inherits another's cache (but a prompt's second
    repeat hits its first one's cache); `disabled`: the engine runs without prefix caching; `salt`: the client
    sends a `cache_salt` unique per (scenario, repeat) and identical across groups, so every request is a cold
    prefill with the cache still on. Only the last two keep later repeats from being favoured.
    """

    FRESH_SERVER = "fresh_server"
    DISABLED = "disabled"
    SALT = "salt"


class ErrorKind(StrEnum):
    """Why a request failed; `ScenarioSummary.errors` counts by these."""

    HTTP_ERROR = "http_error"
    REQUEST_TIMEOUT = "request_timeout"
    SCENARIO_TIMEOUT = "scenario_timeout"
    CONNECTION_ERROR = "connection_error"
    PROTOCOL_ERROR = "protocol_error"
    ENGINE_ERROR = "engine_error"


class Endpoint(BaseModel):
    """An OpenAI-compatible server to measure. `api_key_env` names an env var read at call time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    """`http://host:port` or `http://host:port/v1`."""
    model: str = Field(min_length=1)
    api: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value

    @property
    def url(self) -> str:
        """The full URL of the endpoint this `api` posts to."""
        root = self.base_url if self.base_url.endswith("/v1") else f"{self.base_url}/v1"
        return f"{root}/chat/completions" if self.api == "chat" else f"{root}/completions"


class SamplingParams(BaseModel):
    """Request parameters shared by every request of a scenario. `ignore_eos` stays off for natural outputs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = Field(default=128, gt=0)
    """Used when a workload item gives no `max_tokens` of its own."""
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, gt=0)
    seed: int | None = None
    seed_per_request: bool = False
    """Each request samples with its own seed, derived from `seed`, the scenario spec's `seed_scope` and the
    request (`request_seed`) and recorded on it; otherwise every request sends `seed` itself."""
    in_request: bool = True
    """False: temperature, top-p and top-k are left out of the requests, so each server's own generation
    defaults decide them (the values here are what the servers are expected to serve)."""
    ignore_eos: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)
    """Top-k alternatives per generated token (for near-tie analysis); None requests no logprobs."""
    return_token_ids: bool = False
    """Ask the engine (vLLM) for generated token ids in every chunk: exact tokens for parity checks."""

    @property
    def key(self) -> str:
        """A stable key of these parameters (`sampling_key` of paired evidence)."""
        data = self.model_dump(mode="json")
        # Fields added after keys were first recorded stay out at their default: recorded keys still pair.
        for name, default in _KEYLESS_DEFAULTS.items():
            if data.get(name) == default:
                del data[name]
        return "sampling#" + canonical_sha256(data)[:16]


_KEYLESS_DEFAULTS: dict[str, object] = {"top_k": None, "seed_per_request": False, "in_request": True}


class LoadShape(BaseModel):
    """Closed loop at the scenario's concurrency, or open loop at `request_rate` (Gamma arrivals).

    Open loop follows `vllm bench serve`: inter-arrival times are Gamma(shape=burstiness, mean=1/rate);
    burstiness 1 is a Poisson process, smaller is burstier; `request_rate=inf` sends everything at once;
    `max_concurrency` optionally caps requests in flight (a capped request waits, and its wait shows as
    `send_time_s - scheduled_time_s`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["closed", "open"] = "closed"
    request_rate: float | None = Field(default=None, gt=0.0)
    burstiness: float = Field(default=1.0, gt=0.0)
    max_concurrency: int | None = Field(default=None, ge=1)

    @property
    def is_closed(self) -> bool:
        """A closed loop: every stream sends its next request when its last one finished."""
        return self.kind != "open"

    @model_validator(mode="after")
    def _consistent(self) -> LoadShape:
        if not self.is_closed and self.request_rate is None:
            raise ValueError("an open-loop load needs request_rate (requests per second, or inf)")
        if self.is_closed and (self.request_rate is not None or self.max_concurrency is not None):
            raise ValueError("a closed-loop load takes its concurrency from the scenario; drop request_rate")
        if self.request_rate is not None and math.isnan(self.request_rate):
            raise ValueError("request_rate must be a number")
        return self


class ScenarioSpec(BaseModel):
    """How one scenario is sent: its name, the load at which, warm-up, measured passes, order seed, sampling,
    time-outs and the prefix-cache policy (everything but the server and the items)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    concurrency: int = 1
    load: LoadShape = Field(default_factory=LoadShape)
    warmup: int = 0
    repeats: int = 1
    first_repeat: int = 0
    """Index of the first measured pass (passes after an earlier run of the same scenario continue it)."""
    launch: int = 0
    """Which server launch of the group sends it (0-based); recorded on every request."""
    seed: int = 0
    """Order seed: every measured pass visits the items in a seeded permutation (the same on both sides)."""
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    request_timeout_s: float = 600.0
    scenario_timeout_s: float | None = None
    cache_salt_policy: CacheSaltPolicy = CacheSaltPolicy.FRESH_SERVER
    seed_scope: str = ""
    """With `sampling.seed_per_request`: who sends (the group), so each side draws its own samples."""


class TokenLogprob(BaseModel):
    """One generated token's logprob and its top alternatives, as the engine reported them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: str
    logprob: float | None
    top: tuple[tuple[str, float | None], ...] = ()


class RequestRecord(BaseModel):
    """Everything measured about one request; a failed request is recorded, never dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MEASURE_SCHEMA_VERSION
    request_id: str
    item_id: str
    scenario: str
    repeat: int
    """0-based pass over the items for measured requests; -1 for warm-up requests. Passes are numbered across
    the group's launches (launch j continues after the passes of launches 0 .. j - 1)."""
    launch: int = 0
    """The group's server launch that measured it (0-based)."""
    warmup: bool
    cache_salt: str | None = None
    seed: int | None = None
    """The sampling seed the request sent (None: it sent none)."""
    scheduled_time_s: float | None = None
    """Open loop only: when the arrival process released the request."""
    send_time_s: float | None = None
    first_token_time_s: float | None = None
    """Arrival of the first chunk carrying a generated token (not the role-only chunk)."""
    chunk_times_s: list[float] = Field(default_factory=list)
    """Arrival time of every chunk carrying generated output."""
    chunk_tokens: list[int | None] = Field(default_factory=list)
    """Tokens in each of those chunks (per-chunk usage or token ids); None when the server did not say."""
    end_time_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    """From the server's `usage` (never from counting chunks)."""
    output_text: str = ""
    output_token_ids: list[int] | None = None
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    engine_fields: dict[str, Any] | None = None
    """The response's own top-level fields beyond OpenAI's chunk schema (e.g. vLLM's `metrics`), last value of
    each, as sent: kept as facts; only the engines interpret them."""
    speculative: RequestSpecMetrics | None = None
    """The request's speculative counts, read from `engine_fields` by the engine's session (None: none sent)."""
    http_status: int | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _kept_metrics_object(cls, data: Any) -> Any:
        # Records written before `engine_fields` kept only vLLM's `metrics` object, as `spec_metrics`; the engine's
        # reader fills `speculative` from it when such records are read again (`artifacts.store.load_records`).
        if isinstance(data, dict) and "spec_metrics" in data:
            data = dict(data)
            raw = data.pop("spec_metrics")
            if raw is not None:
                data.setdefault("engine_fields", {"metrics": raw})
        return data

    @property
    def ok(self) -> bool:
        """True when the request completed without any error."""
        return self.error_kind is None


class Stats(BaseModel):
    """Distribution summary over n values; every number is None when n == 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None


class ScenarioSummary(BaseModel):
    """Metrics of one scenario over measured requests only (warm-up excluded)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MEASURE_SCHEMA_VERSION
    scenario: str
    api: Literal["chat", "completions"]
    started_at: str
    """Wall-clock start of the scenario (ISO 8601, UTC)."""
    clock_origin_s: float
    """`time.perf_counter()` at the scenario start: record times are relative to it. On Linux this is
    CLOCK_MONOTONIC, shared by all processes, so it lines records up with server-side timestamps."""
    concurrency: int
    load: LoadShape
    warmup: int
    repeats: int
    first_repeat: int
    seed: int
    sampling_key: str
    cache_salt_policy: CacheSaltPolicy
    n_requests: int
    n_success: int
    n_error: int
    errors: dict[str, int] = Field(default_factory=dict)
    """Failed measured requests by `ErrorKind`."""
    duration_s: float | None
    """Wall time of the measured phase: first send to last completion."""
    ttft_ms: Stats
    tpot_ms: Stats
    """(E2E - TTFT) / (completion_tokens - 1); requests with one output token are left out."""
    e2e_ms: Stats
    itl_ms: Stats
    """Inter-CHUNK latency: with speculation one chunk carries several tokens, so this is not per token."""
    itl_basis: Literal["per_chunk"] = "per_chunk"
    tokens_per_chunk: Stats
    decode_tok_s: Stats
    """Per-request decode speed: (completion_tokens - 1) / (E2E - TTFT)."""
    output_throughput_tok_s: float | None
    request_throughput_rps: float | None
    total_prompt_tokens: int
    total_output_tokens: int
    n_spec_metrics: int
    """Successful measured requests that carried per-request speculative counts (`RequestRecord.speculative`)."""


class ScenarioResult(BaseModel):
    """The records (warm-up included, flagged) and the summary of one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MEASURE_SCHEMA_VERSION
    summary: ScenarioSummary
    records: list[RequestRecord]

    def measured(self) -> list[RequestRecord]:
        """The records the summary is computed from (warm-up excluded)."""
        return [r for r in self.records if not r.warmup]
