"""Speculative-decoding acceptance from the engine's own telemetry (pure functions over recorded text).

Two sources: Prometheus counters (server-cumulative, so deltas around a scenario) and the per-request
`metrics.speculative_decoding` objects vLLM adds to responses. When neither is exported every number stays
null: acceptance is never inferred from latency.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict

from specselect.errors import ProtocolError

__all__ = [
    "SPEC_DECODE_METRICS",
    "CrossCheck",
    "MetricSample",
    "MetricsSnapshot",
    "PerRequestSpecSummary",
    "SpecDecodeCounters",
    "SpecTelemetry",
    "build_spec_telemetry",
    "cross_check",
    "parse_prometheus",
    "spec_decode_delta",
    "summarize_per_request",
]

_PREFIX = "vllm:spec_decode_"
SPEC_DECODE_METRICS: Mapping[str, str] = MappingProxyType(
    {
        "drafts": f"{_PREFIX}num_drafts",
        "draft_tokens": f"{_PREFIX}num_draft_tokens",
        "accepted_tokens": f"{_PREFIX}num_accepted_tokens",
        "per_position": f"{_PREFIX}num_accepted_tokens_per_pos",
    }
)
"""vLLM V1 counter base names (exposed with a `_total` suffix plus a `_created` timestamp sample)."""


class MetricSample(BaseModel):
    """One Prometheus sample."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    labels: dict[str, str]
    value: float


class MetricsSnapshot(BaseModel):
    """All samples of one /metrics scrape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: tuple[MetricSample, ...] = ()

    def values(self, name: str, **labels: str) -> list[MetricSample]:
        """Samples called `name` whose labels include `labels`."""
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def names(self) -> frozenset[str]:
        """Every sample name present."""
        return frozenset(s.name for s in self.samples)


def parse_prometheus(text: str) -> MetricsSnapshot:
    """Parse Prometheus exposition text; ProtocolError when it is not that format."""
    try:
        samples = tuple(
            MetricSample(name=s.name, labels=dict(s.labels), value=float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        )
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ProtocolError(
            f"/metrics is not Prometheus text: {exc}", location="/metrics", fix="check the server's metrics endpoint"
        ) from exc
    return MetricsSnapshot(samples=samples)


class SpecDecodeCounters(BaseModel):
    """Counter deltas of one scenario window for one served model (None = not exported)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    model_name: str
    exported: bool
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    per_position_accepted: tuple[int, ...] | None = None
    style: Literal["v1_counters", "v0_counters", "sglang_counters", "none"] = "none"


def _model_sum(snap: MetricsSnapshot, base: str, model_name: str) -> dict[tuple[tuple[str, str], ...], float] | None:
    """Sum a counter over engines per extra label set; None when the counter is absent for this model."""
    totals: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)
    found = False
    for name in (f"{base}_total", base):
        for sample in snap.samples:
            if sample.name != name:
                continue
            labelled = sample.labels.get("model_name")
            if labelled is not None and labelled != model_name:
                continue
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in ("engine", "model_name")))
            totals[key] += sample.value
            found = True
        if found:  # `_total` wins; a bare name is only read from exporters without the suffix
            return dict(totals)
    return None


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, base: str, model_name: str) -> dict[str, int] | None:
    end = _model_sum(after, base, model_name)
    if end is None:
        return None
    start = _model_sum(before, base, model_name) or {}
    out: dict[str, int] = {}
    for key, value in end.items():
        diff = value - start.get(key, 0.0)
        if not math.isfinite(diff):
            raise ProtocolError(
                f"counter {base} is not a finite count ({start.get(key)} -> {value})",
                location="/metrics",
                fix="check the server's metrics endpoint",
            )
        if diff < 0:
            raise ProtocolError(
                f"counter {base} went backwards ({start.get(key)} -> {value}): the server restarted between scrapes",
                location="/metrics",
                fix="measure again on one server life",
            )
        out[",".join(f"{k}={v}" for k, v in key)] = round(diff)
    return out


