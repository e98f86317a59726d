"""One group's life: start -> ready -> sanity -> warm-up + measure every scenario -> save -> stop -> released."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from specselect.admission.gather import Gathered
from specselect.artifacts.io import atomic_write_text, sha256_file
from specselect.artifacts.layout import RunLayout, scenario_name
from specselect.artifacts.results import GroupResult, LaunchRecord, ScenarioRun
from specselect.assets.memory import DEFAULT_CPU_KVCACHE_GIB
from specselect.assets.refs import ResolvedModel
from specselect.core.admission import AdmissionResult
from specselect.core.status import RunStatus
from specselect.engines.base import LaunchSpec, RunningServer
from specselect.engines.server import ServerProcess
from specselect.engines.telemetry import (
    MetricsSnapshot,
    SpecTelemetry,
    build_spec_telemetry,
    spec_decode_delta,
    summarize_per_request,
)
from specselect.engines.vllm.engine import VllmEngine
from specselect.engines.vllm.probe import EngineCapabilities
from specselect.engines.vllm.specconfig import build_speculative_config
from specselect.errors import (
    ConfigError,
    EngineError,
    ProtocolError,
    ServerCrashedError,
    ServerStartError,
    ServerTimeoutError,
)
from specselect.measure import run_scenario
from specselect.measure.memory import PeakMemorySampler
from specselect.measure.types import CacheSaltPolicy, Endpoint, LoadShape, SamplingParams
from specselect.plan import LoadedPlan
from specselect.plan.candidates import Candidate
from specselect.runner.progress import Progress
from specselect.workloads.model import Workload

__all__ = ["GroupInterrupted", "GroupJob", "run_group", "served_model_name"]

BASELINE_FAMILY = "target_only"


@dataclass(frozen=True)
class GroupJob:
    """A group to run: the plan entry, and for candidates what admission decided and resolved."""

    candidate: Candidate
    admission: AdmissionResult | None
    gathered: Gathered | None

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def is_baseline(self) -> bool:
        return self.candidate.is_baseline


def served_model_name(target: ResolvedModel) -> str:
    """One served name for every group, so requests are identical across groups."""
    ref = target.ref.removeprefix("builtin:")
    return Path(ref).name or "target"


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


class _GroupRunner:
    def __init__(
        self,
        job: GroupJob,
        *,
        loaded: LoadedPlan,
        layout: RunLayout,
        engine: VllmEngine,
        caps: EngineCapabilities | None,
        target: ResolvedModel,
        workloads: dict[str, Workload],
        progress: Progress,
    ) -> None:
        self.job = job
        self.loaded = loaded
        self.plan = loaded.plan
        self.layout = layout
        self.engine = engine
        self.caps = caps
        self.target = target
        self.workloads = workloads
        self.progress = progress
        self.served = served_model_name(target)

    # -- building blocks -------------------------------------------------------------------------------------

    def speculative_config(self) -> dict[str, object] | None:
        if self.job.is_baseline:
            return None
        cand = self.job.candidate
        gathered = self.job.gathered
        proposer = gathered.proposer.path if gathered and gathered.proposer else None
        return build_speculative_config(
            cand.family,
            gathered.method if gathered else cand.method,
            cand.num_speculative_tokens,
            proposer,
            cand.options,
            location=f"{self.loaded.source}: candidates.{cand.name}",
        )

    def launch_spec(self) -> LaunchSpec:
        eng = self.plan.engine
        cand = self.job.candidate
        spec_config = self.speculative_config()
        return LaunchSpec(
            group=cand.name,
            model_path=self.target.path,
            served_model_name=self.served,
            dtype=self.plan.target.dtype,
            max_model_len=self.plan.target.max_model_len,
            engine_args=(*eng.args, *cand.engine_args),
            tensor_parallel_size=eng.tensor_parallel_size,
            pipeline_parallel_size=eng.pipeline_parallel_size,
            data_parallel_size=eng.data_parallel_size,
            distributed_executor_backend=eng.distributed_executor_backend,
            env=self.server_env(),
            host=eng.host,
            port=eng.port,
            speculative_config=spec_config,
            per_request_spec_metrics=bool(spec_config) and bool(self.caps and self.caps.per_request_spec_metrics_flag),
            disable_prefix_caching=self.plan.run.prefix_cache == "disabled",
            api_key_env=eng.api_key_env,
            startup_timeout_s=eng.startup_timeout_s,
            log_path=self.layout.group_log(cand.name),
            run_dir=self.layout.work_dir / cand.name,
        )

    def server_env(self) -> dict[str, str]:
        env = {**self.plan.engine.env, **self.job.candidate.env}
        cpu = self.caps is not None and self.caps.device_kind == "cpu"
        if cpu and "VLLM_CPU_KVCACHE_SPACE" not in env and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
            # Unset, vLLM 0.32 on CPU tries to reserve 92% of RAM and refuses to start; admission assumed this.
            env["VLLM_CPU_KVCACHE_SPACE"] = str(DEFAULT_CPU_KVCACHE_GIB)
        return env

    def sampling(self) -> SamplingParams:
        s = self.plan.sampling
        return SamplingParams(max_tokens=s.max_tokens, temperature=s.temperature, seed=s.seed, return_token_ids=True)

    def load_shape(self) -> LoadShape:
        run = self.plan.run
        if run.load == "closed":
            return LoadShape()
        burst = run.burstiness if run.load == "gamma" else 1.0
        return LoadShape(kind="open", request_rate=run.request_rate, burstiness=burst)

    def base_result(self) -> dict[str, object]:
        cand = self.job.candidate
        gathered = self.job.gathered
        return {
            "group": cand.name,
            "role": "baseline" if self.job.is_baseline else "candidate",
            "family": BASELINE_FAMILY if self.job.is_baseline else cand.family,
            "method": None if self.job.is_baseline else (gathered.method if gathered else cand.method),
            "execution_path": "target_only" if self.job.is_baseline else "speculative",
            "target_snapshot": self.target.snapshot,
            "proposer_snapshot": gathered.proposer.snapshot if gathered and gathered.proposer else None,
            "engine_version": self.caps.engine_version if self.caps else None,
            "admission": self.job.admission,
            "log_path": self.layout.rel(self.layout.group_log(cand.name)),
        }

    # -- measuring -------------------------------------------------------------------------------------------

    def measure_scenario(
        self, proc: ServerProcess, server: RunningServer, wname: str, workload: Workload, concurrency: int
    ) -> ScenarioRun:
        run = self.plan.run
        scen = scenario_name(wname, concurrency)
        endpoint = Endpoint(base_url=server.base_url, model=server.served_model, api_key_env=server.api_key_env)
        snapshots: list[MetricsSnapshot] = []
        with PeakMemorySampler(server.pid, interval_s=0.2) as sampler:
            result = asyncio.run(
                run_scenario(
                    endpoint,
                    workload.items,
                    scenario=scen,
                    concurrency=concurrency,
                    load=self.load_shape(),
                    warmup=run.warmup_requests,
                    repeats=run.repeats,
                    seed=run.order_seed,
                    sampling=self.sampling(),
                    request_timeout_s=run.request_timeout_s,
                    scenario_timeout_s=run.scenario_timeout_s,
                    cache_salt_policy=CacheSaltPolicy(run.prefix_cache),
                    progress=self.progress.info,
                    before_measured=lambda: snapshots.append(self.engine.snapshot(server)),
                )
            )
        proc.raise_if_dead()
        measured = [r for r in result.records if not r.warmup]
        if measured and not any(r.ok for r in measured):
            first = next(r for r in measured if r.error)
            raise ServerTimeoutError(
                f"every request of scenario {scen} failed (first: {first.error_kind}: {first.error})",
                location=str(server.log_path),
                fix="read the server log; raise request_timeout_s if the engine is just slow",
                log_path=str(server.log_path),
                log_tail=proc.log_tail(),
            )
        after = self.engine.snapshot(server)
        telemetry: SpecTelemetry = build_spec_telemetry(
            spec_decode_delta(snapshots[0], after, server.served_model) if snapshots else None,
            summarize_per_request(r.spec_metrics for r in measured if r.ok),
        )
        path = self.layout.records(self.job.name, scen)
        atomic_write_text(path, "".join(rec.model_dump_json() + "\n" for rec in result.records))
        summary = result.summary
        self.progress.info(
            f"{scen}: {summary.n_success}/{summary.n_requests} ok, "
            f"{summary.output_throughput_tok_s or 0:.1f} tok/s, acceptance "
            + (f"{telemetry.acceptance_rate:.2f}" if telemetry.acceptance_rate is not None else "n/a")
        )
        return ScenarioRun(
            scenario=scen,
            workload=wname,
            workload_identity=workload.identity,
            concurrency=concurrency,
            status="completed",
            summary=summary,
            telemetry=telemetry,
            peak_memory=sampler.result,
            records_path=self.layout.rel(path),
            records_sha256=sha256_file(path),
            n_records=len(result.records),
        )

    def run(self) -> GroupResult:
        base = self.base_result()
        admission = self.job.admission
        if admission is not None and admission.run_status != RunStatus.RUNNABLE:
            return GroupResult.model_validate(
                {**base, "run_status": admission.run_status, "reason": admission.reason, "log_path": None}
            )
        started = _now()
        scenarios: list[ScenarioRun] = []
        proc: ServerProcess | None = None
        launch: LaunchRecord | None = None
        sanity = None
        try:
            spec = self.launch_spec()
            proc = self.engine.launch(spec)
            self.progress.info(f"starting server for {self.job.name} (log: {self.layout.rel(spec.log_path)})")
            with proc as server:
                launch = LaunchRecord(
                    command=server.command,
                    speculative_config=server.spec_config,
                    served_model=server.served_model,
                    base_url=server.base_url,
                    startup_s=server.startup_s,
                )
                self.progress.info(f"ready in {server.startup_s or 0:.1f} s at {server.base_url}")
                sanity = self.engine.sanity(server)
                for wname, workload in self.workloads.items():
                    for concurrency in self.plan.run.concurrency:
                        scenarios.append(self.measure_scenario(proc, server, wname, workload, concurrency))
            release = proc.release_check
        except KeyboardInterrupt:
            release = proc.stop() if proc is not None else None
            raise GroupInterrupted(
                GroupResult.model_validate(
                    {
                        **base,
                        "run_status": RunStatus.FAILED,
                        "reason": "interrupted",
                        "hint": "run again with --resume to redo this group",
                        "launch": launch,
                        "sanity": sanity,
                        "scenarios": tuple(scenarios),
                        "release": release,
                        "started_at": started,
                        "finished_at": _now(),
                    }
                )
            ) from None
        except EngineError as exc:
            release = proc.stop() if proc is not None else None
            reason, hint = _failure_reason(exc)
            tail = exc.log_tail if exc.log_tail is not None else (proc.log_tail() if proc else None)
            return GroupResult.model_validate(
                {
                    **base,
                    "run_status": RunStatus.FAILED,
                    "reason": reason,
                    "hint": f"{exc.one_line()} -- {hint}",
                    "log_tail": tail,
                    "launch": launch,
                    "sanity": sanity,
                    "scenarios": tuple(scenarios),
                    "release": release,
                    "started_at": started,
                    "finished_at": _now(),
                }
            )
        except ConfigError as exc:
            release = proc.stop() if proc is not None else None
            return GroupResult.model_validate(
                {
                    **base,
                    "run_status": RunStatus.FAILED,
                    "reason": "launch_config_invalid",
                    "hint": exc.one_line(),
                    "release": release,
                    "started_at": started,
                    "finished_at": _now(),
                }
            )
        return GroupResult.model_validate(
            {
                **base,
                "run_status": RunStatus.COMPLETED,
                "reason": "measured",
                "launch": launch,
                "sanity": sanity,
                "scenarios": tuple(scenarios),
                "release": release,
                "started_at": started,
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
    engine: VllmEngine,
    caps: EngineCapabilities | None,
    target: ResolvedModel,
    workloads: dict[str, Workload],
    progress: Progress,
) -> GroupResult:
    """Run (or record as not runnable) one group; engine failures become a `failed` result, never an exception.

    KeyboardInterrupt stops the server and surfaces as `GroupInterrupted` carrying the partial record.
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
    ).run()
