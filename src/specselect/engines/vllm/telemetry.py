"""vLLM's speculative-decoding counters on `/metrics`, read into the common `SpecDecodeCounters`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from specselect.engines.acceptance import SpecDecodeCounters
from specselect.engines.prometheus import LabelKey, MetricsSnapshot, counter_delta, counter_deltas
from specselect.errors import ProtocolError

__all__ = ["SPEC_DECODE_METRICS", "spec_decode_delta"]

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
