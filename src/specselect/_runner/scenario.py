"""Measuring on a ready server, launched or attached: one timed scenario, and the untimed logprob parity pass."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_text, sha256_file
from specselect._engines.base import Session
from specselect._engines.devices import DeviceWatch, own_processes
from specselect._engines.prometheus import MetricsSnapshot
from specselect._evidence.parity import compare_outputs, has_token_ids, outputs_for_parity
from specselect._evidence.pipeline import InMemoryRecords, parity_scenario, scenario_name
from specselect._measure import run_load
from specselect._measure.hostload import HostLoadMeter
from specselect._measure.memory import PeakMemorySampler
from specselect._measure.poller import PeakGauge, Poller
from specselect._plan import Plan
from specselect._runner.progress import Progress
from specselect.errors import EngineError, ServerTimeoutError
from specselect.records.capacity import DeviceLoad, KvLoad
from specselect.records.endpoints import TrafficCheck
from specselect.records.group import ParityPassRun, ScenarioRun
from specselect.records.host import HostLoad
from specselect.records.measurement import (
    CacheSaltPolicy,
    Endpoint,
    ErrorKind,
    LoadShape,
    RequestRecord,
    SamplingParams,
    ScenarioResult,
    ScenarioSpec,
)
from specselect.records.memory import PeakMemory
from specselect.records.responsecache import PassResponseCache
from specselect.records.telemetry import SpecTelemetry, build_spec_telemetry, summarize_per_request
from specselect.records.workloads import Workload, WorkloadItem

__all__ = [
    "PARITY_LOGPROBS",
    "Measuring",
    "divergent_items",
    "measure_scenario",
    "run_parity_pass",
]

PARITY_LOGPROBS = 2
"""Top-k logprobs the parity pass asks for: two are enough for the top-2 gap."""
SAMPLE_PASS_CONCURRENCY = 8
"""The distribution test's samples are untimed: sent eight at a time, as a server batches them anyway."""
CRASH_GRACE_S = 3.0
"""After dropped connections, how long to watch the server process before calling it alive."""
KV_SCRAPE_INTERVAL_S = 1.0
"""How often the KV-cache gauge is scraped under load: a scrape costs the server little, once a second."""
DEVICE_READ_INTERVAL_S = 1.0
"""How often the launch's devices are read for other processes under load."""


def _endpoint(session: Session) -> Endpoint:
    return Endpoint(base_url=session.base_url, model=session.model, api_key_env=session.api_key_env)


def _sampling(plan: Plan, temperature: float, *, logprobs: int | None = None) -> SamplingParams:
    s = plan.sampling
    sampled = temperature > 0
    return SamplingParams(
        max_tokens=s.max_tokens,
        temperature=temperature,
        top_p=s.top_p if sampled else None,
        top_k=s.top_k or None,
        seed=s.seed,
        seed_per_request=sampled,
        in_request=s.in_request,
        logprobs=logprobs,
        return_token_ids=True,
    )


def _spec(
    plan: Plan,
    scenario: str,
    *,
    scope: str,
    temperature: float,
    concurrency: int = 1,
    load: LoadShape | None = None,
    warmup: int = 0,
    logprobs: int | None = None,
) -> ScenarioSpec:
    """One pass at `concurrency` (more passes: `repeats`) and `temperature`, in the plan's order, sampling and
    time-outs."""
    run = plan.run
    return ScenarioSpec(
        scenario=scenario,
        concurrency=concurrency,
        load=load or LoadShape(),
        warmup=warmup,
        seed=run.order_seed,
        sampling=_sampling(plan, temperature, logprobs=logprobs),
        request_timeout_s=run.request_timeout_s,
        scenario_timeout_s=run.scenario_timeout_s,
        cache_salt_policy=CacheSaltPolicy(run.prefix_cache),
        seed_scope=scope,
    )


def _load_shape(plan: Plan) -> LoadShape:
    run = plan.run
    if run.load == "closed":
        return LoadShape()
    burst = run.burstiness if run.load == "gamma" else 1.0
    return LoadShape(kind="open", request_rate=run.request_rate, burstiness=burst)


@contextlib.contextmanager
def _memory(session: Session) -> Iterator[Callable[[], PeakMemory | None]]:
    if session.pid is None:
        yield lambda: None
        return
    with PeakMemorySampler(session.pid, gpu_devices=session.devices, interval_s=0.2) as sampler:
        yield lambda: sampler.result


