"""One group's life: start (or attach) -> ready -> sanity -> warm-up + measure every scenario -> parity pass ->
save -> stop -> released.

Launched engines (vllm, registered kinds) start one server per group; kind "openai" attaches to the
endpoint the plan names and starts nothing (no process to stop, memory only as the operator declares it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specselect.admission.capacity import Capabilities
from specselect.admission.gather import Gathered
from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import GroupResult, LaunchRecord, ParityPassRun, ScenarioRun
from specselect.artifacts.store import load_records
from specselect.assets.refs import ResolvedModel
from specselect.core.admission import AdmissionResult
from specselect.core.status import RunStatus
from specselect.engines.base import ReleaseCheck, SanityResult
from specselect.engines.openai.engine import OpenAIEndpointEngine
from specselect.engines.openai.probe import EndpointProbe
from specselect.engines.server import ServerProcess
from specselect.errors import (
    ConfigError,
    EngineError,
    ProtocolError,
    ServerCrashedError,
    ServerStartError,
    ServerTimeoutError,
)
from specselect.evidence.parity import Output
from specselect.evidence.samples import RequestKey
from specselect.evidence.stats import BootstrapPolicy
from specselect.measure.types import Endpoint
from specselect.plan import BASELINE_FAMILY, BASELINE_GROUP, Candidate, LoadedPlan, TargetConfig
from specselect.runner.earlystop import early_stop_check, skipped_run
from specselect.runner.launch import LaunchingEngine, build_launch_spec, launch_record, served_model_name, serving_of
from specselect.runner.progress import Progress
from specselect.runner.scenario import (
    Serving,
    divergent_items,
    measure_scenario,
    parity_scenario,
    run_parity_pass,
)
from specselect.workloads.model import Workload

__all__ = [
    "TRAFFIC_GAP_S",
    "GroupInterrupted",
    "GroupJob",
    "run_group",
    "served_model_name",
]

TRAFFIC_GAP_S = 1.0
"""Idle gap (s) of the foreign-traffic check around each scenario on an endpoint specselect does not own."""


@dataclass(frozen=True)
class GroupJob:
    """A group to run: the plan entry, its track, and for candidates what admission decided and resolved."""

    candidate: Candidate
    admission: AdmissionResult | None
    gathered: Gathered | None
    track: str = BASELINE_GROUP
    """The baseline group this group is paired with (a baseline: its own name)."""
    target_config: TargetConfig | None = None
    """The track's target settings; None means the plan's [target]."""
    endpoint: EndpointProbe | None = None
    """Kind "openai": the preflight probe of this group's endpoint."""
    skip_reason: str | None = None
    """Record the group as skipped without running it (a track baseline with no runnable candidate)."""
    parity: Literal["full", "divergent", "off"] = "off"
    """The logprob parity pass: every item (a baseline), only items whose timed outputs differ from
    `parity_reference` (a candidate), or none."""
    parity_reference: Mapping[str, Mapping[RequestKey, Output]] = field(default_factory=dict)
    """Scenario name -> the track baseline's timed outputs, for a candidate's `divergent` pass."""

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def is_baseline(self) -> bool:
        return self.candidate.is_baseline


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _failure_reason(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, ServerStartError):
        return "server_start_failed", "the server exited during start-up: read the log tail"
    if isinstance(exc, ServerCrashedError):
        return "server_crashed", "the server died while being measured: read the log tail"
    if isinstance(exc, ServerTimeoutError):
        return "server_timeout", "the server did not answer in time: raise startup/request time-outs or read the log"
    if isinstance(exc, ProtocolError):
        return "protocol_error", "the server answered, but not as expected: read the log"
    if isinstance(exc, ConfigError):
        return "launch_config_invalid", "fix the candidate's settings in the plan"
    return "engine_error", "read the log tail"


@dataclass
class _Progressed:
    """What a group produced so far, kept when it fails or is interrupted half-way."""

    scenarios: list[ScenarioRun] = field(default_factory=list)
    parity: list[ParityPassRun] = field(default_factory=list)
    launch: LaunchRecord | None = None
    sanity: SanityResult | None = None
    proc: ServerProcess | None = None

    def stop(self) -> ReleaseCheck | None:
        return self.proc.stop() if self.proc is not None else None

    def fields(self) -> dict[str, Any]:
        return {
            "launch": self.launch,
            "sanity": self.sanity,
            "scenarios": tuple(self.scenarios),
            "parity_passes": tuple(self.parity),
        }


