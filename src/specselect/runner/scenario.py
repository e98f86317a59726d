"""Measuring on a ready server, launched or attached: one timed scenario, and the untimed logprob parity pass."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from specselect.artifacts.assemble import outputs_for_parity
from specselect.artifacts.io import atomic_write_text, sha256_file
from specselect.artifacts.layout import RunLayout, scenario_name
from specselect.artifacts.results import ParityPassRun, ScenarioRun
from specselect.engines.openai.traffic import (
    IdleWindow,
    TrafficCheck,
    finished_requests,
    idle_window,
    judge_traffic,
    traffic_totals,
)
from specselect.engines.telemetry import (
    MetricsSnapshot,
    SpecDecodeCounters,
    SpecTelemetry,
    build_spec_telemetry,
    summarize_per_request,
)
from specselect.errors import EngineError, ServerTimeoutError
from specselect.evidence.parity import Output, compare_outputs
from specselect.evidence.samples import RequestKey
from specselect.measure import run_scenario
from specselect.measure.hostload import HostLoad, HostLoadMeter
from specselect.measure.memory import PeakMemory, PeakMemorySampler
from specselect.measure.types import (
    CacheSaltPolicy,
    Endpoint,
    ErrorKind,
    LoadShape,
    RequestRecord,
    SamplingParams,
)
from specselect.plan import Plan
from specselect.runner.progress import Progress
from specselect.workloads.model import Workload, WorkloadItem

__all__ = [
    "PARITY_LOGPROBS",
    "Serving",
    "divergent_items",
    "measure_scenario",
    "parity_scenario",
    "run_parity_pass",
]

PARITY_LOGPROBS = 2
"""Top-k logprobs the parity pass asks for: two are enough for the top-2 gap."""
_SETTLE_S = 0.5
"""Wait before a traffic scrape, so the engine has counted specselect's own last request."""
CRASH_GRACE_S = 3.0
"""After dropped connections, how long to watch the server process before calling it alive."""


@dataclass(frozen=True)
class Serving:
    """What measuring needs from a ready server, whether specselect launched it or only attached to it."""

    endpoint: Endpoint
    snapshot: Callable[[], MetricsSnapshot]
    spec_counters: Callable[[MetricsSnapshot, MetricsSnapshot], SpecDecodeCounters]
    check_alive: Callable[[], None]
    log_location: str
    log_tail: Callable[[], str | None]
    pid: int | None = None
    """The server's process, to sample peak memory; None for an endpoint specselect does not own."""
    declared_peak_memory_mb: float | None = None
    traffic_gap_s: float | None = None
    """Idle gap of the foreign-traffic check around each scenario; None skips it (a server specselect owns)."""
    metrics_exported: bool = True
    sleep: Callable[[float], None] = field(default=time.sleep)


def _sampling(plan: Plan, *, logprobs: int | None = None) -> SamplingParams:
    s = plan.sampling
    return SamplingParams(
        max_tokens=s.max_tokens, temperature=s.temperature, seed=s.seed, logprobs=logprobs, return_token_ids=True
    )


def _load_shape(plan: Plan) -> LoadShape:
    run = plan.run
    if run.load == "closed":
        return LoadShape()
    burst = run.burstiness if run.load == "gamma" else 1.0
    return LoadShape(kind="open", request_rate=run.request_rate, burstiness=burst)


def _idle(serving: Serving) -> tuple[IdleWindow, MetricsSnapshot]:
    """Scrape, wait the gap with nothing sent, scrape again; the second scrape is returned for later deltas."""
    assert serving.traffic_gap_s is not None
    serving.sleep(_SETTLE_S)
    first = serving.snapshot()
    serving.sleep(serving.traffic_gap_s)
    second = serving.snapshot()
    return idle_window(first, second, serving.traffic_gap_s), second


@contextlib.contextmanager
def _memory(serving: Serving) -> Iterator[Callable[[], PeakMemory | None]]:
    if serving.pid is None:
        yield lambda: None
        return
    with PeakMemorySampler(serving.pid, interval_s=0.2) as sampler:
        yield lambda: sampler.result


@contextlib.contextmanager
def _host_load(serving: Serving) -> Iterator[Callable[[], HostLoad | None]]:
    if serving.pid is None:  # an endpoint specselect does not own may not even be on this host
        yield lambda: None
        return
    with HostLoadMeter(serving.pid) as meter:
        yield lambda: meter.result


