"""Reading result documents back: schema-version checks, foreign directories refused with a clear message."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

import specselect
from specselect._artifacts.layout import RunLayout
from specselect.errors import ProtocolError, ResultsError
from specselect.records.document import RESULTS_SCHEMA_VERSION, ResultsDocument
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.measurement import RequestRecord
from specselect.records.results import AdmissionFile, ClusterFile, EvidenceFile, Manifest, PreflightFile
from specselect.records.telemetry import SpecMetricsReader

__all__ = ["RunDocuments", "check_header", "load_document", "load_group", "load_manifest", "load_records", "load_run"]

M = TypeVar("M", bound=BaseModel)


def check_header(raw: object, path: Path, readable: tuple[int, ...] = (RESULTS_SCHEMA_VERSION,)) -> dict[str, Any]:
    """The document's JSON object when specselect wrote it in a schema this version reads (`readable`: the
    document's `READABLE_SCHEMA_VERSIONS`); ResultsError naming the file otherwise (another tool's file, or
    another schema version with the version that wrote it)."""
    if not isinstance(raw, dict) or raw.get("tool", "specselect") != "specselect" or "schema_version" not in raw:
        raise ResultsError(
            "not a specselect result file (no schema_version / tool)",
            location=str(path),
            fix="point at a directory written by `specselect run`",
        )
    version = raw.get("schema_version")
    if version not in readable:
        writer = raw.get("tool_version", "an unknown version")
        reads = " or ".join(str(v) for v in readable)
        raise ResultsError(
            f"result schema_version {version!r} (written by specselect {writer}); this specselect "
            f"{specselect.__version__} reads schema_version {reads}",
            location=str(path),
            fix=f"read it with specselect {writer}, or re-run the plan with this version",
        )
    return raw


def load_document(path: Path, model: type[M]) -> M:
    """Read one result document; ResultsError naming the file for anything that is not ours or not this version."""
    try:
        raw = json.loads(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError as exc:
        raise ResultsError("missing result file", location=str(path), fix="run `specselect run` first") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"not a readable JSON result file ({exc})", location=str(path)) from exc
    except RecursionError:
        raise ResultsError("not a readable JSON result file (nested too deeply)", location=str(path)) from None
    readable = model.READABLE_SCHEMA_VERSIONS if issubclass(model, ResultsDocument) else (RESULTS_SCHEMA_VERSION,)
    try:
        return model.model_validate(check_header(raw, Path(path), readable))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ResultsError(f"invalid result file: {where}: {first['msg']}", location=str(path)) from exc


def load_manifest(layout: RunLayout) -> Manifest:
    """The run's manifest (ResultsError when the directory is not a specselect run)."""
    if not layout.manifest.exists():
        raise ResultsError(
            "no manifest.json: not a specselect results directory",
            location=str(layout.root),
            fix="give results/<label> of a run",
        )
    return load_document(layout.manifest, Manifest)


def load_group(layout: RunLayout, group: str) -> GroupResult:
    """One group's summary document."""
    return load_document(layout.group_summary(group), GroupResult)


def load_records(
    layout: RunLayout, group: str, scenario: str, launch: int = 0, *, read_spec_metrics: SpecMetricsReader | None = None
) -> list[RequestRecord]:
    """The raw per-request records of one group's launch and scenario (JSON Lines).

    `read_spec_metrics` fills the speculative counts of records written before the engine's session read them (the
    engine's own fields are kept in every record).
    """
    path = layout.records(group, scenario, launch)
    out: list[RequestRecord] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"cannot read records ({exc})", location=str(path)) from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = RequestRecord.model_validate_json(line)
            if read_spec_metrics is not None and record.speculative is None and record.engine_fields:
                record = record.model_copy(update={"speculative": read_spec_metrics(record.engine_fields)})
        except ValidationError as exc:
            raise ResultsError(f"invalid record: {exc.errors()[0]['msg']}", location=f"{path}:{number}") from exc
        except ProtocolError as exc:
            raise ResultsError(f"invalid record: {exc.message}", location=f"{path}:{number}") from exc
        out.append(record)
    return out


@dataclass(frozen=True)
class RunDocuments:
    """The result documents of one run, groups in plan order; an optional document is None when it is not there
    (an interrupted run has no evidence yet), with a note saying so."""

    root: Path
    manifest: Manifest
    preflight: PreflightFile | None
    admission: AdmissionFile | None
    groups: tuple[GroupResult, ...]
    evidence: EvidenceFile | None
    handoff: Handoff | None
    notes: tuple[str, ...] = ()
    """What could not be read and what that leaves out, one line each."""
    cluster: ClusterFile | None = None
    """A cluster run's nodes (cluster.json); None for a run on one machine."""


def _optional(path: Path, model: type[M], notes: list[str], why: str) -> M | None:
    if not path.exists():
        notes.append(f"{path.name} is missing: {why}")
        return None
    return load_document(path, model)


def _groups(layout: RunLayout, manifest: Manifest, notes: list[str]) -> tuple[GroupResult, ...]:
    groups: list[GroupResult] = []
    for entry in manifest.groups:
        if entry.summary is None:
            notes.append(f"group {entry.name} has no result yet ({entry.reason})")
            continue
        path = layout.root / entry.summary
        if not path.exists():
            notes.append(f"{entry.summary} is missing: group {entry.name} is shown from the manifest only")
            continue
        groups.append(load_document(path, GroupResult))
    return tuple(groups)


def load_run(results_dir: Path) -> RunDocuments:
    """Read a run's result documents (the manifest required, the others when present); ResultsError naming the file
    for a missing or foreign directory or a document of another schema version."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ResultsError(
            "results directory not found",
            location=str(root),
            fix="give results/<label> of a `specselect run` (see the labels under results/)",
        )
    layout = RunLayout(root)
    if not layout.manifest.exists():
        raise ResultsError(
            "no manifest.json: not a specselect results directory",
            location=str(root),
            fix="give results/<label> of a `specselect run`",
        )
    manifest = load_document(layout.manifest, Manifest)
    notes: list[str] = []
    preflight = _optional(layout.preflight, PreflightFile, notes, "identities and host facts are not shown")
    admission = _optional(layout.admission, AdmissionFile, notes, "the admission matrix is not shown")
    groups = _groups(layout, manifest, notes)
    evidence: EvidenceFile | None = None
    handoff: Handoff | None = None
    if manifest.status == "complete":
        evidence = _optional(layout.evidence, EvidenceFile, notes, "no decisions can be shown")
        handoff = _optional(layout.handoff, Handoff, notes, "no recommendation can be shown")
    else:
        notes.append(
            f"the run is {manifest.status}: no evidence or decisions yet "
            f"(finish it with `specselect run {manifest.plan_source} --label {manifest.label} --resume`)"
        )
    cluster = load_document(layout.cluster, ClusterFile) if layout.cluster.exists() else None
    return RunDocuments(root, manifest, preflight, admission, groups, evidence, handoff, tuple(notes), cluster)
