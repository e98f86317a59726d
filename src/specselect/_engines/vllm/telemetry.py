"""vLLM's speculative-decoding telemetry in specselect's terms: its counters on `/metrics` (`SpecDecodeCounters`)
and the per-request `metrics` object a response carries (`RequestSpecMetrics`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from specselect._engines.prometheus import LabelKey, MetricsSnapshot, counter_delta, counter_deltas
from specselect.errors import ProtocolError
from specselect.records.telemetry import RequestSpecMetrics, SpecDecodeCounters

__all__ = ["SPEC_DECODE_METRICS", "request_spec_metrics", "spec_decode_delta"]

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


def _positions(per_pos: Mapping[LabelKey, int]) -> tuple[int, ...]:
    indexed: list[tuple[int, int]] = []
    for key, value in per_pos.items():
        position = dict(key).get("position")
        if position is None:
            continue
        if not position.isdigit():
            raise ProtocolError(
                f"counter {SPEC_DECODE_METRICS['per_position']} has position label {position[:40]!r}, not a number",
                location="/metrics",
                fix="check the server's metrics endpoint",
            )
        indexed.append((int(position), value))
    return tuple(v for _, v in sorted(indexed))


def spec_decode_delta(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
    """Deltas of the spec-decode counters between two scrapes, for the served model `model_name`."""
    drafts = counter_delta(before, after, SPEC_DECODE_METRICS["drafts"], model_name)
    draft_tokens = counter_delta(before, after, SPEC_DECODE_METRICS["draft_tokens"], model_name)
    accepted = counter_delta(before, after, SPEC_DECODE_METRICS["accepted_tokens"], model_name)
    per_pos = counter_deltas(before, after, SPEC_DECODE_METRICS["per_position"], model_name)
    if draft_tokens is None or accepted is None:
        return SpecDecodeCounters(model_name=model_name, exported=False)
    return SpecDecodeCounters(
        model_name=model_name,
        exported=True,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        per_position_accepted=_positions(per_pos) if per_pos else None,
        style="v1_counters" if drafts is not None else "v0_counters",
    )


def _count(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
        raise ProtocolError(
            f"per-request metric {key} is {value!r}, expected a count",
            location="response.metrics.speculative_decoding",
            fix="check the engine version",
        )
    return int(value)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _histogram(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return None
    return tuple(_count(c, "acceptance_histogram") or 0 for c in value)


def request_spec_metrics(extras: Mapping[str, Any]) -> RequestSpecMetrics | None:
    """A response's per-request `metrics` (its `speculative_decoding` part, or the counts directly, as older builds
    sent them); None when it carried no draft counts. A count that is not one is a `ProtocolError`."""
    raw = extras.get("metrics")
    part = raw.get("speculative_decoding", raw) if isinstance(raw, Mapping) else None
    if not isinstance(part, Mapping) or part.get("num_draft_tokens") is None:
        return None
    return RequestSpecMetrics(
        num_spec_steps=_count(part.get("num_spec_steps"), "num_spec_steps"),
        num_draft_tokens=_count(part.get("num_draft_tokens"), "num_draft_tokens"),
        num_accepted_draft_tokens=_count(part.get("num_accepted_draft_tokens"), "num_accepted_draft_tokens"),
        mean_acceptance_length=_finite(part.get("mean_acceptance_length")),
        proposal_length=_count(part.get("num_spec_tokens"), "num_spec_tokens") or None,
        acceptance_histogram=_histogram(part.get("acceptance_histogram")),
    )