class _GroupRunner:
    def __init__(
        self,
        job: GroupJob,
        *,
        loaded: LoadedPlan,
        layout: RunLayout,
        engine: LaunchingEngine | OpenAIEndpointEngine,
        caps: Capabilities | None,
        target: ResolvedModel | None,
        workloads: dict[str, Workload],
        progress: Progress,
        traffic_gap_s: float,
    ) -> None:
        self.job = job
        self.loaded = loaded
        self.plan = loaded.plan
        self.layout = layout
        self.engine = engine
        self.caps = caps
        self.target = target
        self.target_config = job.target_config or loaded.plan.target
        self.workloads = workloads
        self.progress = progress
        self.traffic_gap_s = traffic_gap_s

    def base_result(self) -> dict[str, Any]:
        cand = self.job.candidate
        gathered = self.job.gathered
        probe = self.job.endpoint
        if probe is not None:
            snapshot, version, log = probe.target_snapshot or "", probe.engine_version, None
        else:
            snapshot = self.target.snapshot if self.target else ""
            version = self.caps.engine_version if self.caps else None
            log = self.layout.rel(self.layout.group_log(cand.name))
        return {
            "group": cand.name,
            "role": "baseline" if self.job.is_baseline else "candidate",
            "family": BASELINE_FAMILY if self.job.is_baseline else cand.family,
            "method": None if self.job.is_baseline else (gathered.method if gathered else cand.method),
            "execution_path": "target_only" if self.job.is_baseline else "speculative",
            "target_snapshot": snapshot,
            "proposer_snapshot": gathered.proposer.snapshot if gathered and gathered.proposer else None,
            "engine_version": version,
            "admission": self.job.admission,
            "log_path": log,
            "track": self.job.track,
            "target_ref": self.target_config.model,
            "endpoint": probe,
        }

    def measure_all(self, serving: Serving, done: _Progressed) -> None:
        for wname, workload in self.workloads.items():
            stop: str | None = None
            for concurrency in sorted(self.plan.run.concurrency):
                if stop is not None:
                    done.scenarios.append(skipped_run(wname, workload, concurrency, stop))
                    continue
                run = measure_scenario(
                    serving,
                    plan=self.plan,
                    layout=self.layout,
                    group=self.job.name,
                    workload_name=wname,
                    workload=workload,
                    concurrency=concurrency,
                    progress=self.progress,
                )
                done.scenarios.append(run)
                stop = self.early_stop(run, wname, concurrency)
                if stop is not None:
                    self.progress.warn(f"{self.job.name}: {stop}")
        if self.job.parity == "off":
            return
        for wname, workload in self.workloads.items():
            items = list(workload.items)
            if self.job.parity == "divergent":
                wanted = self.divergent(wname, done.scenarios)
                items = [item for item in items if item.id in wanted]
                if not items:
                    done.parity.append(
                        ParityPassRun(
                            workload=wname,
                            scenario=parity_scenario(wname),
                            status="not_needed",
                            reason="every timed output equals the baseline's: no divergence to classify",
                            items=(),
                        )
                    )
                    continue
            done.parity.append(
                run_parity_pass(
                    serving,
                    plan=self.plan,
                    layout=self.layout,
                    group=self.job.name,
                    workload_name=wname,
                    items=items,
                    all_items=self.job.parity == "full",
                    progress=self.progress,
                )
            )

    def early_stop(self, run: ScenarioRun, workload: str, concurrency: int) -> str | None:
        """Why to skip `workload`'s higher levels (see `specselect.runner.earlystop`); None to go on."""
        higher = [c for c in self.plan.run.concurrency if c > concurrency]
        if self.job.is_baseline or not self.plan.run.early_stop or not higher or run.status != "completed":
            return None
        return early_stop_check(
            self.layout,
            baseline=self.job.track,
            group=self.job.name,
            scenario=run.scenario,
            workload=workload,
            concurrency=concurrency,
            policy=BootstrapPolicy(level=self.plan.thresholds.confidence_level),
        )

    def divergent(self, workload: str, measured: Sequence[ScenarioRun]) -> set[str]:
        """Items of `workload` whose timed outputs differ from the baseline's in any measured scenario."""
        out: set[str] = set()
        for run in measured:
            reference = self.job.parity_reference.get(run.scenario)
            if run.workload == workload and run.status == "completed" and reference:
                out |= divergent_items(reference, load_records(self.layout, self.job.name, run.scenario))
        return out

    def run_launched(self, engine: LaunchingEngine, done: _Progressed) -> ReleaseCheck | None:
        if self.target is None:
            raise ConfigError(
                f"no resolved target for {self.job.name}", location="preflight", fix="run the preflight first"
            )
        spec = build_launch_spec(
            self.loaded,
            self.job.candidate,
            self.job.gathered,
            target=self.target,
            target_config=self.target_config,
            caps=self.caps,
            layout=self.layout,
        )
        done.proc = proc = engine.launch(spec)
        self.progress.info(f"starting server for {self.job.name} (log: {self.layout.rel(spec.log_path)})")
        with proc as server:
            done.launch = launch_record(server)
            self.progress.info(f"ready in {server.startup_s or 0:.1f} s at {server.base_url}")
            done.sanity = engine.sanity(server)
            self.measure_all(serving_of(engine, proc, server), done)
        return proc.release_check

    def run_attached(self, engine: OpenAIEndpointEngine, done: _Progressed) -> None:
        ep = self.job.candidate.endpoint
        probe = self.job.endpoint
        if ep is None or probe is None:
            raise ConfigError(
                f"{self.job.name} has no probed endpoint", location="preflight", fix="give the group an endpoint"
            )
        key_env = ep.api_key_env or self.plan.engine.api_key_env
        server = engine.attach(ep.base_url, ep.model, key_env)
        self.progress.info(f"measuring {ep.base_url} ({ep.model}); nothing is started")
        done.sanity = engine.sanity(server)
        serving = Serving(
            endpoint=Endpoint(base_url=ep.base_url, model=ep.model, api_key_env=key_env),
            snapshot=lambda: engine.snapshot(server),
            spec_counters=lambda before, after: engine.spec_counters(before, after, ep.model),
            check_alive=lambda: None,
            log_location=ep.base_url,
            log_tail=lambda: None,
            declared_peak_memory_mb=ep.peak_memory_mb,
            traffic_gap_s=self.traffic_gap_s,
            metrics_exported=probe.metrics == "exported",
        )
        self.measure_all(serving, done)

    def failed(self, base: dict[str, Any], done: _Progressed, **extra: Any) -> GroupResult:
        return GroupResult.model_validate(
            {**base, "run_status": RunStatus.FAILED, **done.fields(), "finished_at": _now(), **extra}
        )

    def run(self) -> GroupResult:
        base = self.base_result()
        if self.job.skip_reason is not None:
            return GroupResult.model_validate(
                {**base, "run_status": RunStatus.SKIPPED, "reason": self.job.skip_reason, "log_path": None}
            )
        admission = self.job.admission
        if admission is not None and admission.run_status != RunStatus.RUNNABLE:
            return GroupResult.model_validate(
                {**base, "run_status": admission.run_status, "reason": admission.reason, "log_path": None}
            )
        base["started_at"] = _now()
        done = _Progressed()
        release: ReleaseCheck | None = None
        try:
            if isinstance(self.engine, OpenAIEndpointEngine):
                self.run_attached(self.engine, done)
            else:
                release = self.run_launched(self.engine, done)
        except KeyboardInterrupt:
            stopped = done.stop()
            hint = "run again with --resume to redo this group"
            raise GroupInterrupted(self.failed(base, done, reason="interrupted", hint=hint, release=stopped)) from None
        except EngineError as exc:
            stopped = done.stop()
            reason, hint = _failure_reason(exc)
            proc = done.proc
            tail = exc.log_tail if exc.log_tail is not None else (proc.log_tail() if proc else None)
            return self.failed(
                base, done, reason=reason, hint=f"{exc.one_line()} -- {hint}", log_tail=tail, release=stopped
            )
        except ConfigError as exc:
            stopped = done.stop()
            return self.failed(base, done, reason="launch_config_invalid", hint=exc.one_line(), release=stopped)
        return GroupResult.model_validate(
            {
                **base,
                "run_status": RunStatus.COMPLETED,
                "reason": "measured",
                **done.fields(),
                "release": release,
                "finished_at": _now(),
            }
        )


class GroupInterrupted(BaseException):
    """Carries the interrupted group's record up to the run loop (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, result: GroupResult) -> None:
        super().__init__("interrupted")
        self.result = result


def run_group(
    job: GroupJob,
    *,
    loaded: LoadedPlan,
    layout: RunLayout,
    engine: LaunchingEngine | OpenAIEndpointEngine,
    caps: Capabilities | None,
    target: ResolvedModel | None,
    workloads: dict[str, Workload],
    progress: Progress,
    traffic_gap_s: float = TRAFFIC_GAP_S,
) -> GroupResult:
    """Run (or record as not runnable) one group; engine failures become a `failed` result, never an exception.

    `target` is the group's track target (None for kind "openai"). KeyboardInterrupt stops the server and
    surfaces as `GroupInterrupted` carrying the partial record.
    """
    return _GroupRunner(
        job,
        loaded=loaded,
        layout=layout,
        engine=engine,
        caps=caps,
        target=target,
        workloads=workloads,
        progress=progress,
        traffic_gap_s=traffic_gap_s,
    ).run()
