"""The load generator: one scenario's warm-up, then `repeats` seeded passes over the items, closed or open loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from time import perf_counter

import aiohttp

from specselect._measure.client import RawExchange, auth_headers, open_session, send_streaming
from specselect._measure.metrics import summarize
from specselect._measure.requestplan import arrival_offsets, plan_requests
from specselect._measure.stream import build_record
from specselect.errors import ConfigError
from specselect.records.measurement import Endpoint, ErrorKind, LoadShape, ScenarioResult, ScenarioSpec
from specselect.records.telemetry import SpecMetricsReader
from specselect.records.workloads import WorkloadItem

__all__ = ["ProgressFn", "run_load"]

ProgressFn = Callable[[str], None]
"""Receives one-line progress messages; called at phase boundaries and about every 10% of requests."""


class _Sender:
    """Sends exchanges over one session and reports progress; holds no timing state of its own."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str],
        request_timeout_s: float,
        scenario: str,
        progress: ProgressFn | None,
    ) -> None:
        self.session, self.url, self.headers = session, url, headers
        self.request_timeout_s = request_timeout_s
        self.scenario, self.progress = scenario, progress
        self.done = 0
        self.total = 0
        self.next_report = 0

    def start_phase(self, total: int) -> None:
        self.done, self.total = 0, total
        self.next_report = max(1, total // 10)

    async def send(self, raw: RawExchange) -> None:
        await send_streaming(self.session, self.url, self.headers, raw, self.request_timeout_s)
        self.done += 1
        if self.progress is not None and (self.done >= self.next_report or self.done == self.total):
            self.next_report = self.done + max(1, self.total // 10)
            self.progress(f"{self.scenario}: {self.done}/{self.total} requests")


async def _closed_loop(sender: _Sender, raws: Sequence[RawExchange], concurrency: int) -> None:
    pending = iter(raws)

    async def worker() -> None:
        for raw in pending:  # the iterator is shared: each worker takes the next request when free
            await sender.send(raw)

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(raws))):
            group.create_task(worker())


async def _open_loop(sender: _Sender, raws: Sequence[RawExchange], load: LoadShape, seed: int) -> None:
    assert load.request_rate is not None  # guaranteed by LoadShape's validator
    offsets = arrival_offsets(len(raws), load.request_rate, load.burstiness, seed)
    cap = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None

    async def one(raw: RawExchange) -> None:
        if cap is None:
            await sender.send(raw)
            return
        async with cap:
            await sender.send(raw)

    async with asyncio.TaskGroup() as group:
        start = perf_counter()
        for raw, offset in zip(raws, offsets, strict=True):
            delay = start + offset - perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            raw.scheduled_time = start + offset
            group.create_task(one(raw))


def _check_limits(spec: ScenarioSpec) -> None:
    timeout = spec.scenario_timeout_s
    if spec.concurrency < 1 or spec.request_timeout_s <= 0 or (timeout is not None and timeout <= 0):
        raise ConfigError(
            f"bad limits: concurrency={spec.concurrency}, request_timeout_s={spec.request_timeout_s}, "
            f"scenario_timeout_s={timeout}",
            location=f"scenario {spec.scenario}",
            fix="use concurrency >= 1 and positive time-outs",
        )


def _connections(spec: ScenarioSpec) -> int:
    load = spec.load
    if load.is_closed:
        return spec.concurrency
    return max(spec.concurrency, load.max_concurrency) if load.max_concurrency else 0


async def _send_phases(
    sender: _Sender,
    warm: Sequence[RawExchange],
    measured: Sequence[RawExchange],
    spec: ScenarioSpec,
    before_measured: Callable[[], object] | None,
) -> float | None:
    """Warm-up, then the measured phase; the measured phase's start (perf_counter), if it started."""
    progress = sender.progress
    if warm:
        sender.start_phase(len(warm))
        if progress is not None:
            progress(f"{spec.scenario}: {len(warm)} warm-up requests")
        await _closed_loop(sender, warm, spec.concurrency)
    if before_measured is not None:
        before_measured()
    sender.start_phase(len(measured))
    if progress is not None:
        progress(f"{spec.scenario}: {len(measured)} measured requests")
    phase_start = perf_counter()
    if spec.load.is_closed:
        await _closed_loop(sender, measured, spec.concurrency)
    else:
        await _open_loop(sender, measured, spec.load, spec.seed)
    return phase_start


def _mark_unfinished(raws: Sequence[RawExchange], spec: ScenarioSpec, timed_out: bool) -> None:
    for raw in raws:
        if raw.end_time is None and raw.error_kind is None:
            raw.error_kind = ErrorKind.SCENARIO_TIMEOUT
            raw.error = (
                f"request {raw.planned.request_id}: cancelled when scenario {spec.scenario} reached its "
                f"{spec.scenario_timeout_s:g} s time-out"
                if timed_out
                else f"request {raw.planned.request_id}: never finished"
            )


async def run_load(
    endpoint: Endpoint,
    items: Sequence[WorkloadItem],
    spec: ScenarioSpec,
    *,
    progress: ProgressFn | None = None,
    before_measured: Callable[[], object] | None = None,
    read_spec_metrics: SpecMetricsReader | None = None,
) -> ScenarioResult:
    """Send one scenario's load to a running server and return every record plus the summary.

    Warm-up requests (closed loop at the concurrency, not measured) run first; then measured passes
    `first_repeat .. first_repeat + repeats - 1`, each a seeded permutation of `items`, closed loop at the
    concurrency or open loop per the load shape. Failed requests are recorded with their error; when the
    scenario time-out passes, every unfinished request is cancelled and recorded as `scenario_timeout`.
    `before_measured` is called once between warm-up and the measured phase (e.g. to snapshot the engine's
    counters, so warm-up traffic stays out of the telemetry deltas). `read_spec_metrics` is the engine's reader of
    a response's own fields into the record's speculative counts (None: they stay unread in `engine_fields`).
    """
    _check_limits(spec)
    warm_plan, measured_plan = plan_requests(endpoint, items, spec)
    warm = [RawExchange(p) for p in warm_plan]
    measured = [RawExchange(p) for p in measured_plan]
    started_at = datetime.now(UTC).isoformat()
    t0 = perf_counter()
    phase_start: float | None = None
    timed_out = False
    async with open_session(spec.request_timeout_s, _connections(spec)) as session:
        sender = _Sender(
            session=session,
            url=endpoint.url,
            headers=auth_headers(endpoint),
            request_timeout_s=spec.request_timeout_s,
            scenario=spec.scenario,
            progress=progress,
        )
        try:
            async with asyncio.timeout(spec.scenario_timeout_s):
                phase_start = await _send_phases(sender, warm, measured, spec, before_measured)
        except TimeoutError:
            timed_out = True
    _mark_unfinished((*warm, *measured), spec, timed_out)
    if progress is not None:
        progress(f"{spec.scenario}: done" + (" (scenario time-out)" if timed_out else ""))
    record = partial(build_record, scenario=spec.scenario, api=endpoint.api, t0=t0, launch=spec.launch)
    records = [record(raw, read_spec_metrics=read_spec_metrics) for raw in (*warm, *measured)]
    ends = [raw.end_time - t0 for raw in measured if raw.end_time is not None]
    start = None if phase_start is None else phase_start - t0
    summary = summarize(
        records,
        spec,
        api=endpoint.api,
        started_at=started_at,
        clock_origin_s=t0,
        phase_start_s=start,
        phase_end_s=max(ends, default=None),
    )
    return ScenarioResult(summary=summary, records=records)
