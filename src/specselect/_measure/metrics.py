"""Per-request derived latencies and the per-scenario summary (numpy percentiles, measured requests only)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Literal

import numpy as np

from specselect.records.measurement import RequestRecord, ScenarioSpec, ScenarioSummary, Stats

__all__ = [
    "decode_tok_s",
    "e2e_ms",
    "itl_ms",
    "stats_of",
    "summarize",
    "tpot_ms",
    "ttft_ms",
]


def ttft_ms(rec: RequestRecord) -> float | None:
    """Time to first token: send -> first chunk carrying a generated token."""
    if rec.send_time_s is None or rec.first_token_time_s is None:
        return None
    return (rec.first_token_time_s - rec.send_time_s) * 1000.0


def e2e_ms(rec: RequestRecord) -> float | None:
    """End-to-end latency: send -> end of the stream."""
    if rec.send_time_s is None or rec.end_time_s is None:
        return None
    return (rec.end_time_s - rec.send_time_s) * 1000.0


def tpot_ms(rec: RequestRecord) -> float | None:
    """Time per output token after the first: (E2E - TTFT) / (completion_tokens - 1); None for <= 1 token."""
    ttft, e2e, n = ttft_ms(rec), e2e_ms(rec), rec.completion_tokens
    if ttft is None or e2e is None or n is None or n < 2:
        return None
    return (e2e - ttft) / (n - 1)


def decode_tok_s(rec: RequestRecord) -> float | None:
    """Decode speed after the first token: (completion_tokens - 1) / (E2E - TTFT) in tokens per second."""
    ttft, e2e, n = ttft_ms(rec), e2e_ms(rec), rec.completion_tokens
    if ttft is None or e2e is None or n is None or n < 2 or e2e <= ttft:
        return None
    return (n - 1) / ((e2e - ttft) / 1000.0)


def itl_ms(rec: RequestRecord) -> list[float]:
    """Inter-CHUNK latencies of one request (one value per gap between output chunks, not per token)."""
    times = rec.chunk_times_s
    return [(b - a) * 1000.0 for a, b in pairwise(times)]


def stats_of(values: Iterable[float | None]) -> Stats:
    """mean, p50, p90, p95, p99 (numpy linear interpolation) and n over the non-None values."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return Stats()
    p50, p90, p95, p99 = np.percentile(arr, [50, 90, 95, 99])
    return Stats(
        n=int(arr.size), mean=float(arr.mean()), p50=float(p50), p90=float(p90), p95=float(p95), p99=float(p99)
    )


def summarize(
    records: Sequence[RequestRecord],
    spec: ScenarioSpec,
    *,
    api: Literal["chat", "completions"],
    started_at: str,
    clock_origin_s: float,
    phase_start_s: float | None,
    phase_end_s: float | None,
) -> ScenarioSummary:
    """The scenario summary over measured (non-warm-up) records; latencies from successful requests only.

    Throughputs divide by the measured phase's wall time (`phase_start_s` -> `phase_end_s`).
    """
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    errors = Counter(str(r.error_kind) for r in measured if not r.ok)
    duration = None
    if phase_start_s is not None and phase_end_s is not None and phase_end_s > phase_start_s:
        duration = phase_end_s - phase_start_s
    out_tokens = sum(r.completion_tokens or 0 for r in ok)
    return ScenarioSummary(
        scenario=spec.scenario,
        api=api,
        started_at=started_at,
        clock_origin_s=clock_origin_s,
        concurrency=spec.concurrency,
        load=spec.load,
        warmup=spec.warmup,
        repeats=spec.repeats,
        first_repeat=spec.first_repeat,
        seed=spec.seed,
        sampling_key=spec.sampling.key,
        cache_salt_policy=spec.cache_salt_policy,
        n_requests=len(measured),
        n_success=len(ok),
        n_error=len(measured) - len(ok),
        errors=dict(sorted(errors.items())),
        duration_s=duration,
        ttft_ms=stats_of(ttft_ms(r) for r in ok),
        tpot_ms=stats_of(tpot_ms(r) for r in ok),
        e2e_ms=stats_of(e2e_ms(r) for r in ok),
        itl_ms=stats_of(v for r in ok for v in itl_ms(r)),
        tokens_per_chunk=stats_of(float(n) for r in ok for n in r.chunk_tokens if n is not None),
        decode_tok_s=stats_of(decode_tok_s(r) for r in ok),
        output_throughput_tok_s=out_tokens / duration if duration else None,
        request_throughput_rps=len(ok) / duration if duration else None,
        total_prompt_tokens=sum(r.prompt_tokens or 0 for r in ok),
        total_output_tokens=out_tokens,
        n_spec_metrics=sum(1 for r in ok if r.speculative is not None),
    )