def spec_decode_delta(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
    """Deltas of the spec-decode counters between two scrapes, for the served model `model_name`."""
    drafts = _delta(before, after, SPEC_DECODE_METRICS["drafts"], model_name)
    draft_tokens = _delta(before, after, SPEC_DECODE_METRICS["draft_tokens"], model_name)
    accepted = _delta(before, after, SPEC_DECODE_METRICS["accepted_tokens"], model_name)
    per_pos = _delta(before, after, SPEC_DECODE_METRICS["per_position"], model_name)
    if draft_tokens is None or accepted is None:
        return SpecDecodeCounters(model_name=model_name, exported=False)
    positions: tuple[int, ...] | None = None
    if per_pos:
        indexed: list[tuple[int, int]] = []
        for key, value in per_pos.items():
            labels = dict(part.split("=", 1) for part in key.split(",") if "=" in part)
            position = labels.get("position")
            if position is None:
                continue
            if not position.isdigit():
                raise ProtocolError(
                    f"counter {SPEC_DECODE_METRICS['per_position']} has position label {position[:40]!r}, not a number",
                    location="/metrics",
                    fix="check the server's metrics endpoint",
                )
            indexed.append((int(position), value))
        positions = tuple(v for _, v in sorted(indexed))
    return SpecDecodeCounters(
        model_name=model_name,
        exported=True,
        drafts=sum(drafts.values()) if drafts is not None else None,
        draft_tokens=sum(draft_tokens.values()),
        accepted_tokens=sum(accepted.values()),
        per_position_accepted=positions,
        style="v1_counters" if drafts is not None else "v0_counters",
    )


class PerRequestSpecSummary(BaseModel):
    """Sums of the per-request `speculative_decoding` objects of one scenario window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    n_requests: int
    n_with_metrics: int
    spec_steps: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    num_spec_tokens: int | None = None
    per_position_accepted: tuple[int, ...] | None = None
    """From the acceptance histograms: steps that accepted more than i draft tokens."""


def _spec_part(raw: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    inner = raw.get("speculative_decoding", raw)
    if isinstance(inner, Mapping) and "num_draft_tokens" in inner:
        return inner
    return None


def _as_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ProtocolError(
            f"per-request metric {key} is {value!r}, expected a count",
            location="response.metrics.speculative_decoding",
            fix="check the engine version",
        )
    return int(value)


def summarize_per_request(records: Iterable[Mapping[str, Any] | None]) -> PerRequestSpecSummary:
    """Sum per-request metrics objects (a response's `metrics`, or its `speculative_decoding` part)."""
    n = n_with = steps = drafted = accepted = 0
    spec_tokens: set[int] = set()
    histogram: list[int] = []
    for raw in records:
        n += 1
        part = _spec_part(raw)
        if part is None:
            continue
        n_with += 1
        drafted += _as_int(part.get("num_draft_tokens"), "num_draft_tokens")
        accepted += _as_int(part.get("num_accepted_draft_tokens"), "num_accepted_draft_tokens")
        hist = part.get("acceptance_histogram")
        if "num_spec_steps" in part:
            steps += _as_int(part["num_spec_steps"], "num_spec_steps")
        elif isinstance(hist, Sequence):
            steps += sum(_as_int(c, "acceptance_histogram") for c in hist)
        if part.get("num_spec_tokens") is not None:
            spec_tokens.add(_as_int(part["num_spec_tokens"], "num_spec_tokens"))
        if isinstance(hist, Sequence):
            counts = [_as_int(c, "acceptance_histogram") for c in hist]
            histogram.extend([0] * (len(counts) - len(histogram)))
            for j, c in enumerate(counts):
                histogram[j] += c
    per_pos = tuple(sum(histogram[j] for j in range(i + 1, len(histogram))) for i in range(len(histogram) - 1))
    return PerRequestSpecSummary(
        n_requests=n,
        n_with_metrics=n_with,
        spec_steps=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        num_spec_tokens=max(spec_tokens) if spec_tokens else None,
        per_position_accepted=per_pos if histogram else None,
    )


class CrossCheck(BaseModel):
    """Whether the two sources agree; `agree` is None when only one source exists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agree: bool | None
    details: tuple[str, ...] = ()


def _usable(
    prometheus: SpecDecodeCounters | None, per_request: PerRequestSpecSummary | None
) -> tuple[SpecDecodeCounters | None, PerRequestSpecSummary | None]:
    prom = prometheus if prometheus is not None and prometheus.exported else None
    req = per_request if per_request is not None and per_request.n_with_metrics > 0 else None
    return prom, req


def cross_check(prometheus: SpecDecodeCounters | None, per_request: PerRequestSpecSummary | None) -> CrossCheck:
    """Compare /metrics deltas with the per-request sums (exact: both count the same verify steps)."""
    prom, req = _usable(prometheus, per_request)
    if prom is None or req is None:
        missing = [name for name, src in (("prometheus", prom), ("per_request", req)) if src is None]
        return CrossCheck(agree=None, details=tuple(f"{m} not exported" for m in missing))
    details: list[str] = []
    if req.n_with_metrics < req.n_requests:
        details.append(f"per_request metrics on {req.n_with_metrics} of {req.n_requests} requests")
    pairs: list[tuple[str, object, object]] = [
        ("drafts", prom.drafts, req.spec_steps),
        ("draft_tokens", prom.draft_tokens, req.draft_tokens),
        ("accepted_tokens", prom.accepted_tokens, req.accepted_tokens),
    ]
    if prom.per_position_accepted is not None and req.per_position_accepted is not None:
        pairs.append(("per_position_accepted", prom.per_position_accepted, req.per_position_accepted))
    for name, prom_value, req_value in pairs:
        if prom_value is not None and prom_value != req_value:
            details.append(f"{name}: prometheus {prom_value} != per_request {req_value}")
    return CrossCheck(agree=not details, details=tuple(details))


def _ratio(num: int | None, den: int | None) -> float | None:
    return num / den if num is not None and den else None


class SpecTelemetry(BaseModel):
    """Acceptance of one scenario window as the backend reported it; all numbers null when not exported."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    source: Literal["prometheus", "per_request", "both", "server_info", "not_exported"]
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    per_position_accepted: tuple[int, ...] | None = None
    acceptance_rate: float | None = None
    """accepted_tokens / draft_tokens."""
    mean_acceptance_length: float | None = None
    """1 + accepted_tokens / drafts: tokens emitted per verify step, bonus token included."""
    per_position_rates: tuple[float, ...] | None = None
    """per_position_accepted / drafts."""
    cross_check: CrossCheck | None = None
    notes: tuple[str, ...] = ()
    """How the numbers were derived when the engine's definition differs (e.g. SGLang's accept length)."""

    @property
    def mechanism_active(self) -> bool | None:
        """True when the backend reports proposals; None when it reports nothing."""
        return None if self.draft_tokens is None else self.draft_tokens > 0


def build_spec_telemetry(
    prometheus: SpecDecodeCounters | None, per_request: PerRequestSpecSummary | None
) -> SpecTelemetry:
    """Combine both sources; the server's counters win when both exist, and any disagreement is recorded."""
    prom, req = _usable(prometheus, per_request)
    if prom is not None:
        drafts = prom.drafts if prom.drafts is not None or req is None else req.spec_steps
        draft_tokens, accepted = prom.draft_tokens, prom.accepted_tokens
        per_pos = prom.per_position_accepted
        if per_pos is None and req is not None:
            per_pos = req.per_position_accepted
        source: Literal["prometheus", "per_request", "both"] = "both" if req is not None else "prometheus"
    elif req is not None:
        drafts, draft_tokens = req.spec_steps, req.draft_tokens
        accepted, per_pos = req.accepted_tokens, req.per_position_accepted
        source = "per_request"
    else:
        return SpecTelemetry(source="not_exported")
    return SpecTelemetry(
        source=source,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        per_position_accepted=per_pos,
        acceptance_rate=_ratio(accepted, draft_tokens),
        mean_acceptance_length=1.0 + accepted / drafts if accepted is not None and drafts else None,
        per_position_rates=tuple(p / drafts for p in per_pos) if per_pos is not None and drafts else None,
        cross_check=cross_check(prometheus, per_request),
    )
