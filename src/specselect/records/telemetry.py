"""Speculative-decoding acceptance in specselect's common definitions, from the engine's own telemetry.

Each engine reads its counters into `SpecDecodeCounters` (vLLM: `engines.vllm.telemetry`, SGLang:
`engines.sglang.telemetry`); an engine that returns per-request counts with each response has its session read
them into `RequestSpecMetrics` (`summarize_per_request` sums them). `build_spec_telemetry` combines the two into
one `SpecTelemetry`. When neither is exported every number stays null: acceptance is never inferred from latency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CrossCheck",
    "PerRequestSpecSummary",
    "RequestSpecMetrics",
    "SpecDecodeCounters",
    "SpecMetricsReader",
    "SpecTelemetry",
    "build_spec_telemetry",
    "cross_check",
    "pool_telemetry",
    "summarize_per_request",
]


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


class RequestSpecMetrics(BaseModel):
    """One request's speculative-decoding counts in specselect's terms, whatever engine served it.

    The engine's session fills it from the engine's own per-request fields (`SpecMetricsReader`); nothing above
    the engines reads those fields. Null fields were not sent.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_spec_steps: int | None = None
    """Verify steps of the request."""
    num_draft_tokens: int | None = None
    num_accepted_draft_tokens: int | None = None
    mean_acceptance_length: float | None = None
    """Tokens emitted per verify step (accepted drafts + the one the target adds), as the engine computed it."""
    proposal_length: int | None = Field(default=None, ge=1)
    """Draft tokens proposed per step."""
    acceptance_histogram: tuple[int, ...] | None = None
    """Verify steps that accepted exactly j draft tokens, j = 0, 1, ..."""


SpecMetricsReader = Callable[[Mapping[str, Any]], RequestSpecMetrics | None]
"""An engine's reader of one streamed response's own top-level fields (those OpenAI's chunk schema does not define,
e.g. vLLM's `metrics`) into `RequestSpecMetrics`; None when the response carried none."""


def _add_histogram(total: list[int], counts: Sequence[int]) -> None:
    total.extend([0] * (len(counts) - len(total)))
    for j, c in enumerate(counts):
        total[j] += c


def summarize_per_request(records: Iterable[RequestSpecMetrics | None]) -> PerRequestSpecSummary:
    """Sum the per-request counts of one scenario window (None: a request that carried none)."""
    n = n_with = steps = drafted = accepted = 0
    lengths: set[int] = set()
    histogram: list[int] = []
    for m in records:
        n += 1
        if m is None or m.num_draft_tokens is None:
            continue
        n_with += 1
        drafted += m.num_draft_tokens
        accepted += m.num_accepted_draft_tokens or 0
        if m.num_spec_steps is not None:
            steps += m.num_spec_steps
        elif m.acceptance_histogram is not None:
            steps += sum(m.acceptance_histogram)
        if m.proposal_length is not None:
            lengths.add(m.proposal_length)
        if m.acceptance_histogram is not None:
            _add_histogram(histogram, m.acceptance_histogram)
    per_pos = tuple(sum(histogram[j] for j in range(i + 1, len(histogram))) for i in range(len(histogram) - 1))
    return PerRequestSpecSummary(
        n_requests=n,
        n_with_metrics=n_with,
        spec_steps=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        num_spec_tokens=max(lengths) if lengths else None,
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


def _summed(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _summed_positions(windows: Sequence[SpecTelemetry]) -> tuple[int, ...] | None:
    per_pos = [w.per_position_accepted for w in windows]
    if any(p is None for p in per_pos) or len({len(p) for p in per_pos if p is not None}) != 1:
        return None
    return tuple(sum(column) for column in zip(*(p for p in per_pos if p is not None), strict=True))


def _weighted_length(windows: Sequence[SpecTelemetry]) -> float | None:
    # Each window's own mean length weighted by its verify steps keeps the engine's definition (SGLang's differs).
    pairs = [(w.mean_acceptance_length, w.drafts) for w in windows]
    if any(length is None or not steps for length, steps in pairs):
        return None
    steps = sum(s for _, s in pairs if s)
    return sum(length * s for length, s in pairs if length is not None and s) / steps


def pool_telemetry(windows: Sequence[SpecTelemetry]) -> SpecTelemetry | None:
    """One scenario's acceptance over several server launches: the counts summed, the rates recomputed.

    When some launch lacks a count the launches cannot be summed honestly: the first launch's window is returned
    with a note saying so. None without windows; one window is returned as it is.
    """
    if len(windows) <= 1:
        return windows[0] if windows else None
    first = windows[0]
    drafts = _summed([w.drafts for w in windows])
    draft_tokens = _summed([w.draft_tokens for w in windows])
    accepted = _summed([w.accepted_tokens for w in windows])
    if drafts is None or draft_tokens is None or accepted is None or len({w.source for w in windows}) != 1:
        note = f"telemetry of the first launch only: the {len(windows)} launches' counts cannot be summed"
        return first.model_copy(update={"notes": (*first.notes, note)})
    per_pos = _summed_positions(windows)
    agreed = [w.cross_check.agree for w in windows if w.cross_check is not None]
    check = CrossCheck(agree=all(a is not False for a in agreed) if agreed else None) if agreed else None
    return SpecTelemetry(
        source=first.source,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        per_position_accepted=per_pos,
        acceptance_rate=_ratio(accepted, draft_tokens),
        mean_acceptance_length=_weighted_length(windows),
        per_position_rates=tuple(p / drafts for p in per_pos) if per_pos is not None and drafts else None,
        cross_check=check,
        notes=(*first.notes, f"summed over {len(windows)} server launches"),
    )
