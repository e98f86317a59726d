"""One group's life: serve (start, or attach) -> ready -> sanity -> warm-up + measure every scenario -> parity
pass -> save -> stop -> released.

The engine serves the group (`Engine.serve`): an engine that starts servers starts one per group; kind
"openai" attaches to the endpoint the plan names and starts nothing (no process to stop, memory only as the
operator declares it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from specselect._admission.gather import Gathered
from specselect._core.gates import AdmissionResult
from specselect._core.status import RunStatus
from specselect._engines import GroupContext, ServeOptions, Session
from specselect._engines.base import RunningServer, ServingHandle
from specselect._evidence.pipeline import parity_scenario, scenario_name
from specselect._plan import BASELINE_FAMILY, BASELINE_GROUP, Candidate, RunConfig, TargetConfig
from specselect._runner.context import RunContext
from specselect._runner.earlystop import early_stop_check, skipped_run
from specselect._runner.scenario import Measuring, divergent_items, measure_scenario, run_parity_pass
from specselect.errors import (
    ConfigError,
    EngineError,
    ProtocolError,
    ServerCrashedError,
    ServerStartError,
    ServerTimeoutError,
)
from specselect.records.assets import ResolvedModel
from specselect.records.capacity import KvCapacity, LaunchCapacity
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.evidence.sweeps import DerivedSchedule
from specselect.records.group import GroupFacts, GroupLaunch, GroupResult, ParityPassRun, ScenarioRun, ServerLife
from specselect.records.measurement import RequestRecord
from specselect.records.server import LaunchRecord, ReleaseCheck, SanityResult
from specselect.records.workloads import Workload, WorkloadItem

__all__ = ["GroupInterrupted", "GroupJob", "ParityMode", "launch_label", "launch_record", "relaunch_group", "run_group"]


ParityMode = Literal["full", "divergent", "off"]


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
    skip_reason: str | None = None
    """Record the group as skipped without running it (a track baseline with no runnable candidate)."""
    parity: ParityMode = "off"
    """The untimed parity pass at temperature 0: every item (a baseline), only items whose timed outputs differ
    from the track baseline's (a candidate), or none."""
    samples: bool = False
    """At every temperature above 0, a pass that draws the distribution test's samples."""
    reference_scenarios: frozenset[str] = frozenset()
    """The scenarios the track baseline completed: their timed outputs are the `divergent` pass's reference."""
    schedule: DerivedSchedule | None = None
    """A schedule candidate's derived schedule (already written into the candidate's options when it runs)."""

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def is_baseline(self) -> bool:
        return self.candidate.is_baseline


def launch_record(server: RunningServer) -> LaunchRecord:
    """How the group's server was started (secrets already redacted by the server layer)."""
    return LaunchRecord(
        command=server.command,
        speculative_config=server.spec_config,
        proposal_length=server.proposal_length,
        served_model=server.served_model,
        base_url=server.base_url,
        startup_s=server.startup_s,
        startup=server.startup,
        engine_warnings=server.engine_warnings,
        preload=server.preload,
    )


def read_kv_capacity(session: Session) -> KvCapacity | str | None:
    """The KV cache the server's engine reserved, or why it could not be read; None without a reader."""
    if session.kv is None:
        return None
    try:
        found = session.kv.capacity()
    except EngineError as exc:
        return f"the engine's KV capacity could not be read: {exc.one_line()}"
    return found if found is not None else "the engine stated no KV-cache size"


def launch_capacity(
    kv: KvCapacity | str | None, records: Sequence[RequestRecord], max_tokens: int
) -> LaunchCapacity | None:
    """A launch's KV capacity and the concurrency it holds at its longest request (prompt + `max_tokens`)."""
    if kv is None:
        return None
    if isinstance(kv, str):
        return LaunchCapacity(problem=kv)
    prompts = [r.prompt_tokens for r in records if r.prompt_tokens is not None]
    if not prompts:
        return LaunchCapacity(kv=kv)
    longest = max(prompts) + max_tokens
    return LaunchCapacity(kv=kv, longest_request_tokens=longest, max_concurrency=round(kv.concurrency_at(longest), 2))