@contextlib.contextmanager
def _host_load(session: Session) -> Iterator[Callable[[], HostLoad | None]]:
    if session.pid is None:  # an endpoint specselect does not own may not even be on this host
        yield lambda: None
        return
    with HostLoadMeter(session.pid) as meter:
        yield lambda: meter.result


@contextlib.contextmanager
def _kv_peak(session: Session) -> Iterator[PeakGauge | None]:
    """The KV cache's peak use over the block (scraped before, every second, and after); None without a reader."""
    kv = session.kv
    if kv is None:
        yield None
        return
    gauge = PeakGauge(kv.usage)
    with Poller(gauge, interval_s=KV_SCRAPE_INTERVAL_S, name="specselect-kv-usage"):
        yield gauge


@contextlib.contextmanager
def _device_load(session: Session) -> Iterator[Callable[[], DeviceLoad | None]]:
    """Other processes on the launch's devices, read before the scenario's first request and during it."""
    if not session.devices:
        yield lambda: None
        return
    watch = DeviceWatch(session.devices, lambda: own_processes(session.pid))
    with watch, Poller(watch, interval_s=DEVICE_READ_INTERVAL_S, name="specselect-device-watch"):
        yield lambda: watch.result


def _kv_load(
    session: Session, gauge: PeakGauge | None, before: MetricsSnapshot | None, after: MetricsSnapshot
) -> KvLoad | None:
    kv = session.kv
    if kv is None or gauge is None:
        return None
    preempted = kv.preemptions(before, after) if before is not None else None
    return KvLoad(peak_usage=gauge.peak, preemptions=preempted, samples=gauge.samples)


def _check_alive_after(session: Session, records: Sequence[RequestRecord]) -> None:
    """A crash, not a time-out, when the server died under the scenario.

    A killed server drops its connections a moment before the OS reports its exit, so after connection errors
    the process is watched for `CRASH_GRACE_S` before it counts as alive.
    """
    session.check_alive()
    if not any(r.error_kind is ErrorKind.CONNECTION_ERROR for r in records):
        return
    deadline = time.monotonic() + CRASH_GRACE_S
    while time.monotonic() < deadline:
        session.sleep(0.1)
        session.check_alive()


def _check_some_succeeded(session: Session, records: list[RequestRecord], scenario: str) -> None:
    measured = [r for r in records if not r.warmup]
    if measured and not any(r.ok for r in measured):
        first = next(r for r in measured if r.error)
        raise ServerTimeoutError(
            f"every request of scenario {scenario} failed (first: {first.error_kind}: {first.error})",
            location=session.log_location,
            fix="read the server log; raise request_timeout_s if the engine is just slow",
            log_path=session.log_location,
            log_tail=session.log_tail(),
        )


@dataclass(frozen=True)
class Measuring:
    """Where one group's measurements go: the plan's protocol, the results directory and the run's records."""

    plan: Plan
    layout: RunLayout
    group: str
    records: InMemoryRecords
    """The run's records in memory: every later step (early stop, parity pass, evidence) reads them here."""
    progress: Progress
    launch: int = 0
    """The group's server launch being measured (0 = the first)."""
    answered: Counter[str] = field(default_factory=Counter)
    """Item id -> requests this launch's server answered so far (what a cache of its responses may have seen)."""

    def response_cache(self, session: Session, records: Sequence[RequestRecord]) -> PassResponseCache | None:
        """The pass of `records` as the proposer's response cache saw it (None: it keeps none); then counts them
        as answered."""
        setting = session.response_cache
        seen = PassResponseCache.of(setting, self.answered, records) if setting is not None else None
        self.answered.update(r.item_id for r in records)
        return seen

    def save(self, scenario: str, records: Sequence[RequestRecord], *, keep: bool = True) -> tuple[str, str]:
        """Write a scenario's records atomically (and keep them in memory after the earlier launches' unless
        `keep` is False); the relative path and sha256 of the file."""
        path = self.layout.records(self.group, scenario, self.launch)
        atomic_write_text(path, "".join(rec.model_dump_json() + "\n" for rec in records))
        if keep:
            self.records.extend(self.group, scenario, records)
        return self.layout.rel(path), sha256_file(path)


MemorySource = Literal["measured", "declared", "not_available"]