def _check_alive_after(serving: Serving, records: Sequence[RequestRecord]) -> None:
    """A crash, not a time-out, when the server died under the scenario.

    A killed server drops its connections a moment before the OS reports its exit, so after connection errors
    the process is watched for `CRASH_GRACE_S` before it counts as alive.
    """
    serving.check_alive()
    if not any(r.error_kind == ErrorKind.CONNECTION_ERROR for r in records):
        return
    deadline = time.monotonic() + CRASH_GRACE_S
    while time.monotonic() < deadline:
        serving.sleep(0.1)
        serving.check_alive()


def _check_some_succeeded(serving: Serving, records: list[RequestRecord], scenario: str) -> None:
    measured = [r for r in records if not r.warmup]
    if measured and not any(r.ok for r in measured):
        first = next(r for r in measured if r.error)
        raise ServerTimeoutError(
            f"every request of scenario {scenario} failed (first: {first.error_kind}: {first.error})",
            location=serving.log_location,
            fix="read the server log; raise request_timeout_s if the engine is just slow",
            log_path=serving.log_location,
            log_tail=serving.log_tail(),
        )


def _write_records(layout: RunLayout, group: str, scenario: str, records: list[RequestRecord]) -> tuple[str, str]:
    path = layout.records(group, scenario)
    atomic_write_text(path, "".join(rec.model_dump_json() + "\n" for rec in records))
    return layout.rel(path), sha256_file(path)


def measure_scenario(
    serving: Serving,
    *,
    plan: Plan,
    layout: RunLayout,
    group: str,
    workload_name: str,
    workload: Workload,
    concurrency: int,
    progress: Progress,
) -> ScenarioRun:
    """Warm up and measure one scenario; engine telemetry over the measured phase only; records saved atomically.

    With `serving.traffic_gap_s` set, the endpoint is also checked for other traffic (see
    `specselect.engines.openai.traffic`).
    """
    run = plan.run
    scen = scenario_name(workload_name, concurrency)
    idle_before: IdleWindow | None = None
    start: MetricsSnapshot | None = None
    if serving.traffic_gap_s is not None and serving.metrics_exported:
        idle_before, start = _idle(serving)
        if not traffic_totals(start):
            idle_before, start = None, None  # no known request counters: judged not_checked below
    snapshots: list[MetricsSnapshot] = []
    with _memory(serving) as peak, _host_load(serving) as host:
        result = asyncio.run(
            run_scenario(
                serving.endpoint,
                workload.items,
                scenario=scen,
                concurrency=concurrency,
                load=_load_shape(plan),
                warmup=run.warmup_requests,
                repeats=run.repeats,
                seed=run.order_seed,
                sampling=_sampling(plan),
                request_timeout_s=run.request_timeout_s,
                scenario_timeout_s=run.scenario_timeout_s,
                cache_salt_policy=CacheSaltPolicy(run.prefix_cache),
                progress=progress.info,
                before_measured=lambda: snapshots.append(serving.snapshot()),
            )
        )
    _check_alive_after(serving, result.records)
    _check_some_succeeded(serving, result.records, scen)
    after = serving.snapshot()
    measured = [r for r in result.records if not r.warmup]
    telemetry: SpecTelemetry = build_spec_telemetry(
        serving.spec_counters(snapshots[0], after) if snapshots else None,
        summarize_per_request(r.spec_metrics for r in measured if r.ok),
    )
    traffic: TrafficCheck | None = None
    if serving.traffic_gap_s is not None:
        idle_after, finished = None, None
        if serving.metrics_exported and start is not None:
            idle_after, end = _idle(serving)
            begin, done = finished_requests(start), finished_requests(end)
            finished = None if begin is None or done is None else done - begin
        traffic = judge_traffic(
            exported=serving.metrics_exported,
            idle_before=idle_before,
            idle_after=idle_after,
            requests_sent=len(result.records),
            requests_finished=finished,
        )
        if traffic.contaminated:
            progress.warn(f"{group} {scen}: {traffic.reason}")
    load = host()
    limit = plan.thresholds.max_host_foreign_cpu_share
    if load is not None and limit is not None and load.foreign_share > limit:
        progress.warn(
            f"{group} {scen}: host busy: {load.foreign_share:.0%} of all CPU time went to other processes "
            f"(limit {limit:.0%}): these timings are not trusted; measure again on a quiet machine"
        )
    rel, digest = _write_records(layout, group, scen, result.records)
    summary = result.summary
    progress.info(
        f"{scen}: {summary.n_success}/{summary.n_requests} ok, "
        f"{summary.output_throughput_tok_s or 0:.1f} tok/s, acceptance "
        + (f"{telemetry.acceptance_rate:.2f}" if telemetry.acceptance_rate is not None else "n/a")
    )
    memory = peak()
    if memory is not None and memory.mb is not None:
        source = "measured"
    else:
        source = "declared" if serving.declared_peak_memory_mb is not None else "not_available"
    return ScenarioRun(
        scenario=scen,
        workload=workload_name,
        workload_identity=workload.identity,
        concurrency=concurrency,
        status="completed",
        summary=summary,
        telemetry=telemetry,
        peak_memory=memory,
        records_path=rel,
        records_sha256=digest,
        n_records=len(result.records),
        peak_memory_source=source,
        declared_peak_memory_mb=serving.declared_peak_memory_mb if source == "declared" else None,
        traffic=traffic,
        host_load=load,
    )


