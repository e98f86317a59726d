"""`specselect run`: preflight -> admission -> groups one at a time -> evidence -> hand-off, resumable."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from specselect._admission import Admissions, admit_plan
from specselect._artifacts.layout import LABEL_PATTERN, RunLayout
from specselect._core.status import RunStatus
from specselect._engines import Engine, GroupContext, create_engine
from specselect._evidence.pipeline import InMemoryRecords
from specselect._plan import BASELINE_GROUP, Candidate, LoadedPlan, load_plan
from specselect._runner.budget import is_sweep, remaining_budget, round_that_does_not_fit
from specselect._runner.conclusion import conclude, evidence_settings, look, plan_scenarios, proposer_costs
from specselect._runner.context import RunContext, group_context
from specselect._runner.group import GroupInterrupted, launch_label, relaunch_group, run_group
from specselect._runner.jobs import build_job
from specselect._runner.leftovers import stop_leftover_servers
from specselect._runner.manifest import ManifestWriter, now
from specselect._runner.preflight import Preflight, run_preflight
from specselect._runner.progress import Progress
from specselect._runner.resume import (
    changed_environment_warning,
    check_resume,
    keep_records,
    resumable_group,
    resumed_preflight,
)
from specselect._runner.rounds import RoundLoop, first_round_order
from specselect._runner.schedule_candidate import DerivationInputs, schedule_job, with_schedule
from specselect._runner.signals import sigterm_as_interrupt
from specselect.errors import ConfigError, InterruptedRun, UsageError
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import AdmissionFile, EvidenceFile, Manifest, PreflightFile

__all__ = ["RunOptions", "RunOutcome", "plan_scenarios", "probe_plan", "run_plan"]


@dataclass(frozen=True)
class RunOptions:
    """What the user asked `specselect run` for."""

    plan_ref: str
    results_dir: Path
    label: str | None = None
    resume: bool = False
    dry_run: bool = False
    verify_weights: bool = False
    """Hash every byte of large local checkpoints instead of identifying them by their files and headers."""
    allow_changed_environment: bool = False
    """`--resume` keeps groups measured under other conditions (engine, host, devices, target); recorded."""
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


def _document(adm: Admissions) -> AdmissionFile:
    return AdmissionFile(results=adm.results, inputs=adm.inputs)


def _label(loaded: LoadedPlan, override: str | None) -> str:
    label = override or loaded.plan.label
    if not LABEL_PATTERN.match(label):
        raise UsageError(
            f"label {label!r} has characters outside [A-Za-z0-9._-] (or is longer than 100)",
            location="--label",
            fix="use letters, digits, '.', '_' and '-'",
        )
    return label


class _Run:
    def __init__(self, opts: RunOptions, progress: Progress) -> None:
        self.opts = opts
        self.progress = progress
        self.loaded = load_plan(opts.plan_ref)
        self.label = _label(self.loaded, opts.label)
        self.layout = RunLayout(Path(opts.results_dir) / self.label)
        self.engine: Engine = create_engine(self.loaded.plan.engine)
        self.budget_stated = False
        self.t0 = time.monotonic()
        """When this invocation started: the clock of `[run] sequential_budget_s`."""
        self.previous: Manifest | None = None
        """The earlier run's manifest with --resume."""

    def preflight_and_admission(self, *, label_existed: bool) -> tuple[Preflight, Admissions]:
        pre = run_preflight(
            self.loaded,
            self.engine,
            home=self.opts.home,
            results_root=self.layout.root.parent,
            label_existed=label_existed,
            progress=self.progress,
            verify_weights=self.opts.verify_weights,
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
        adm = admit_plan(self.loaded.plan, lambda cand: self.engine.admit(self.context(pre, cand), home=self.opts.home))
        for r in adm.results:
            self.progress.info(f"{r.candidate:<20} {r.run_status.value:<17} {r.explained}")
        proposers = {name: g.proposer for name, g in adm.gathered.items()}
        return replace(pre, document=pre.document.model_copy(update={"proposers": proposers})), adm

    def context(self, pre: Preflight, cand: Candidate) -> GroupContext:
        """A group on its own track, as the engine sees it."""
        return group_context(self.loaded, pre.setup, pre.targets, cand, verify_weights=self.opts.verify_weights)

    def state_budget(
        self, writer: ManifestWriter, adm: Admissions, run: RunContext, groups: dict[str, GroupResult]
    ) -> None:
        """Once the baseline has run, say how long the rest of a sweep should take (and keep it in the manifest)."""
        baseline = groups.get(BASELINE_GROUP)
        if self.budget_stated or baseline is None or not is_sweep(self.loaded):
            return
        self.budget_stated = True
        b = writer.budget = remaining_budget(
            self.loaded,
            adm,
            run.workloads,
            baseline=baseline,
            done=groups,
            launches_servers=self.engine.launches_servers,
        )
        if b is not None:
            self.progress.info(
                f"sweep budget: ~{b.seconds / 60:.1f} min for the groups left ({b.servers} server starts at "
                f"{b.startup_s:.0f} s, {len(b.per_scenario)} scenarios at {b.tokens_per_s:.1f} tok/s per stream, "
                f"measured on {BASELINE_GROUP}); a budget, not a promise"
            )

    def interrupted(
        self, writer: ManifestWriter, pre: Preflight, groups: dict[str, GroupResult], name: str
    ) -> InterruptedRun:
        writer.write(self.layout.group_summary(name), groups[name])
        writer.update(pre, groups, "interrupted")
        return InterruptedRun(
            f"interrupted during group {name}; the server was stopped and results so far are kept",
            location=str(self.layout.root),
            fix=f"continue with: specselect run {self.opts.plan_ref} --label {self.label} --resume",
        )

    def run_groups(
        self, writer: ManifestWriter, pre: Preflight, adm: Admissions, run: RunContext, previous: Manifest | None
    ) -> tuple[dict[str, GroupResult], list[str]]:
        """Round 0 (every group; kept groups of an earlier run are not run again), then the rounds to each look
        for the candidates the rule runs on (`runner.rounds`)."""
        groups: dict[str, GroupResult] = {}
        kept: list[str] = []
        derivation = DerivationInputs(evidence_settings(run), plan_scenarios(self.loaded))
        plan = self.loaded.plan
        for name in first_round_order(plan):
            self.first_launch(writer, pre, adm, run, groups, kept, derivation, plan.group(name))
        active = [c.name for c in plan.groups if not c.is_baseline and groups[c.name].run_status == RunStatus.COMPLETED]
        loop = RoundLoop(
            plan,
            launch=lambda name, index: self.relaunch(writer, pre, adm, run, groups, plan.group(name), index),
            progress=self.progress,
            look=lambda: look(run, [groups[c.name] for c in plan.groups if c.name in groups]).plan,
            fits=lambda names, start, end: round_that_does_not_fit(
                plan.run.sequential_budget_s,
                time.monotonic() - self.t0,
                [groups[n] for n in names if n in groups],
                start=start,
                end=end,
            ),
        )
        outcome = loop.run(active, start=1, looks=plan.run.look_rounds)
        writer.sequential_stop = outcome.stop
        return groups, kept

    def first_launch(
        self,
        writer: ManifestWriter,
        pre: Preflight,
        adm: Admissions,
        run: RunContext,
        groups: dict[str, GroupResult],
        kept: list[str],
        derivation: DerivationInputs,
        cand: Candidate,
    ) -> None:
        """A group's launch in round 0 (or, admission refused it, its record without one)."""
        earlier = resumable_group(self.layout, cand.name, self.previous)
        if earlier is not None:
            keep_records(self.layout, earlier, run.records)
            groups[cand.name] = earlier
            kept.append(cand.name)
            self.progress.info(f"{cand.name}: kept from the earlier run ({earlier.run_status.value})")
            return
        self.state_budget(writer, adm, run, groups)
        job = schedule_job(build_job(self.loaded, cand, adm=adm, done=groups), run, groups, derivation)
        self.progress.stage(f"group {cand.name}")
        try:
            result = run_group(job, run, pre.targets.get(job.track))
        except GroupInterrupted as stop:
            groups[cand.name] = stop.result
            raise self.interrupted(writer, pre, groups, cand.name) from None
        groups[cand.name] = result
        if result.run_status == RunStatus.FAILED:
            self.progress.warn(f"{cand.name} failed: {result.reason}: {result.hint}")
        else:
            self.progress.info(f"{cand.name}: {result.run_status.value} ({result.reason})")
        writer.write(self.layout.group_summary(cand.name), result)
        writer.update(pre, groups, "running")

    def relaunch(
        self,
        writer: ManifestWriter,
        pre: Preflight,
        adm: Admissions,
        run: RunContext,
        groups: dict[str, GroupResult],
        cand: Candidate,
        index: int,
    ) -> GroupResult:
        """Launch `index` (round `index`) of a group whose first launch completed; kept launches of an earlier run
        are not run again."""
        group = groups[cand.name]
        if group.run_status != RunStatus.COMPLETED or len(group.relaunches) >= index:
            return group
        job = build_job(self.loaded, cand, adm=adm, done=groups)
        if group.derived_schedule is not None:
            job = with_schedule(job, run, group.derived_schedule)
        self.progress.stage(f"group {cand.name}, {launch_label(self.loaded.plan.run, index)}")
        try:
            groups[cand.name] = relaunch_group(job, run, pre.targets.get(job.track), group)
        except GroupInterrupted as stop:
            groups[cand.name] = stop.result
            raise self.interrupted(writer, pre, groups, cand.name) from None
        latest = groups[cand.name].relaunches[-1]
        if latest.run_status == RunStatus.FAILED:
            self.progress.warn(f"{cand.name} round {index + 1} failed: {latest.reason}: {latest.hint}")
        writer.write(self.layout.group_summary(cand.name), groups[cand.name])
        writer.update(pre, groups, "running")
        return groups[cand.name]

    def execute(self) -> RunOutcome:
        if not self.opts.dry_run:
            stop_leftover_servers(self.layout, self.progress)
        previous = self.previous = check_resume(self.layout, self.loaded, self.opts.resume)
        pre, adm = self.preflight_and_admission(label_existed=previous is not None)
        allow = self.opts.allow_changed_environment
        pre = replace(pre, document=resumed_preflight(self.layout, previous, pre.document, allow=allow))
        if (changed := changed_environment_warning(pre.document)) is not None:
            self.progress.warn(changed)
        outcome = RunOutcome(layout=self.layout, loaded=self.loaded, preflight=pre.document, admission=_document(adm))
        if self.opts.dry_run:
            return outcome
        writer = ManifestWriter(
            self.layout,
            self.loaded,
            self.label,
            created_at=previous.created_at if previous else now(),
            command=self.opts.command,
            files=dict(previous.files) if previous else {},
        )
        writer.files.pop(self.layout.rel(self.layout.manifest), None)  # written by earlier versions, always stale
        writer.write(self.layout.preflight, pre.document)
        writer.write(self.layout.admission, outcome.admission)
        writer.update(pre, {}, "running")
        run = RunContext(
            self.loaded,
            self.layout,
            self.engine,
            pre.setup,
            pre.workloads,
            InMemoryRecords(),
            self.progress,
            proposer_costs=proposer_costs(self.loaded.plan, adm, pre.targets),
            targets=pre.targets,
            gathered=adm.gathered,
            verify_weights=self.opts.verify_weights,
        )
        with sigterm_as_interrupt():
            groups, outcome.skipped_groups = self.run_groups(writer, pre, adm, run, previous)
        outcome.groups = [groups[c.name] for c in self.loaded.plan.groups]
        self.progress.stage("evidence")
        conclusion = conclude(run, outcome.groups, self.label)
        writer.write(self.layout.evidence, conclusion.evidence)
        writer.write(self.layout.handoff, conclusion.handoff)
        outcome.evidence, outcome.handoff = conclusion.evidence, conclusion.handoff
        outcome.manifest = writer.update(pre, groups, "complete")
        return outcome


def run_plan(opts: RunOptions, progress: Progress) -> RunOutcome:
    """Run a plan end to end (or only preflight + admission with `dry_run`)."""
    return _Run(opts, progress).execute()


def probe_plan(
    plan_ref: str, *, home: Path | None, results_dir: Path, progress: Progress, verify_weights: bool = False
) -> RunOutcome:
    """Preflight + admission only: no server starts and nothing is written."""
    opts = RunOptions(
        plan_ref=plan_ref, results_dir=results_dir, dry_run=True, resume=True, home=home, verify_weights=verify_weights
    )
    run = _Run(opts, progress)
    pre, adm = run.preflight_and_admission(label_existed=run.layout.root.exists())
    return RunOutcome(layout=run.layout, loaded=run.loaded, preflight=pre.document, admission=_document(adm))