def launch_label(run: RunConfig, index: int) -> str:
    """`round 2 of 2`, or for a round after the first look `round 4 (after a look, at most 5)`."""
    if index < run.rounds:
        return f"round {index + 1} of {run.rounds}"
    return f"round {index + 1} (after a look, at most {run.max_rounds})"


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
    handle: ServingHandle | None = None
    capacity: LaunchCapacity | None = None

    def stop(self) -> ReleaseCheck | None:
        return self.handle.stop() if self.handle is not None else None

    def life(self, outcome: _Outcome, *, log_path: str | None, started_at: str | None) -> ServerLife:
        """The launch from start to release: what it measured and how it ended."""
        return ServerLife(
            run_status=outcome.run_status,
            reason=outcome.reason,
            hint=outcome.hint,
            launch=self.launch,
            sanity=self.sanity,
            scenarios=tuple(self.scenarios),
            release=outcome.release,
            log_path=log_path,
            log_tail=outcome.log_tail,
            started_at=started_at,
            finished_at=_now(),
            capacity=self.capacity,
        )


@dataclass(frozen=True)
class _Outcome:
    """How a launch ended (an engine failure is an outcome, not an exception)."""

    run_status: RunStatus
    reason: str
    hint: str | None = None
    log_tail: str | None = None
    release: ReleaseCheck | None = None