def divergent_items(reference: Mapping[RequestKey, Output], records: Sequence[RequestRecord]) -> set[str]:
    """Items whose output differs from the reference (the baseline's timed outputs) in any repeat.

    Token ids when the reference has them, else text; a failed request on either side is no divergence.
    """
    tokens = any(isinstance(v, list) for v in reference.values())
    out: set[str] = set()
    for key, output in outputs_for_parity(records, tokens=tokens).items():
        if key not in reference:
            continue
        parity = compare_outputs(reference[key], output)
        if parity is not None and not parity.equal:
            out.add(key[0])
    return out


def parity_scenario(workload_name: str) -> str:
    """The records' scenario name of a workload's parity pass: `<workload>-c1.parity`."""
    return f"{scenario_name(workload_name, 1)}.parity"


def run_parity_pass(
    serving: Serving,
    *,
    plan: Plan,
    layout: RunLayout,
    group: str,
    workload_name: str,
    items: Sequence[WorkloadItem],
    all_items: bool,
    progress: Progress,
) -> ParityPassRun:
    """One untimed request per item at concurrency 1 with top-2 logprobs; failures are recorded, never raised."""
    run = plan.run
    scen = parity_scenario(workload_name)
    sent = None if all_items else tuple(item.id for item in items)
    started = time.monotonic()
    try:
        result = asyncio.run(
            run_scenario(
                serving.endpoint,
                items,
                scenario=scen,
                concurrency=1,
                warmup=0,
                repeats=1,
                seed=run.order_seed,
                sampling=_sampling(plan, logprobs=PARITY_LOGPROBS),
                request_timeout_s=run.request_timeout_s,
                scenario_timeout_s=run.scenario_timeout_s,
                cache_salt_policy=CacheSaltPolicy(run.prefix_cache),
            )
        )
        _check_alive_after(serving, result.records)
    except EngineError as exc:
        return ParityPassRun(
            workload=workload_name,
            scenario=scen,
            status="failed",
            reason=exc.one_line(),
            items=sent,
            seconds=round(time.monotonic() - started, 3),
        )
    records = result.records
    ok = [r for r in records if r.ok]
    with_lp = sum(1 for r in ok if r.logprobs)
    rel, digest = _write_records(layout, group, scen, records)
    failed = not ok
    reason = None
    if failed:
        first = next((r for r in records if r.error), None)
        reason = f"every request failed (first: {first.error})" if first else "no requests"
    elif not with_lp:
        reason = "the engine returned no logprobs: divergences stay unclassified"
    progress.info(f"{scen}: {len(ok)}/{len(records)} ok, {with_lp} with logprobs (untimed, for parity only)")
    return ParityPassRun(
        workload=workload_name,
        scenario=scen,
        status="failed" if failed else "completed",
        reason=reason,
        records_path=rel,
        records_sha256=digest,
        n_records=len(records),
        n_ok=len(ok),
        n_with_logprobs=with_lp,
        items=sent,
        seconds=round(time.monotonic() - started, 3),
    )
