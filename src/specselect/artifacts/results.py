"""The versioned result documents of a run (one pydantic model per file under `results/<label>/`).

Every document carries `schema_version`, the tool name and version; renderers read only these.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect.artifacts.docbase import RESULTS_SCHEMA_VERSION, ResultsDocument
from specselect.artifacts.handoff.document import (
    Handoff,
    HandoffCandidate,
    HandoffConcurrency,
    HandoffGroup,
    HandoffLength,
    HandoffMix,
    HandoffMixOption,
    HandoffScenario,
    HandoffSegment,
    HandoffTrack,
)
from specselect.common.hostfacts import HostInfo
from specselect.core.gates import AdmissionInput, AdmissionResult
from specselect.core.pairing import MemoryFigure
from specselect.core.status import RunStatus
from specselect.engines.base import recorded_proposal_length
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import AnyCapabilities
from specselect.records.endpoints import EndpointProbe, TrafficCheck
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.sweeps import DerivedSchedule, DurationEstimate
from specselect.records.host import HostLoad
from specselect.records.measurement import ScenarioSummary
from specselect.records.memory import PeakMemory
from specselect.records.server import ReleaseCheck, SanityResult
from specselect.records.telemetry import SpecTelemetry
from specselect.records.workloads import WorkloadIdentity

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "AdmissionFile",
    "AuditFinding",
    "EvidenceFile",
    "GroupFacts",
    "GroupLaunch",
    "GroupResult",
    "Handoff",
    "HandoffCandidate",
    "HandoffConcurrency",
    "HandoffGroup",
    "HandoffLength",
    "HandoffMix",
    "HandoffMixOption",
    "HandoffScenario",
    "HandoffSegment",
    "HandoffTrack",
    "LaunchRecord",
    "Manifest",
    "ManifestGroup",
    "ParityPassRun",
    "PreflightAttempt",
    "PreflightFile",
    "ScenarioRun",
]

GroupRole = Literal["baseline", "candidate", "control"]


class AuditFinding(BaseModel):
    """One configuration-audit finding; `error` findings stop the run before anything starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Literal["error", "warning", "info"]
    code: str
    message: str


class PreflightAttempt(ResultsDocument):
    """One attempt's preflight: the machine, the engine, the resolved identities and the configuration audit."""

    label: str
    plan_hash: str
    host: HostInfo
    engine_kind: str
    engine_python: str | None
    engine: AnyCapabilities | None
    target: ResolvedModel | None
    """The default track's resolved target; None for kind "openai" (the endpoints report their identity)."""
    proposers: dict[str, ResolvedModel | None]
    """Candidate name -> its resolved proposer (None when it could not be resolved)."""
    workloads: dict[str, WorkloadIdentity]
    audit: tuple[AuditFinding, ...]
    label_existed: bool
    seconds: float
    tracks: dict[str, ResolvedModel] = Field(default_factory=dict)
    """Track (its baseline group's name) -> resolved target, for every track of launched engines."""
    endpoints: dict[str, EndpointProbe] = Field(default_factory=dict)
    """Kind "openai": group name -> what its endpoint reported when probed."""
    changed_environment: tuple[str, ...] = ()
    """`--resume --allow-changed-environment`: what differed from the kept groups' conditions, one line each."""


class PreflightFile(PreflightAttempt):
    """`preflight.json`: this attempt's preflight and those of the attempts it resumed."""

    earlier_attempts: tuple[PreflightAttempt, ...] = ()
    """`--resume`: the preflights of the attempts before this one (oldest first), each as it was written."""


class AdmissionFile(ResultsDocument):
    """`admission.json`: the gate inputs and the result for every candidate."""

    results: tuple[AdmissionResult, ...]
    inputs: dict[str, AdmissionInput]


class LaunchRecord(BaseModel):
    """How a group's server was started (secrets redacted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...]
    speculative_config: dict[str, Any] | None
    """The engine's own speculative configuration, as it launched (read by nothing above the engines)."""
    served_model: str
    base_url: str
    startup_s: float | None
    proposal_length: int | None = None
    """Tokens proposed per verify step as launched, in every engine's terms; None: target-only or the engine's
    default."""

    @model_validator(mode="before")
    @classmethod
    def _stated_by_older_launches(cls, data: Any) -> Any:
        # Records written before launches stated their proposal length kept it in the engine's config only.
        if isinstance(data, dict) and "proposal_length" not in data:
            return {**data, "proposal_length": recorded_proposal_length(data.get("speculative_config"))}
        return data


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


class ManifestGroup(BaseModel):
    """One group's line in the manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    role: GroupRole
    family: str
    run_status: RunStatus
    reason: str
    complete: bool
    summary: str | None = None
    summary_sha256: str | None = None
    log: str | None = None
    records: tuple[str, ...] = ()
    track: str | None = None
    parity_records: tuple[str, ...] = ()


class Manifest(ResultsDocument):
    """`manifest.json`: the plan, its hash, versions and every group with its status and files."""

    label: str
    status: Literal["running", "complete", "interrupted"]
    created_at: str
    updated_at: str
    command: tuple[str, ...]
    plan_source: str
    plan_hash: str
    plan: dict[str, Any]
    engine_kind: str
    engine_version: str | None
    target_ref: str
    target_snapshot: str | None
    groups: tuple[ManifestGroup, ...]
    files: dict[str, str] = Field(default_factory=dict)
    """Relative path -> sha256 of every result file written so far (verified by `specselect verify`)."""
    budget: DurationEstimate | None = None
    """A sweep's expected duration for the groups after the baseline, stated before they ran."""
    sequential_stop: str | None = None
    """Why the rounds after a look were left out while pairs were still open (`[run] sequential_budget_s`)."""


class EvidenceFile(ResultsDocument, Evidence):
    """`evidence.json`: the pipeline's `Evidence` (every candidate x scenario, the policy applied, a verdict per
    candidate, sweeps, controls, the rounds' state) with the results header."""

    @classmethod
    def of(cls, evidence: Evidence) -> EvidenceFile:
        """The document of the pipeline's evidence."""
        return cls(**{name: getattr(evidence, name) for name in Evidence.model_fields})