class _GroupRunner:
    def __init__(
        self,
        job: GroupJob,
        run: RunContext,
        target: ResolvedModel | None,
        primary: GroupResult | None = None,
        index: int | None = None,
    ) -> None:
        self.job = job
        self.run_ctx = run
        self.plan = run.loaded.plan
        self.layout = run.layout
        self.engine = run.engine
        self.workloads = run.workloads
        self.progress = run.progress
        self.primary = primary
        """A later launch: the group's first launch, whose scenarios it measures again."""
        self.index = index if index is not None else 0 if primary is None else 1 + len(primary.relaunches)
        self.measuring = Measuring(
            plan=self.plan,
            layout=run.layout,
            group=job.name,
            records=run.records,
            progress=run.progress,
            launch=self.index,
        )
        self.ctx = GroupContext(
            candidate=job.candidate,
            engine=self.plan.engine,
            target_config=job.target_config or self.plan.target,
            target=target,
            setup=run.setup,
        )

    def facts(self) -> GroupFacts:
        cand = self.job.candidate
        gathered = self.job.gathered
        identity = self.engine.identity(self.ctx)
        return GroupFacts(
            group=cand.name,
            role="baseline" if self.job.is_baseline else "control" if cand.is_control else "candidate",
            family=BASELINE_FAMILY if cand.runs_target_only else cand.family,
            method=None if cand.runs_target_only else (gathered.method if gathered else cand.method),
            execution_path="target_only" if cand.runs_target_only else "speculative",
            target_snapshot=identity.target_snapshot,
            proposer_snapshot=gathered.proposer.snapshot if gathered and gathered.proposer else None,
            engine_version=identity.engine_version,
            admission=self.job.admission,
            track=self.job.track,
            target_ref=self.ctx.target_config.model,
            endpoint=self.ctx.setup.endpoints.get(cand.name),
            derived_schedule=self.job.schedule,
            launches_planned=self.plan.run.rounds,
        )

    def log_path(self) -> str | None:
        """The launch's log, relative to the results (None when the engine keeps none)."""
        if not self.engine.identity(self.ctx).has_log:
            return None
        return self.layout.rel(self.layout.group_log(self.job.name, self.index))

    def measure_all(self, session: Session, done: _Progressed) -> None:
        temperatures = self.plan.sampling.temperatures
        for wname, workload in self.workloads.items():
            for temperature in temperatures:
                self.measure_levels(session, done, wname, workload, temperature)
        if self.primary is not None:
            return
        for wname, workload in self.workloads.items():
            for temperature in temperatures:
                ran = self.parity_pass(session, wname, temperature, list(workload.items), done.scenarios)
                if ran is not None:
                    done.parity.append(ran)

    def measure_levels(
        self, session: Session, done: _Progressed, wname: str, workload: Workload, temperature: float
    ) -> None:
        """A workload's concurrency levels at one temperature, lowest first, up to an early stop."""
        stop: str | None = None
        for concurrency in sorted(self.plan.run.concurrency):
            stop = stop or self.skipped_before(scenario_name(wname, concurrency, temperature))
            if stop is not None:
                done.scenarios.append(
                    skipped_run(wname, workload, concurrency, stop, temperature=temperature, launch=self.index)
                )
                continue
            run = measure_scenario(
                session,
                self.measuring,
                workload_name=wname,
                workload=workload,
                concurrency=concurrency,
                temperature=temperature,
            )
            done.scenarios.append(run)
            stop = self.early_stop(run, wname, concurrency)
            if stop is not None:
                self.progress.warn(f"{self.job.name}: {stop}")

    def parity_pass(
        self, session: Session, wname: str, temperature: float, items: list[WorkloadItem], scenarios: list[ScenarioRun]
    ) -> ParityPassRun | None:
        """The workload's untimed parity pass at a temperature as the job asks for it (the first launch only):
        exact parity's at 0, the distribution test's samples above; None when the job runs none."""
        if temperature > 0:
            if not self.job.samples:
                return None
            sampling = self.plan.sampling
            return run_parity_pass(
                session,
                self.measuring,
                workload_name=wname,
                items=items[: sampling.parity_prompts],
                all_items=False,
                samples=sampling.parity_samples,
                temperature=temperature,
            )
        if self.job.parity == "off":
            return None
        if self.job.parity == "divergent":
            wanted = self.divergent(wname, [run for run in scenarios if run.temperature == 0])
            items = [item for item in items if item.id in wanted]
            if not items:
                return ParityPassRun(
                    workload=wname,
                    scenario=parity_scenario(wname),
                    status="not_needed",
                    reason="every timed output equals the baseline's: no divergence to classify",
                    items=(),
                )
        return run_parity_pass(
            session, self.measuring, workload_name=wname, items=items, all_items=self.job.parity == "full"
        )

    def skipped_before(self, scenario: str) -> str | None:
        """A later launch measures only what the first launch measured: why it skips `scenario`, if it does."""
        if self.primary is None:
            return None
        first = next((s for s in self.primary.scenarios if s.scenario == scenario), None)
        if first is not None and first.status == "completed":
            return None
        return first.early_stop if first is not None and first.early_stop else "not measured in the first launch"

    def early_stop(self, run: ScenarioRun, workload: str, concurrency: int) -> str | None:
        """Why to skip `workload`'s higher levels (see `specselect._runner.earlystop`); None to go on.

        Only the first launch stops early; later launches repeat its choice.
        """
        higher = [c for c in self.plan.run.concurrency if c > concurrency]
        if self.primary is not None or self.job.is_baseline or not self.plan.run.early_stop or not higher:
            return None
        if run.status != "completed":
            return None
        return early_stop_check(
            self.run_ctx.records,
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
        records = self.run_ctx.records
        for run in measured:
            if run.workload == workload and run.status == "completed" and run.scenario in self.job.reference_scenarios:
                out |= divergent_items(
                    records.timed(self.job.track, run.scenario), records.timed(self.job.name, run.scenario)
                )
        return out

    def serve(self, done: _Progressed) -> ReleaseCheck | None:
        name = self.job.name
        options = ServeOptions(
            log_path=self.layout.group_log(name, self.index),
            run_dir=self.layout.work_dir / (f"{name}.l{self.index}" if self.index else name),
            disable_prefix_caching=self.plan.run.prefix_cache == "disabled",
        )
        done.handle = handle = self.engine.serve(self.ctx, self.job.gathered, options)
        if self.engine.launches_servers:
            launch = (
                f" ({launch_label(self.plan.run, self.index)})" if self.index or self.plan.run.max_rounds > 1 else ""
            )
            self.progress.info(f"starting server for {name}{launch} (log: {self.layout.rel(options.log_path)})")
        with handle as session:
            if session.server is not None:
                done.launch = launch_record(session.server)
                self.progress.info(f"ready in {session.server.startup_s or 0:.1f} s at {session.base_url}")
            else:
                self.progress.info(f"measuring {session.base_url} ({session.model}); nothing is started")
            done.sanity = session.sanity
            kv = read_kv_capacity(session)
            self.measure_all(session, done)
            done.capacity = launch_capacity(kv, self.launch_records(done), self.plan.sampling.max_tokens)
        return handle.stop()

    def launch_records(self, done: _Progressed) -> list[RequestRecord]:
        """Every timed request this launch sent (warm-up included)."""
        records = self.run_ctx.records
        return [
            r
            for run in done.scenarios
            if run.status == "completed"
            for r in records.timed(self.job.name, run.scenario)
            if r.launch == self.index
        ]

    def attempt(self) -> tuple[_Progressed, _Outcome]:
        """Serve and measure; what was measured and the outcome's fields (an engine failure is an outcome).

        KeyboardInterrupt stops the server and raises `_Stopped` with what was measured so far.
        """
        done = _Progressed()
        try:
            release = self.serve(done)
        except KeyboardInterrupt:
            hint = "run again with --resume to redo this launch"
            raise _Stopped(done, _Outcome(RunStatus.FAILED, "interrupted", hint, release=done.stop())) from None
        except EngineError as exc:
            stopped = done.stop()
            reason, hint = _failure_reason(exc)
            handle = done.handle
            tail = exc.log_tail if exc.log_tail is not None else (handle.log_tail() if handle else None)
            return done, _Outcome(RunStatus.FAILED, reason, f"{exc.one_line()} -- {hint}", tail, stopped)
        except ConfigError as exc:
            stopped = done.stop()
            return done, _Outcome(RunStatus.FAILED, "launch_config_invalid", exc.one_line(), release=stopped)
        return done, _Outcome(RunStatus.COMPLETED, "measured", release=release)

    def not_run(self) -> tuple[RunStatus, str] | None:
        """Why the group does not run (skipped, or refused at admission); None when it runs."""
        if self.job.skip_reason is not None:
            return RunStatus.SKIPPED, self.job.skip_reason
        admission = self.job.admission
        if admission is not None and admission.run_status != RunStatus.RUNNABLE:
            return admission.run_status, admission.reason
        return None

    def run(self) -> GroupResult:
        facts = self.facts()
        not_run = self.not_run()
        if not_run is not None:
            return GroupResult.of(facts, ServerLife(run_status=not_run[0], reason=not_run[1]))
        log, started = self.log_path(), _now()
        try:
            done, outcome = self.attempt()
        except _Stopped as stop:
            first = stop.done.life(stop.outcome, log_path=log, started_at=started)
            raise GroupInterrupted(GroupResult.of(facts, first, parity_passes=tuple(stop.done.parity))) from None
        first = done.life(outcome, log_path=log, started_at=started)
        return GroupResult.of(facts, first, parity_passes=tuple(done.parity))

    def relaunch(self, primary: GroupResult) -> GroupResult:
        """The group with one more launch appended (launch `self.index`)."""
        log, started = self.log_path(), _now()
        try:
            done, outcome = self.attempt()
        except _Stopped as stop:
            launch = GroupLaunch.of(self.index, stop.done.life(stop.outcome, log_path=log, started_at=started))
            raise GroupInterrupted(primary.model_copy(update={"relaunches": (*primary.relaunches, launch)})) from None
        launch = GroupLaunch.of(self.index, done.life(outcome, log_path=log, started_at=started))
        return primary.model_copy(update={"relaunches": (*primary.relaunches, launch)})


class _Stopped(Exception):
    """Carries what an interrupted launch measured, and its outcome fields, out of `attempt`."""

    def __init__(self, done: _Progressed, outcome: _Outcome) -> None:
        super().__init__("interrupted")
        self.done = done
        self.outcome = outcome


class GroupInterrupted(BaseException):
    """Carries the interrupted group's record up to the run loop (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, result: GroupResult) -> None:
        super().__init__("interrupted")
        self.result = result


def run_group(job: GroupJob, run: RunContext, target: ResolvedModel | None) -> GroupResult:
    """Run (or record as not runnable) one group's first launch; engine failures become a `failed` result, never
    an exception.

    `target` is the group's track target (None for an engine that starts nothing); the group's records go into
    `run.records`. KeyboardInterrupt stops the server and surfaces as `GroupInterrupted` carrying the partial
    record.
    """
    return _GroupRunner(job, run, target).run()


def relaunch_group(
    job: GroupJob, run: RunContext, target: ResolvedModel | None, primary: GroupResult, index: int | None = None
) -> GroupResult:
    """Launch a completed group's server once more (launch `index`, by default the one after its last) and measure
    the scenarios its first launch measured again; the group with that launch appended to `relaunches` (a failure
    there is that launch's outcome).

    No parity pass and no early stop: the first launch did both. KeyboardInterrupt surfaces as
    `GroupInterrupted` carrying the group with the interrupted launch.
    """
    return _GroupRunner(job, run, target, primary, index).relaunch(primary)
