"""The versioned result documents of a run (one pydantic model per file under `results/<label>/`).

Every document carries `schema_version`, the tool name and version; renderers read only these.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from specselect._core.gates import AdmissionInput, AdmissionResult
from specselect._core.status import RunStatus
from specselect.records.assets import ResolvedModel
from specselect.records.capabilities import AnyCapabilities
from specselect.records.document import ResultsDocument
from specselect.records.endpoints import EndpointProbe
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.sweeps import DurationEstimate
from specselect.records.group import GroupRole
from specselect.records.host import HostInfo
from specselect.records.workloads import WorkloadIdentity

__all__ = [
    "AdmissionFile",
    "AuditFinding",
    "ClusterFile",
    "ClusterNode",
    "EvidenceFile",
    "Manifest",
    "ManifestGroup",
    "NodeFacts",
    "PreflightAttempt",
    "PreflightFile",
]


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


class NodeFacts(BaseModel):
    """A cluster node that ran blocks of a run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str
    """The cluster's id of the node (Ray's node id); "local" for blocks run in the driving process."""
    hostname: str
    host: HostInfo


class ClusterNode(NodeFacts):
    """A node with what it ran and how its baseline compares with the other nodes'."""

    launches: int = 0
    baseline_launches: int = 0
    baseline_rate_ratio: float | None = None
    """Its baseline launches' output rate over the median node's, the median over the scenarios both measured;
    None without a completed baseline scenario on it (or with one node)."""
    outlier: bool = False
    """The ratio lies beyond the plan's `baseline_outlier` factor (above it or below its inverse)."""


class ClusterFile(ResultsDocument):
    """results/<label>/cluster.json: the nodes a cluster run's blocks ran on (each launch names its node in
    `node`); a node whose baseline is an outlier is flagged, not hidden (its pairs stay within it)."""

    backend: Literal["ray"]
    baseline_outlier: float
    nodes: dict[str, ClusterNode] = Field(default_factory=dict)


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
