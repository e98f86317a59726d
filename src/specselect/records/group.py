"""`groups/<group>.json`: what a group is (`GroupFacts`), each launch of its server (`ServerLife`, `GroupLaunch`),
every scenario it measured (`ScenarioRun`) and its parity passes (`ParityPassRun`); written by the runner, read by
the evidence, the hand-off and the report."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specselect._core.gates import AdmissionResult
from specselect._core.pairing import MemoryFigure
from specselect._core.status import RunStatus
from specselect.records.capacity import DeviceLoad, KvLoad, LaunchCapacity
from specselect.records.document import ResultsDocument
from specselect.records.endpoints import EndpointProbe, TrafficCheck
from specselect.records.evidence.sweeps import DerivedSchedule
from specselect.records.host import HostLoad
from specselect.records.measurement import ScenarioSummary
from specselect.records.memory import PeakMemory
from specselect.records.responsecache import PassResponseCache
from specselect.records.server import LaunchRecord, ReleaseCheck, SanityResult
from specselect.records.telemetry import SpecTelemetry
from specselect.records.workloads import WorkloadIdentity

__all__ = ["GroupFacts", "GroupLaunch", "GroupResult", "GroupRole", "ParityPassRun", "ScenarioRun", "ServerLife"]


GroupRole = Literal["baseline", "candidate", "control"]


class ScenarioRun(BaseModel):
    """One scenario of one group: its summary, engine telemetry, peak memory and raw-records file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    workload: str
    workload_identity: WorkloadIdentity
    concurrency: int
    temperature: float = 0.0
    """The sampling temperature every request of the scenario was sent at (see `[sampling] temperature`)."""
    status: Literal["completed", "failed", "skipped"]
    error: str | None = None
    early_stop: str | None = None
    """Why a `skipped` scenario was not measured (the candidate was clearly losing at a lower concurrency)."""
    summary: ScenarioSummary | None = None
    telemetry: SpecTelemetry | None = None
    peak_memory: PeakMemory | None = None
    records_path: str | None = None
    records_sha256: str | None = None
    n_records: int = 0
    peak_memory_source: Literal["measured", "declared", "not_available"] | None = None
    """measured: `peak_memory` was sampled; declared: the operator's `endpoint.peak_memory_mb`; not_available:
    nothing could be sampled (an endpoint specselect does not own) and nothing was declared."""
    declared_peak_memory_mb: float | None = None
    traffic: TrafficCheck | None = None
    """Kind "openai": whether other traffic hit the endpoint around or during this scenario."""
    host_load: HostLoad | None = None
    """A server specselect started: how much CPU time other processes on the host took during the scenario."""
    launch: int = 0
    """The group's server launch that measured it (0 = the first)."""
    kv_load: KvLoad | None = None
    """A server specselect started: its KV cache's peak use and preemptions during the scenario."""
    device_load: DeviceLoad | None = None
    """A server on GPUs: other processes seen on its devices before and during the scenario."""
    response_cache: PassResponseCache | None = None
    """A proposer that drafts from the server's earlier responses: what its cache held when the pass began (None: the
    method keeps no such cache)."""

    @property
    def peak_memory_mb(self) -> float | None:
        """The peak memory evidence uses: sampled, else declared by the operator, else None."""
        if self.peak_memory is not None and self.peak_memory.mb is not None:
            return self.peak_memory.mb
        return self.declared_peak_memory_mb

    @property
    def peak_memory_figure(self) -> MemoryFigure | None:
        """What `peak_memory_mb` is: device memory (NVML), the process tree's host RSS, or the declared figure."""
        if self.peak_memory is not None and self.peak_memory.mb is not None:
            return "device_memory" if self.peak_memory.source == "nvml" else "host_rss"
        return "declared" if self.declared_peak_memory_mb is not None else None


class ParityPassRun(BaseModel):
    """The untimed parity pass over one workload: concurrency 1, top-2 logprobs, at most one request per item.

    Its records (`records/<group>/<workload>-c1.parity.jsonl`) never enter timing statistics.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    scenario: str
    """The records' scenario name, `<workload>-c1.parity` (at temperature 0.7: `<workload>-c1-t0.7.parity`)."""
    temperature: float = 0.0
    """0: exact parity's pass (top-2 logprobs); above: the distribution test's samples at that temperature."""
    status: Literal["completed", "failed", "not_needed"]
    """not_needed: a candidate whose timed outputs all equal its baseline's has no divergence to classify."""
    reason: str | None = None
    items: tuple[str, ...] | None = None
    """The items sent; None = every item (a baseline's pass). A candidate sends only the items whose timed
    outputs differed from its baseline's."""
    records_path: str | None = None
    records_sha256: str | None = None
    n_records: int = 0
    n_ok: int = 0
    n_with_logprobs: int = 0
    """Successful requests that came back with logprobs (0: the engine returns none)."""
    seconds: float | None = None


