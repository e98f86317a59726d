"""Speculative acceptance of an SGLang server over one scenario window, in specselect's common definitions.

Common definitions (those of `engines.telemetry.SpecTelemetry`, shared with vLLM):
- `drafts`: verify steps counted per request (one batch step verifying 8 requests counts 8); SGLang's
  per-request `spec_verify_ct` and its scheduler's `forward_ct` count the same way.
- `accepted_tokens`: accepted proposed tokens, bonus token EXCLUDED.
- `mean_acceptance_length`: tokens emitted per verify step per request, bonus token INCLUDED,
  = 1 + accepted_tokens / drafts. SGLang's `avg_spec_accept_length` already counts the bonus token
  (its accept length is correct drafts + 1), so it is this number as is: never add one to it.
- `acceptance_rate`: accepted_tokens / draft_tokens, draft_tokens = drafts x k, defined only for chain
  drafting (EAGLE/NEXTN/STANDALONE with top-k 1, DFLASH), where every step verifies k proposed tokens; null
  for tree drafting (eagle_topk > 1, NGRAM), whose proposed tokens do not lie on one path.

Sources, best first (`SglangAcceptance.source`):
1. `server_info_counts`: per-rank cumulative counts in `/server_info`, when the version exposes them:
   exact deltas.
2. `prometheus_counters`: `sglang:spec_verify_calls_total`, `sglang:generation_tokens_total` and
   `sglang:num_requests_total` (servers started with `--enable-metrics`, versions that have the verify
   counter). SGLang adds a request's numbers when it finishes; each request's first token comes from
   prefill, so emitted = delta(generation) - delta(requests) and accepted = emitted - delta(verify).
3. `server_info_average`: `avg_spec_accept_length` alone is a server-cumulative ratio with no counts, so
   two readings do not give the window's value. It is used only when no speculative step had been
   counted before the window (a fresh server); otherwise every number is null and `reason` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from specselect._engines.prometheus import MetricsSnapshot, counter_delta
from specselect._engines.sglang.serverinfo import ServerInfoReading, ServerInfoSnapshot
from specselect.errors import ProtocolError
from specselect.records.telemetry import CrossCheck, SpecDecodeCounters, SpecTelemetry

__all__ = [
    "MEAN_ACCEPTANCE_DEFINITION",
    "SGLANG_COUNTERS",
    "SglangAcceptance",
    "SglangCounterDelta",
    "acceptance_from_snapshots",
    "acceptance_to_counters",
    "acceptance_window",
    "sglang_counter_delta",
    "sglang_spec_counters",
    "to_spec_telemetry",
]

MEAN_ACCEPTANCE_DEFINITION = (
    "mean_acceptance_length = tokens emitted per verify step per request, bonus token included "
    "(= 1 + accepted/drafts); SGLang's avg_spec_accept_length uses this definition"
)
SGLANG_COUNTERS: Mapping[str, str] = MappingProxyType(
    {
        "generation_tokens": "sglang:generation_tokens",
        "verify_calls": "sglang:spec_verify_calls",
        "requests": "sglang:num_requests",
    }
)
"""SGLang counter base names (exposed with a `_total` suffix), added when a request finishes."""

_CROSS_CHECK_TOLERANCE = 0.05
_COMMON_SOURCES = frozenset(get_args(SpecTelemetry.model_fields["source"].annotation))
_COUNTER_STYLES = frozenset(get_args(SpecDecodeCounters.model_fields["style"].annotation))


class SglangCounterDelta(BaseModel):
    """Deltas of SGLang's request counters over a window (None = not exported by this server)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generation_tokens: int | None = None
    verify_calls: int | None = None
    requests: int | None = None


