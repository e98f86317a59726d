"""`specselect run`: preflight -> admission -> groups one at a time -> evidence -> hand-off, resumable."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from specselect.artifacts.assemble import ScenarioKey, assemble_evidence
from specselect.artifacts.handoff import build_handoff
from specselect.artifacts.io import atomic_write_model, sha256_file
from specselect.artifacts.layout import LABEL_PATTERN, RunLayout
from specselect.artifacts.results import (
    AdmissionFile,
    EvidenceFile,
    GroupResult,
    Handoff,
    Manifest,
    ManifestGroup,
    PreflightFile,
)
from specselect.artifacts.store import load_document, load_manifest, load_records
from specselect.artifacts.sweeps import analyze_sweeps
from specselect.core.decision import Thresholds
from specselect.core.status import RunStatus
from specselect.errors import ConfigError, InterruptedRun, ResultsError, UsageError
from specselect.evidence.stats import BootstrapPolicy
from specselect.evidence.sweep import DurationEstimate
from specselect.measure.types import RequestRecord
from specselect.plan import BASELINE_GROUP, LoadedPlan, load_plan
from specselect.runner.admit import Admissions, admit_candidates
from specselect.runner.budget import is_sweep, remaining_budget
from specselect.runner.group import GroupInterrupted, run_group
from specselect.runner.jobs import build_job
from specselect.runner.launch import make_engine
from specselect.runner.paritypass import parity_policy
from specselect.runner.preflight import Preflight, run_preflight
from specselect.runner.progress import Progress
from specselect.runner.scenario import parity_scenario
from specselect.runner.signals import sigterm_as_interrupt

__all__ = ["RunOptions", "RunOutcome", "plan_scenarios", "probe_plan", "run_plan"]


@dataclass(frozen=True)
class RunOptions:
    """What the user asked `specselect run` for."""

    plan_ref: str
    results_dir: Path
    label: str | None = None
    resume: bool = False
    dry_run: bool = False
    home: Path | None = None
    command: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    """Everything a run produced (also what `probe` and `--dry-run` produce, without groups)."""

    layout: RunLayout
    loaded: LoadedPlan
    preflight: PreflightFile
    admission: AdmissionFile
    groups: list[GroupResult] = field(default_factory=list)
    evidence: EvidenceFile | None = None
    handoff: Handoff | None = None
    manifest: Manifest | None = None
    skipped_groups: list[str] = field(default_factory=list)
    """Groups taken from an earlier run by --resume."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def plan_scenarios(loaded: LoadedPlan) -> list[ScenarioKey]:
    """Every scenario of the plan, in a stable order: workloads in plan order x concurrency levels."""
    return [ScenarioKey(w, c) for w in loaded.plan.workloads for c in loaded.plan.run.concurrency]


def _label(loaded: LoadedPlan, override: str | None) -> str:
    label = override or loaded.plan.label
    if not LABEL_PATTERN.match(label):
        raise UsageError(
            f"label {label!r} has characters outside [A-Za-z0-9._-] (or is longer than 100)",
            location="--label",
            fix="use letters, digits, '.', '_' and '-'",
        )
    return label


def _check_resume(layout: RunLayout, loaded: LoadedPlan, resume: bool) -> Manifest | None:
    exists = layout.root.exists() and any(layout.root.iterdir())
    if not exists:
        return None
    if not resume:
        raise UsageError(
            f"results for label {layout.root.name!r} already exist",
            location=str(layout.root),
            fix="add --resume to continue that run, or choose another --label",
        )
    manifest = load_manifest(layout)
    if manifest.plan_hash != loaded.plan_hash:
        raise ResultsError(
            "the plan changed since this run started (plan hash differs)",
            location=str(layout.manifest),
            fix="resume with the same plan, or start a new --label",
        )
    return manifest


