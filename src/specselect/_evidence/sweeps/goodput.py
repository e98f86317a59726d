"""Goodput under latency SLOs: requests per second that meet the TTFT and TPOT limits."""

from __future__ import annotations

import math
from collections.abc import Iterable

from specselect._evidence.samples import RecordLike
from specselect.records.evidence.sweeps import Goodput

__all__ = ["goodput"]


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