def sglang_counter_delta(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SglangCounterDelta:
    """Deltas of `SGLANG_COUNTERS` between two scrapes for the served model; ProtocolError if one went back."""
    return SglangCounterDelta(
        **{field: counter_delta(before, after, base, model_name) for field, base in SGLANG_COUNTERS.items()}
    )


class SglangAcceptance(BaseModel):
    """One window's acceptance as SGLang reported it, converted to the common definitions (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    source: Literal["server_info_counts", "prometheus_counters", "server_info_average", "none"]
    exact: bool = False
    algorithm: str | None = None
    proposals_per_step: int | None = None
    drafts: int | None = None
    accepted_tokens: int | None = None
    draft_tokens: int | None = None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    engine_accept_length_before: tuple[float | None, ...] = ()
    """SGLang's own `avg_spec_accept_length` per rank before the window (server-cumulative, bonus included)."""
    engine_accept_length_after: tuple[float | None, ...] = ()
    cross_check: CrossCheck | None = None
    reason: str | None = None
    """Why numbers are null, when they are."""
    notes: tuple[str, ...] = ()
    definition: str = MEAN_ACCEPTANCE_DEFINITION


def _from_counts(before: ServerInfoReading | None, after: ServerInfoReading | None) -> tuple[int, int] | None:
    """(emitted, steps) deltas from per-rank counts, when both readings carry them for every rank."""
    if before is None or after is None or len(before.states) != len(after.states) or not after.states:
        return None
    pairs = list(zip(before.states, after.states, strict=True))
    if any(s.accept_tokens is None or s.verify_steps is None for pair in pairs for s in pair):
        return None
    emitted = sum((a.accept_tokens or 0) - (b.accept_tokens or 0) for b, a in pairs)
    steps = sum((a.verify_steps or 0) - (b.verify_steps or 0) for b, a in pairs)
    if emitted < 0 or steps < 0:
        raise ProtocolError(
            "server_info step counts went backwards: the server restarted between readings",
            location="/server_info",
            fix="measure again on one server life",
        )
    return emitted, steps


def _from_counters(counters: SglangCounterDelta | None) -> tuple[int, int] | str | None:
    """(emitted, steps) from the request counters; a reason string when they are inconsistent."""
    if counters is None or None in (counters.generation_tokens, counters.verify_calls, counters.requests):
        return None
    emitted = (counters.generation_tokens or 0) - (counters.requests or 0)
    steps = counters.verify_calls or 0
    if emitted < steps:
        return (
            f"inconsistent counters: {counters.generation_tokens} generated tokens over {counters.requests} "
            f"requests cannot fill {steps} verify steps"
        )
    return emitted, steps


def _numbers(emitted: int, steps: int, k: int | None) -> dict[str, Any]:
    if steps == 0:  # no verify step in the window: speculation did not run
        return {"drafts": 0, "accepted_tokens": 0, "draft_tokens": 0 if k is not None else None}
    accepted = emitted - steps
    draft_tokens = steps * k if k is not None else None
    return {
        "drafts": steps,
        "accepted_tokens": accepted,
        "draft_tokens": draft_tokens,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": emitted / steps,
    }


def _averages(reading: ServerInfoReading | None) -> tuple[float | None, ...]:
    return tuple(s.avg_spec_accept_length for s in reading.states) if reading is not None else ()


_COUNTER_NOTE = (
    "from request counters, added when a request finishes: the last verify step of a request can be "
    "cut by max_tokens or a stop string, so accepted_tokens reads slightly low"
)


def _cross_check(counts: tuple[int, int], from_counters: tuple[int, int] | None) -> CrossCheck | None:
    """The window's mean acceptance length from `/server_info` counts against the request counters'."""
    if from_counters is None or not counts[1] or not from_counters[1]:
        return None
    mean_counts, mean_counters = counts[0] / counts[1], from_counters[0] / from_counters[1]
    agree = abs(mean_counts - mean_counters) <= _CROSS_CHECK_TOLERANCE * mean_counts
    detail = f"mean acceptance length: server_info {mean_counts:.4f}, counters {mean_counters:.4f}"
    return CrossCheck(agree=agree, details=(detail,))


def _from_average(
    before: ServerInfoReading | None,
    after: ServerInfoReading | None,
    counters: SglangCounterDelta | None,
    base: dict[str, Any],
    notes: list[str],
) -> SglangAcceptance:
    """Only server-cumulative averages: the window's value when the server had no earlier step, else none."""
    reading = after or before
    k = reading.proposals_per_step if reading is not None else None
    before_avgs = [a for a in _averages(before) if a is not None]
    after_avgs = [a for a in _averages(after) if a is not None]
    if not before_avgs and len(after_avgs) == 1:
        mean = after_avgs[0]
        interval = reading.decode_log_interval if reading is not None else None
        notes.append(
            "server-cumulative average read on a server with no earlier speculative step; SGLang folds steps "
            f"into it every decode_log_interval ({interval or 'default'}) decode batches, so the last ones "
            "may be missing"
        )
        return SglangAcceptance(
            source="server_info_average",
            mean_acceptance_length=mean,
            acceptance_rate=(mean - 1.0) / k if k else None,
            notes=tuple(notes),
            **base,
        )
    if after is None and counters is None:
        reason = "no /server_info answer and no counters were read"
    elif len(after_avgs) > 1 and not before_avgs:
        reason = "several data-parallel ranks report averages without step counts: they cannot be combined"
    else:
        reason = (
            "/server_info reports only the server-cumulative avg_spec_accept_length, without step counts, and "
            "the server had speculative steps before this window; the window's value needs the request "
            "counters (sglang:spec_verify_calls_total, exported with --enable-metrics by newer SGLang)"
        )
    return SglangAcceptance(source="none", reason=reason, notes=tuple(notes), **base)


def acceptance_window(
    before: ServerInfoReading | None, after: ServerInfoReading | None, counters: SglangCounterDelta | None
) -> SglangAcceptance:
    """The acceptance of the window between two `/server_info` readings and the counter deltas over it."""
    reading = after or before
    algorithm = reading.algorithm if reading is not None else None
    k = reading.proposals_per_step if reading is not None else None
    base: dict[str, Any] = {
        "algorithm": algorithm,
        "proposals_per_step": k,
        "engine_accept_length_before": _averages(before),
        "engine_accept_length_after": _averages(after),
    }
    if reading is not None and algorithm is None:
        return SglangAcceptance(source="none", reason="target-only server: no speculative algorithm", **base)
    notes: list[str] = []
    if k is None and algorithm is not None:
        notes.append("tree drafting or unknown verify width: acceptance_rate is not defined")
    counts = _from_counts(before, after)
    from_counters = _from_counters(counters)
    if isinstance(from_counters, str):
        notes.append(from_counters)
        from_counters = None
    if counts is not None:
        return SglangAcceptance(
            source="server_info_counts",
            exact=True,
            cross_check=_cross_check(counts, from_counters),
            notes=tuple(notes),
            **base,
            **_numbers(*counts, k),
        )
    if from_counters is not None:
        return SglangAcceptance(
            source="prometheus_counters", notes=(*notes, _COUNTER_NOTE), **base, **_numbers(*from_counters, k)
        )
    return _from_average(before, after, counters, base, notes)


def acceptance_from_snapshots(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SglangAcceptance:
    """`acceptance_window` from two snapshots (ServerInfoSnapshot carries the /server_info reading)."""
    info_before = before.server_info if isinstance(before, ServerInfoSnapshot) else None
    info_after = after.server_info if isinstance(after, ServerInfoSnapshot) else None
    counters = sglang_counter_delta(before, after, model_name)
    exported = any(v is not None for v in counters.model_dump().values())
    return acceptance_window(info_before, info_after, counters if exported else None)


def to_spec_telemetry(acceptance: SglangAcceptance) -> SpecTelemetry:
    """The common `SpecTelemetry` of an SGLang window (same definitions; see the module docstring).

    Counter-derived numbers are `prometheus`; server_info numbers need the `server_info` source in
    `SpecTelemetry` (requested from its owner) and are reported `not_exported` until the model has it.
    `notes` (definition, reason, caveats) are carried when the model has that field.
    """
    if acceptance.source == "prometheus_counters":
        source = "prometheus"
    elif acceptance.source in ("server_info_counts", "server_info_average") and "server_info" in _COMMON_SOURCES:
        source = "server_info"
    else:
        source = "not_exported"
    payload: dict[str, Any] = {"source": source}
    if source != "not_exported":
        payload.update(
            drafts=acceptance.drafts,
            draft_tokens=acceptance.draft_tokens,
            accepted_tokens=acceptance.accepted_tokens,
            acceptance_rate=acceptance.acceptance_rate,
            mean_acceptance_length=acceptance.mean_acceptance_length,
            cross_check=acceptance.cross_check,
        )
    if "notes" in SpecTelemetry.model_fields:
        reason = (acceptance.reason,) if acceptance.reason else ()
        payload["notes"] = (acceptance.definition, *reason, *acceptance.notes)
    return SpecTelemetry.model_validate(payload)


def acceptance_to_counters(acceptance: SglangAcceptance, model_name: str) -> SpecDecodeCounters:
    """The window in vLLM's counter shape (`SpecDecodeCounters`), when SGLang gave counts.

    A window known only from an average (or not at all) is `exported=False`: counters need counts. The
    style is `sglang_counters` once `SpecDecodeCounters` has it (requested from its owner), else `none`.
    """
    if acceptance.source not in ("server_info_counts", "prometheus_counters"):
        return SpecDecodeCounters(model_name=model_name, exported=False)
    return SpecDecodeCounters.model_validate(
        {
            "model_name": model_name,
            "exported": True,
            "drafts": acceptance.drafts,
            "draft_tokens": acceptance.draft_tokens,
            "accepted_tokens": acceptance.accepted_tokens,
            "style": "sglang_counters" if "sglang_counters" in _COUNTER_STYLES else "none",
        }
    )


def sglang_spec_counters(before: MetricsSnapshot, after: MetricsSnapshot, model_name: str) -> SpecDecodeCounters:
    """Counter deltas of a window, for readers keyed by metrics flavor (an attached SGLang endpoint).

    From plain /metrics scrapes only the request counters are known: drafts and accepted tokens, with
    draft_tokens None (the verify width is in /server_info, which `ServerInfoSnapshot`s carry).
    """
    return acceptance_to_counters(acceptance_from_snapshots(before, after, model_name), model_name)
