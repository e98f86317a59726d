"""`manifest.json`: the run's index, rewritten after every group (so an interrupted run says what finished)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_model, sha256_file
from specselect._core.status import RunStatus
from specselect._plan import BASELINE_GROUP, Candidate, LoadedPlan
from specselect._runner.preflight import Preflight
from specselect.records.evidence.sweeps import DurationEstimate
from specselect.records.group import GroupResult
from specselect.records.results import Manifest, ManifestGroup

__all__ = ["ManifestWriter", "now"]

Status = Literal["running", "complete", "interrupted"]


def now() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _entry(
    layout: RunLayout, loaded: LoadedPlan, cand: Candidate, g: GroupResult | None, files: Mapping[str, str]
) -> ManifestGroup:
    summary = layout.rel(layout.group_summary(cand.name))
    return ManifestGroup(
        name=cand.name,
        role="baseline" if cand.is_baseline else "control" if cand.is_control else "candidate",
        family="target_only" if cand.runs_target_only else cand.family,
        run_status=g.run_status if g else RunStatus.RUNNABLE,
        reason=g.reason if g else "pending",
        complete=g.complete if g else False,
        summary=summary if g else None,
        summary_sha256=files.get(summary) if g else None,
        log=g.log_path if g else None,
        records=tuple(s.records_path for s in g.all_scenario_runs() if s.records_path) if g else (),
        track=loaded.plan.track_of(cand.name).name,
        parity_records=tuple(p.records_path for p in g.parity_passes if p.records_path) if g else (),
    )


@dataclass
class ManifestWriter:
    """Writes the run's files atomically, records each one's sha256, and rewrites the manifest from them."""

    layout: RunLayout
    loaded: LoadedPlan
    label: str
    created_at: str
    command: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    """Relative path -> sha256 of every file written (kept files of a resumed run included)."""
    budget: DurationEstimate | None = None
    sequential_stop: str | None = None

    def write(self, path: Path, doc: BaseModel) -> None:
        """Write one result document and remember its hash (the manifest cannot hold its own)."""
        atomic_write_model(path, doc)
        if path != self.layout.manifest:
            self.files[self.layout.rel(path)] = sha256_file(path)

    def manifest(self, pre: Preflight, groups: Mapping[str, GroupResult], status: Status) -> Manifest:
        """The manifest of the run as it stands."""
        plan = self.loaded.plan
        endpoint = pre.setup.endpoints.get(BASELINE_GROUP)
        snapshot = pre.target.snapshot if pre.target else (endpoint.target_snapshot if endpoint else None)
        return Manifest(
            label=self.label,
            status=status,
            created_at=self.created_at,
            updated_at=now(),
            command=self.command,
            plan_source=self.loaded.source,
            plan_hash=self.loaded.plan_hash,
            plan=plan.model_dump(mode="json"),
            engine_kind=plan.engine.kind,
            engine_version=pre.setup.engine_version,
            target_ref=plan.target.model,
            target_snapshot=snapshot,
            groups=tuple(_entry(self.layout, self.loaded, c, groups.get(c.name), self.files) for c in plan.groups),
            budget=self.budget,
            sequential_stop=self.sequential_stop,
            files=dict(sorted(self.files.items())),
        )

    def update(self, pre: Preflight, groups: Mapping[str, GroupResult], status: Status) -> Manifest:
        """Write the manifest as it stands."""
        manifest = self.manifest(pre, groups, status)
        self.write(self.layout.manifest, manifest)
        return manifest