@dataclass(frozen=True)
class _Measured:
    """A scenario's load as it ran: the records and summary, the telemetry window, peak memory and host load."""

    result: ScenarioResult
    telemetry: SpecTelemetry
    memory: PeakMemory | None
    host_load: HostLoad | None
    kv_load: KvLoad | None = None
    device_load: DeviceLoad | None = None


def _snapshot_after_warmup(session: Session, snapshots: list[MetricsSnapshot]) -> None:
    """The engine's counters before the measured phase. A server that died under the warm-up (c requests at once)
    does not answer them: that is its crash, not an unreadable answer, once the OS reports its exit."""
    try:
        snapshots.append(session.snapshot())
    except EngineError:
        deadline = time.monotonic() + CRASH_GRACE_S
        while time.monotonic() < deadline:
            session.check_alive()
            session.sleep(0.1)
        raise


def _run_timed(session: Session, m: Measuring, spec: ScenarioSpec, items: Sequence[WorkloadItem]) -> _Measured:
    """Send the load while sampling memory and host load; the engine's counters over the measured phase only."""
    snapshots: list[MetricsSnapshot] = []
    with _memory(session) as peak, _host_load(session) as host, _kv_peak(session) as kv, _device_load(session) as dev:
        result = asyncio.run(
            run_load(
                _endpoint(session),
                items,
                spec,
                progress=m.progress.info,
                before_measured=lambda: _snapshot_after_warmup(session, snapshots),
                read_spec_metrics=session.request_spec_metrics,
            )
        )
    _check_alive_after(session, result.records)
    _check_some_succeeded(session, result.records, spec.scenario)
    after = session.snapshot()
    telemetry = build_spec_telemetry(
        session.spec_counters(snapshots[0], after) if snapshots else None,
        summarize_per_request(r.speculative for r in result.records if not r.warmup and r.ok),
    )
    kv_load = _kv_load(session, kv, snapshots[0] if snapshots else None, after)
    return _Measured(result, telemetry, peak(), host(), kv_load, dev())


def _warn_untrusted(m: Measuring, scenario: str, traffic: TrafficCheck | None, got: _Measured) -> None:
    load, devices = got.host_load, got.device_load
    if devices is not None and devices.busy:
        m.progress.warn(
            f"{m.group} {scenario}: device busy: another process shared the server's device ({devices.describe()}): "
            "these timings are not trusted; measure again on devices nothing else uses"
        )
    if traffic is not None and traffic.contaminated:
        m.progress.warn(f"{m.group} {scenario}: {traffic.reason}")
    limit = m.plan.thresholds.max_host_foreign_cpu_share
    if load is not None and limit is not None and load.foreign_share > limit:
        m.progress.warn(
            f"{m.group} {scenario}: host busy: {load.foreign_share:.0%} of all CPU time went to other processes "
            f"(limit {limit:.0%}): these timings are not trusted; measure again on a quiet machine"
        )


def _memory_source(memory: PeakMemory | None, declared: float | None) -> MemorySource:
    if memory is not None and memory.mb is not None:
        return "measured"
    return "declared" if declared is not None else "not_available"


def measure_scenario(
    session: Session,
    m: Measuring,
    *,
    workload_name: str,
    workload: Workload,
    concurrency: int,
    temperature: float = 0.0,
) -> ScenarioRun:
    """Warm up and measure one scenario; engine telemetry over the measured phase only; records saved atomically.

    On an endpoint specselect does not own, the session's traffic guard also checks it for other traffic.
    """
    run = m.plan.run
    scen = scenario_name(workload_name, concurrency, temperature)
    timed = {"concurrency": concurrency, "load": _load_shape(m.plan), "warmup": run.warmup_at(concurrency)}
    # Launch j continues the passes of the launches before it, so (item, repeat) names one request of the group.
    passes = {"repeats": run.repeats, "first_repeat": m.launch * run.repeats, "launch": m.launch}
    spec = _spec(m.plan, scen, scope=m.group, temperature=temperature).model_copy(update={**timed, **passes})
    if session.traffic is not None:
        session.traffic.before()
    got = _run_timed(session, m, spec, workload.items)
    records, summary, telemetry = got.result.records, got.result.summary, got.telemetry
    traffic = session.traffic.after(len(records)) if session.traffic is not None else None
    _warn_untrusted(m, scen, traffic, got)
    rel, digest = m.save(scen, records)
    cache = m.response_cache(session, records)
    acceptance = f"{telemetry.acceptance_rate:.2f}" if telemetry.acceptance_rate is not None else "n/a"
    m.progress.info(
        f"{scen}: {summary.n_success}/{summary.n_requests} ok, "
        f"{summary.output_throughput_tok_s or 0:.1f} tok/s, acceptance {acceptance}{_cache_note(cache)}"
    )
    source = _memory_source(got.memory, session.declared_peak_memory_mb)
    return ScenarioRun(
        scenario=scen,
        workload=workload_name,
        workload_identity=workload.identity,
        concurrency=concurrency,
        temperature=temperature,
        status="completed",
        summary=summary,
        telemetry=telemetry,
        peak_memory=got.memory,
        records_path=rel,
        records_sha256=digest,
        n_records=len(records),
        peak_memory_source=source,
        declared_peak_memory_mb=session.declared_peak_memory_mb if source == "declared" else None,
        traffic=traffic,
        host_load=got.host_load,
        launch=m.launch,
        kv_load=got.kv_load,
        device_load=got.device_load,
        response_cache=cache,
    )