class ServerLife(BaseModel):
    """One server launch of a group, from start to release: its outcome and the scenarios it measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_status: RunStatus
    reason: str
    hint: str | None = None
    launch: LaunchRecord | None = None
    sanity: SanityResult | None = None
    scenarios: tuple[ScenarioRun, ...] = ()
    release: ReleaseCheck | None = None
    log_path: str | None = None
    log_tail: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    node: str | None = None
    """The cluster node that ran this launch (its Ray node id); None: the machine that ran specselect."""
    capacity: LaunchCapacity | None = None
    """The KV cache the launch's engine reserved and the concurrency it holds at the longest request served."""

    @property
    def complete(self) -> bool:
        """True when it reached a final state that `--resume` must not redo."""
        return self.run_status != RunStatus.RUNNABLE and not (
            self.run_status == RunStatus.FAILED and self.reason == "interrupted"
        )


class GroupLaunch(ServerLife):
    """A later launch of a group's server (index 1, 2, ...): a fresh server measuring the same scenarios again.

    Launch 0 is the group itself (`GroupResult`'s own fields); only it runs the parity pass and early stops.
    """

    index: int = Field(ge=1)

    @classmethod
    def of(cls, index: int, life: ServerLife) -> GroupLaunch:
        """Launch `index`'s record."""
        return cls(index=index, **dict(life))


class GroupFacts(BaseModel):
    """What a group is, whether it ran or not: its role, configuration, identities and admission."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    role: GroupRole
    family: str
    method: str | None
    execution_path: Literal["target_only", "speculative"]
    target_snapshot: str
    proposer_snapshot: str | None = None
    engine_version: str | None = None
    admission: AdmissionResult | None = None
    track: str | None = None
    """The baseline group this group is paired with (a baseline: itself); None in results of older versions
    means the default track, `g0_target_only`."""
    target_ref: str | None = None
    """The target reference as the plan wrote it (per track)."""
    endpoint: EndpointProbe | None = None
    """Kind "openai": the endpoint measured and what it reported (identity, engine version, metrics)."""
    derived_schedule: DerivedSchedule | None = None
    """A schedule candidate (`schedule_of`): the per-batch-size schedule it ran, derived from its sweep's
    measurements before it started (or why there was none to run)."""
    launches_planned: int = 1
    """Server launches the plan asked for (`[run] launches`); launch 0 is this result's own fields."""

    @property
    def lossy(self) -> str | None:
        """Why the group's verification is not exact, when admission found it so (its outputs are not the target's)."""
        return self.admission.lossy if self.admission is not None else None


class GroupResult(ResultsDocument, ServerLife, GroupFacts):
    """`groups/<group>.json`: everything about one group, whether it ran or not (`GroupFacts`); its own launch
    fields (`ServerLife`) are the first launch's."""

    parity_passes: tuple[ParityPassRun, ...] = ()
    relaunches: tuple[GroupLaunch, ...] = ()
    """Launches 1 .. launches_planned - 1 that ran so far, in index order."""

    @classmethod
    def of(cls, facts: GroupFacts, first: ServerLife, *, parity_passes: tuple[ParityPassRun, ...] = ()) -> GroupResult:
        """The group's document: what it is, its first launch, and that launch's parity passes."""
        return cls(**dict(facts), **dict(first), parity_passes=parity_passes)

    def scenario_runs(self, scenario: str) -> tuple[ScenarioRun, ...]:
        """Every launch's run of `scenario` (launch 0 first), including runs that did not complete."""
        runs = (*self.scenarios, *(s for r in self.relaunches for s in r.scenarios))
        return tuple(run for run in runs if run.scenario == scenario)

    def all_scenario_runs(self) -> tuple[ScenarioRun, ...]:
        """Every scenario run of every launch (launch 0 first)."""
        return (*self.scenarios, *(s for r in self.relaunches for s in r.scenarios))

    @property
    def proposal_length(self) -> int | None:
        """Tokens proposed per verify step as the group launched, if it launched speculating."""
        return self.launch.proposal_length if self.launch is not None else None
