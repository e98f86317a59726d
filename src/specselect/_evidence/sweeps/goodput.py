"""Goodput under latency SLOs: requests per second that meet the TTFT and TPOT limits."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect._evidence.samples import RecordLike

__all__ = [
    "GOODPUT_RULE",
    "GOODPUT_SCHEMA_VERSION",
    "Goodput",
    "GoodputStatus",
    "goodput",
]

GOODPUT_SCHEMA_VERSION = 1

GoodputStatus = Literal["computed", "not_computed"]

GOODPUT_RULE = (
    "Over the measured (non-warm-up) requests: TTFT = first_token - send; TPOT = (end - first_token) / "
    "(completion_tokens - 1). A request meets the SLO when it succeeded, TTFT <= slo_ttft_ms and TPOT <= "
    "slo_tpot_ms; a limit that is None is not applied. A failed request (error) never meets it. A one-token "
    "request has no inter-token time, so it meets the TPOT limit (its latency is all TTFT). A successful request "
    "missing a time or token count that an applied limit needs is 'unmeasured' and does not meet it. "
    "goodput_rps = requests meeting the SLO / duration_s; throughput_rps = successful requests / duration_s. "
    "Both limits None -> status not_computed (goodput_rps, n_met and share_met None)."
)


class Goodput(BaseModel):
    """Requests/s meeting the TTFT and TPOT limits over the measured phase of one candidate in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = GOODPUT_SCHEMA_VERSION
    status: GoodputStatus
    n_requests: int
    """Measured requests, failed ones included (warm-up excluded)."""
    n_met: int | None
    share_met: float | None
    """n_met / n_requests; None with no requests or when not computed."""
    goodput_rps: float | None
    throughput_rps: float
    n_errors: int
    n_single_token: int
    n_unmeasured: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    duration_s: float
    rule: str = GOODPUT_RULE


def _span_ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    value = (float(end) - float(start)) * 1000.0
    return value if math.isfinite(value) and value >= 0 else None


def _check_limit(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"goodput: {name}={value!r} must be a positive finite number of milliseconds, or None")


def _tpot_ms(record: RecordLike) -> tuple[float | None, bool]:
    """(TPOT in ms or None, single_token)."""
    tokens = record.completion_tokens
    if tokens == 1:
        return None, True
    if tokens is None or tokens < 2:
        return None, False
    decode = _span_ms(record.first_token_time_s, record.end_time_s)
    return (None if decode is None else decode / (tokens - 1)), False


def goodput(
    records: Iterable[RecordLike], *, slo_ttft_ms: float | None, slo_tpot_ms: float | None, duration_s: float
) -> Goodput:
    """Goodput over the measured phase lasting `duration_s`; see `GOODPUT_RULE`.

    Raises ValueError for a non-positive duration or limit.
    """
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f"goodput: duration_s={duration_s!r} must be a positive finite number of seconds")
    _check_limit("slo_ttft_ms", slo_ttft_ms)
    _check_limit("slo_tpot_ms", slo_tpot_ms)
    n_requests = n_errors = n_single = n_unmeasured = n_met = 0
    for record in records:
        if record.warmup:
            continue
        n_requests += 1
        if record.error is not None:
            n_errors += 1
            continue
        tpot, single = _tpot_ms(record)
        n_single += single
        ttft = _span_ms(record.send_time_s, record.first_token_time_s)
        missing = (slo_ttft_ms is not None and ttft is None) or (
            slo_tpot_ms is not None and tpot is None and not single
        )
        if missing:
            n_unmeasured += 1
            continue
        ttft_ok = slo_ttft_ms is None or (ttft is not None and ttft <= slo_ttft_ms)
        tpot_ok = slo_tpot_ms is None or single or (tpot is not None and tpot <= slo_tpot_ms)
        n_met += ttft_ok and tpot_ok
    computed = slo_ttft_ms is not None or slo_tpot_ms is not None
    return Goodput(
        status="computed" if computed else "not_computed",
        n_requests=n_requests,
        n_met=n_met if computed else None,
        share_met=n_met / n_requests if computed and n_requests else None,
        goodput_rps=n_met / duration_s if computed else None,
        throughput_rps=(n_requests - n_errors) / duration_s,
        n_errors=n_errors,
        n_single_token=n_single,
        n_unmeasured=n_unmeasured,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        duration_s=duration_s,
    )