def _cache_note(cache: PassResponseCache | None) -> str:
    if cache is None:
        return ""
    note = f", response cache {cache.setting.state}"
    if cache.inflated:
        note += f" and replaying {cache.replayed_requests} answered prompts: acceptance inflated, round left out"
    return note


def divergent_items(baseline: Sequence[RequestRecord], records: Sequence[RequestRecord]) -> set[str]:
    """Items whose output differs from the baseline's timed output for the same request in any repeat.

    Token ids when both sides have them, else text (the pipeline's rule); a failed request on either side is no
    divergence.
    """
    tokens = has_token_ids(baseline) and has_token_ids(records)
    reference = outputs_for_parity(baseline, tokens=tokens)
    out: set[str] = set()
    for key, output in outputs_for_parity(records, tokens=tokens).items():
        if key not in reference:
            continue
        parity = compare_outputs(reference[key], output)
        if parity is not None and not parity.equal:
            out.add(key[0])
    return out


def _parity_spec(m: Measuring, scenario: str, samples: int, temperature: float) -> ScenarioSpec:
    if not samples:
        return _spec(m.plan, scenario, scope=m.group, temperature=temperature, logprobs=PARITY_LOGPROBS)
    spec = _spec(m.plan, scenario, scope=m.group, temperature=temperature, logprobs=0)
    return spec.model_copy(update={"repeats": samples, "concurrency": SAMPLE_PASS_CONCURRENCY})


def run_parity_pass(
    session: Session,
    m: Measuring,
    *,
    workload_name: str,
    items: Sequence[WorkloadItem],
    all_items: bool,
    samples: int = 0,
    temperature: float = 0.0,
) -> ParityPassRun:
    """One untimed request per item at concurrency 1 with top-2 logprobs; failures are recorded, never raised.

    `samples` > 0 (at `temperature` > 0): the distribution test's pass instead: `samples` outputs of every item,
    each with its own seed and the sampled token's logprob, at `SAMPLE_PASS_CONCURRENCY`.
    """
    scen = parity_scenario(workload_name, temperature)
    sent = None if all_items else tuple(item.id for item in items)
    started = time.monotonic()
    try:
        spec = _parity_spec(m, scen, samples, temperature)
        result = asyncio.run(run_load(_endpoint(session), items, spec, read_spec_metrics=session.request_spec_metrics))
        _check_alive_after(session, result.records)
    except EngineError as exc:
        return ParityPassRun(
            workload=workload_name,
            scenario=scen,
            temperature=temperature,
            status="failed",
            reason=exc.one_line(),
            items=sent,
            seconds=round(time.monotonic() - started, 3),
        )
    records = result.records
    m.response_cache(session, records)
    ok = [r for r in records if r.ok]
    with_lp = sum(1 for r in ok if r.logprobs)
    failed = not ok
    rel, digest = m.save(scen, records, keep=not failed)
    reason = None
    if failed:
        first = next((r for r in records if r.error), None)
        reason = f"every request failed (first: {first.error})" if first else "no requests"
    elif not with_lp:
        reason = "the engine returned no logprobs: divergences stay unclassified"
    what = f"{samples} samples per item" if samples else "for parity only"
    m.progress.info(f"{scen}: {len(ok)}/{len(records)} ok, {with_lp} with logprobs (untimed, {what})")
    return ParityPassRun(
        workload=workload_name,
        scenario=scen,
        temperature=temperature,
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