def _thresholds(loaded: LoadedPlan, pre: Preflight) -> Thresholds:
    t = loaded.plan.thresholds
    budget = t.max_peak_memory_mb
    if budget is None and pre.engine.caps is not None:
        budget = float(pre.engine.caps.memory_budget_mb)
    return Thresholds(
        min_throughput_speedup=t.min_throughput_speedup,
        max_ttft_regression_ratio=t.max_ttft_regression_ratio,
        max_e2e_p95_regression_ratio=t.max_e2e_p95_regression_ratio,
        max_peak_memory_mb=budget,
    )


class _Run:
    def __init__(self, opts: RunOptions, progress: Progress) -> None:
        self.opts = opts
        self.progress = progress
        self.loaded = load_plan(opts.plan_ref)
        self.label = _label(self.loaded, opts.label)
        self.layout = RunLayout(Path(opts.results_dir) / self.label)
        self.created_at = _now()
        self.budget: DurationEstimate | None = None
        self.budget_stated = False

    def preflight_and_admission(self, *, label_existed: bool) -> tuple[Preflight, Admissions]:
        pre = run_preflight(
            self.loaded,
            home=self.opts.home,
            results_root=self.layout.root.parent,
            label_existed=label_existed,
            progress=self.progress,
        )
        for finding in pre.document.audit:
            if finding.severity == "warning":
                self.progress.warn(f"{finding.code}: {finding.message}")
        if pre.errors:
            raise ConfigError(
                "configuration audit failed; nothing was started",
                location=self.loaded.source,
                problems=[f"{f.code}: {f.message}" for f in pre.errors],
            )
        self.progress.stage("admission")
        adm = admit_candidates(self.loaded, pre, home=self.opts.home)
        for r in adm.document.results:
            self.progress.info(f"{r.candidate:<20} {r.run_status.value:<17} {r.reason}")
        proposers = {name: g.proposer for name, g in adm.gathered.items()}
        doc = pre.document.model_copy(update={"proposers": proposers})
        return (
            Preflight(
                document=doc,
                engine=pre.engine,
                target=pre.target,
                workloads=pre.workloads,
                targets=pre.targets,
                endpoints=pre.endpoints,
            ),
            adm,
        )

    def load_parity(self, groups: dict[str, GroupResult], group: str, workload: str) -> list[RequestRecord] | None:
        """A group's completed parity-pass records for a workload, or None."""
        ran = next((p for p in groups[group].parity_passes if p.workload == workload), None)
        if ran is None or ran.status != "completed":
            return None
        return load_records(self.layout, group, parity_scenario(workload))

    def manifest(self, pre: Preflight, groups: dict[str, GroupResult], status: str, files: dict[str, str]) -> Manifest:
        entries: list[ManifestGroup] = []
        plan = self.loaded.plan
        for cand in plan.groups:
            g = groups.get(cand.name)
            summary = self.layout.group_summary(cand.name)
            entries.append(
                ManifestGroup(
                    name=cand.name,
                    role="baseline" if cand.is_baseline else "candidate",
                    family="target_only" if cand.is_baseline else cand.family,
                    run_status=g.run_status if g else RunStatus.RUNNABLE,
                    reason=g.reason if g else "pending",
                    complete=g.complete if g else False,
                    summary=self.layout.rel(summary) if g else None,
                    summary_sha256=files.get(self.layout.rel(summary)) if g else None,
                    log=g.log_path if g else None,
                    records=tuple(s.records_path for s in g.scenarios if s.records_path) if g else (),
                    track=plan.track_of(cand.name).name,
                    parity_records=tuple(p.records_path for p in g.parity_passes if p.records_path) if g else (),
                )
            )
        caps = pre.engine.caps
        endpoint = pre.endpoints.get(BASELINE_GROUP)
        version = caps.engine_version if caps else (endpoint.engine_version if endpoint else None)
        snapshot = pre.target.snapshot if pre.target else (endpoint.target_snapshot if endpoint else None)
        return Manifest.model_validate(
            {
                "label": self.label,
                "status": status,
                "created_at": self.created_at,
                "updated_at": _now(),
                "command": self.opts.command,
                "plan_source": self.loaded.source,
                "plan_hash": self.loaded.plan_hash,
                "plan": self.loaded.plan.model_dump(mode="json"),
                "engine_kind": self.loaded.plan.engine.kind,
                "engine_version": version,
                "target_ref": self.loaded.plan.target.model,
                "target_snapshot": snapshot,
                "groups": tuple(entries),
                "budget": self.budget,
                "files": dict(sorted(files.items())),
            }
        )

    def write(self, path: Path, doc: BaseModel, files: dict[str, str]) -> None:
        atomic_write_model(path, doc)
        if path != self.layout.manifest:  # a file cannot hold its own hash
            files[self.layout.rel(path)] = sha256_file(path)

    def resumable_group(self, name: str, previous: Manifest | None) -> GroupResult | None:
        """A group's earlier result when it is complete and its file is intact (else None: run it again)."""
        if previous is None:
            return None
        entry = next((g for g in previous.groups if g.name == name), None)
        if entry is None or not entry.complete or entry.summary is None:
            return None
        path = self.layout.root / entry.summary
        if not path.exists() or (entry.summary_sha256 and sha256_file(path) != entry.summary_sha256):
            return None
        try:
            group = load_document(path, GroupResult)
        except ResultsError:
            return None
        for rel, digest in (
            *((s.records_path, s.records_sha256) for s in group.scenarios),
            *((p.records_path, p.records_sha256) for p in group.parity_passes),
        ):
            if rel is None:
                continue
            rec = self.layout.root / rel
            if not rec.exists() or (digest and sha256_file(rec) != digest):
                return None
        return group if group.complete else None

    def state_budget(self, adm: Admissions, pre: Preflight, groups: dict[str, GroupResult]) -> None:
        """Once the baseline has run, say how long the rest of a sweep should take (and keep it in the manifest)."""
        baseline = groups.get(BASELINE_GROUP)
        if self.budget_stated or baseline is None or not is_sweep(self.loaded):
            return
        self.budget_stated = True
        self.budget = remaining_budget(self.loaded, adm, pre.workloads, baseline=baseline, done=groups)
        if self.budget is not None:
            b = self.budget
            self.progress.info(
                f"sweep budget: ~{b.seconds / 60:.1f} min for the groups left ({b.servers} server starts at "
                f"{b.startup_s:.0f} s, {len(b.per_scenario)} scenarios at {b.tokens_per_s:.1f} tok/s per stream, "
                f"measured on {BASELINE_GROUP}); a budget, not a promise"
            )

    def execute(self) -> RunOutcome:
        previous = _check_resume(self.layout, self.loaded, self.opts.resume)
        if previous is not None:
            self.created_at = previous.created_at
        pre, adm = self.preflight_and_admission(label_existed=previous is not None)
        outcome = RunOutcome(layout=self.layout, loaded=self.loaded, preflight=pre.document, admission=adm.document)
        if self.opts.dry_run:
            return outcome
        files: dict[str, str] = dict(previous.files) if previous else {}
        files.pop(self.layout.rel(self.layout.manifest), None)  # written by earlier versions, always stale
        self.write(self.layout.preflight, pre.document, files)
        self.write(self.layout.admission, adm.document, files)
        groups: dict[str, GroupResult] = {}
        self.write(self.layout.manifest, self.manifest(pre, groups, "running", files), files)
        engine = make_engine(self.loaded.plan.engine, pre.engine.env)
        with sigterm_as_interrupt():
            for cand in self.loaded.plan.groups:
                earlier = self.resumable_group(cand.name, previous)
                if earlier is not None:
                    groups[cand.name] = earlier
                    outcome.skipped_groups.append(cand.name)
                    self.progress.info(f"{cand.name}: kept from the earlier run ({earlier.run_status.value})")
                    continue
                self.state_budget(adm, pre, groups)
                job = build_job(self.loaded, self.layout, cand, pre=pre, adm=adm, done=groups)
                self.progress.stage(f"group {cand.name}")
                try:
                    result = run_group(
                        job,
                        loaded=self.loaded,
                        layout=self.layout,
                        engine=engine,
                        caps=pre.engine.caps,
                        target=pre.targets.get(job.track),
                        workloads=pre.workloads,
                        progress=self.progress,
                    )
                except GroupInterrupted as stop:
                    groups[cand.name] = stop.result
                    self.write(self.layout.group_summary(cand.name), stop.result, files)
                    self.write(self.layout.manifest, self.manifest(pre, groups, "interrupted", files), files)
                    raise InterruptedRun(
                        f"interrupted during group {cand.name}; the server was stopped and results so far are kept",
                        location=str(self.layout.root),
                        fix=f"continue with: specselect run {self.opts.plan_ref} --label {self.label} --resume",
                    ) from None
                groups[cand.name] = result
                if result.run_status == RunStatus.FAILED:
                    self.progress.warn(f"{cand.name} failed: {result.reason}: {result.hint}")
                else:
                    self.progress.info(f"{cand.name}: {result.run_status.value} ({result.reason})")
                self.write(self.layout.group_summary(cand.name), result, files)
                self.write(self.layout.manifest, self.manifest(pre, groups, "running", files), files)
        ordered = [groups[c.name] for c in self.loaded.plan.groups]
        scenarios = plan_scenarios(self.loaded)
        self.progress.stage("evidence")
        evidence = assemble_evidence(
            ordered,
            scenarios,
            load_records=lambda g, s: load_records(self.layout, g, s),
            categories={name: {i.id: i.category for i in w.items} for name, w in pre.workloads.items()},
            thresholds=_thresholds(self.loaded, pre),
            bootstrap=BootstrapPolicy(level=self.loaded.plan.thresholds.confidence_level),
            load_parity_records=lambda g, w: self.load_parity(groups, g, w),
            parity_pass=parity_policy(self.loaded),
            host_foreign_cpu_share_limit=self.loaded.plan.thresholds.max_host_foreign_cpu_share,
        )
        plan = self.loaded.plan
        sweeps = analyze_sweeps(
            evidence,
            ordered,
            sweeps=plan.sweeps,
            sweep_values={c.name: c.sweep.values for c in plan.candidates if c.sweep is not None},
            slo_ttft_ms=plan.thresholds.slo_ttft_ms,
            slo_tpot_ms=plan.thresholds.slo_tpot_ms,
            load_records=lambda g, s: load_records(self.layout, g, s),
        )
        if not sweeps.empty:
            evidence = evidence.model_copy(update={"sweeps": sweeps})
        handoff = build_handoff(
            evidence,
            ordered,
            scenarios,
            label=self.label,
            plan_hash=self.loaded.plan_hash,
            engine_kind=self.loaded.plan.engine.kind,
            target_ref=self.loaded.plan.target.model,
        )
        self.write(self.layout.evidence, evidence, files)
        self.write(self.layout.handoff, handoff, files)
        manifest = self.manifest(pre, groups, "complete", files)
        self.write(self.layout.manifest, manifest, files)
        outcome.groups = ordered
        outcome.evidence = evidence
        outcome.handoff = handoff
        outcome.manifest = manifest
        return outcome


def run_plan(opts: RunOptions, progress: Progress) -> RunOutcome:
    """Run a plan end to end (or only preflight + admission with `dry_run`)."""
    return _Run(opts, progress).execute()


def probe_plan(plan_ref: str, *, home: Path | None, results_dir: Path, progress: Progress) -> RunOutcome:
    """Preflight + admission only: no server starts and nothing is written."""
    run = _Run(RunOptions(plan_ref=plan_ref, results_dir=results_dir, dry_run=True, resume=True, home=home), progress)
    pre, adm = run.preflight_and_admission(label_existed=run.layout.root.exists())
    return RunOutcome(layout=run.layout, loaded=run.loaded, preflight=pre.document, admission=adm.document)
