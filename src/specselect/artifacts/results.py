"""The versioned result documents of a run (one pydantic model per file under `results/<label>/`).

Every document carries `schema_version`, the tool name and version; renderers read only these.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import specselect
from specselect.assets.refs import ResolvedModel
from specselect.core.admission import AdmissionInput, AdmissionResult
from specselect.core.decision import DecisionResult, Thresholds
from specselect.core.evidence import PairEvidence
from specselect.core.status import RunStatus
from specselect.engines.base import ReleaseCheck, SanityResult
from specselect.engines.hostinfo import HostInfo
from specselect.engines.telemetry import SpecTelemetry
from specselect.engines.vllm.probe import EngineCapabilities
from specselect.evidence.categories import CategoryBreakdown
from specselect.evidence.parity import ScenarioParity
from specselect.evidence.prediction import SpeedupPrediction
from specselect.evidence.stats import BootstrapPolicy, PairedStats
from specselect.measure.memory import PeakMemory
from specselect.measure.types import ScenarioSummary
from specselect.workloads.model import WorkloadIdentity

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "AdmissionFile",
    "AuditFinding",
    "EvidenceFile",
    "EvidencePolicy",
    "GroupResult",
    "Handoff",
    "HandoffCandidate",
    "HandoffScenario",
    "LaunchRecord",
    "Manifest",
    "ManifestGroup",
    "PreflightFile",
    "ScenarioEvidence",
    "ScenarioRun",
]

RESULTS_SCHEMA_VERSION = 1
"""Version of every document in this module; readers refuse other versions with a clear message."""

GroupRole = Literal["baseline", "candidate"]


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = RESULTS_SCHEMA_VERSION
    tool: Literal["specselect"] = "specselect"
    tool_version: str = Field(default_factory=lambda: specselect.__version__)


class AuditFinding(BaseModel):
    """One configuration-audit finding; `error` findings stop the run before anything starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Literal["error", "warning", "info"]
    code: str
    message: str


class PreflightFile(_Doc):
    """`preflight.json`: the machine, the engine, the resolved identities and the configuration audit."""

    label: str
    plan_hash: str
    host: HostInfo
    engine_kind: str
    engine_python: str | None
    engine: EngineCapabilities | None
    target: ResolvedModel
    proposers: dict[str, ResolvedModel | None]
    """Candidate name -> its resolved proposer (None when it could not be resolved)."""
    workloads: dict[str, WorkloadIdentity]
    audit: tuple[AuditFinding, ...]
    label_existed: bool
    seconds: float


class AdmissionFile(_Doc):
    """`admission.json`: the gate inputs and the result for every candidate."""

    results: tuple[AdmissionResult, ...]
    inputs: dict[str, AdmissionInput]


class LaunchRecord(BaseModel):
    """How a group's server was started (secrets redacted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[str, ...]
    speculative_config: dict[str, Any] | None
    served_model: str
    base_url: str
    startup_s: float | None


class ScenarioRun(BaseModel):
    """One scenario of one group: its summary, engine telemetry, peak memory and raw-records file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    workload: str
    workload_identity: WorkloadIdentity
    concurrency: int
    status: Literal["completed", "failed"]
    error: str | None = None
    summary: ScenarioSummary | None = None
    telemetry: SpecTelemetry | None = None
    peak_memory: PeakMemory | None = None
    records_path: str | None = None
    records_sha256: str | None = None
    n_records: int = 0


class GroupResult(_Doc):
    """`groups/<group>.json`: everything about one group, whether it ran or not."""

    group: str
    role: GroupRole
    family: str
    method: str | None
    run_status: RunStatus
    reason: str
    hint: str | None = None
    execution_path: Literal["target_only", "speculative"]
    target_snapshot: str
    proposer_snapshot: str | None = None
    engine_version: str | None = None
    admission: AdmissionResult | None = None
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
        """True when the group reached a final state that `--resume` must not redo."""
        return self.run_status != RunStatus.RUNNABLE and not (
            self.run_status == RunStatus.FAILED and self.reason == "interrupted"
        )


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


class Manifest(_Doc):
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


class EvidencePolicy(BaseModel):
    """The rules applied to turn measurements into decisions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thresholds: Thresholds
    bootstrap: BootstrapPolicy
    parity_unit: Literal["tokens", "characters"]
    rule: str


class ScenarioEvidence(BaseModel):
    """One candidate in one scenario: the pair evidence, its statistics and the decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    scenario: str
    workload: str
    concurrency: int
    track: str
    evidence: PairEvidence
    decision: DecisionResult
    parity: ScenarioParity | None = None
    stats: PairedStats | None = None
    telemetry: SpecTelemetry | None = None
    prediction: SpeedupPrediction | None = None
    categories: CategoryBreakdown | None = None


class EvidenceFile(_Doc):
    """`evidence.json`: every candidate x scenario, the policy applied, and a verdict per candidate."""

    policy: EvidencePolicy
    entries: tuple[ScenarioEvidence, ...]
    verdicts: dict[str, str]


class HandoffCandidate(BaseModel):
    """A completed, comparable candidate in one scenario, with what a deployment decision needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    method: str | None
    decision: str
    reason: str
    confidence: str
    throughput_speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    ttft_ratio: float | None
    e2e_p95_ratio: float | None
    peak_memory_mb: float | None
    parity: str | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    telemetry_source: str | None
    speculative_config: dict[str, Any] | None
    proposer_snapshot: str | None


class HandoffScenario(BaseModel):
    """The hand-off for one scenario: comparable candidates and the recommended one (if any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    workload: str
    concurrency: int
    candidates: tuple[HandoffCandidate, ...]
    recommended: str | None
    """The accepted candidate with the highest speedup lower bound; None keeps the target-only baseline."""


class Handoff(_Doc):
    """`handoff.json`: only completed + comparable candidates, per scenario, with identities and the rule."""

    label: str
    plan_hash: str
    engine_kind: str
    engine_version: str | None
    target_ref: str
    target_snapshot: str
    rule: str
    scenarios: tuple[HandoffScenario, ...]
