"""`specselect run`: preflight -> admission -> groups one at a time -> evidence -> hand-off, resumable."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from specselect._admission import Admissions, admit_plan
from specselect._artifacts.layout import LABEL_PATTERN, RunLayout
from specselect._core.status import RunStatus
from specselect._engines import Engine, GroupContext, create_engine
from specselect._evidence.pipeline import InMemoryRecords
from specselect._plan import BASELINE_GROUP, Candidate, LoadedPlan, load_plan
from specselect._runner.budget import is_sweep, remaining_budget, round_that_does_not_fit
from specselect._runner.cluster.driver import ClusterRounds
from specselect._runner.cluster.leases import RayLeases
from specselect._runner.cluster.nodes import cluster_nodes
from specselect._runner.cluster.requirements import cluster_problems
from specselect._runner.conclusion import conclude, evidence_settings, look, plan_scenarios, proposer_costs
from specselect._runner.context import RunContext, group_context
from specselect._runner.group import GroupInterrupted, launch_label
from specselect._runner.launch import RunGroups
from specselect._runner.leftovers import stop_leftover_servers
from specselect._runner.manifest import ManifestWriter, now
from specselect._runner.preflight import Preflight, run_preflight
from specselect._runner.progress import Progress, SilentProgress
from specselect._runner.resume import (
    changed_environment_warning,
    check_resume,
    keep_records,
    resumable_group,
    resumed_preflight,
)
from specselect._runner.rounds import Launch, RoundLoop, Wave, first_round_order
from specselect._runner.schedule_candidate import DerivationInputs
from specselect._runner.signals import sigterm_as_interrupt
from specselect.errors import ConfigError, EngineError, InterruptedRun, UsageError
from specselect.records.evidence.rounds import RoundsPlan
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import (
    AdmissionFile,
    ClusterFile,
    EvidenceFile,
    Manifest,
    NodeFacts,
    PreflightFile,
)

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
        cluster_problems(self.loaded, launches_servers=self.engine.launches_servers)
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

    def interrupted(self, groups: RunGroups, name: str, result: GroupResult) -> InterruptedRun:
        groups.save(name, result, "interrupted")
        return InterruptedRun(
            f"interrupted during group {name}; the server was stopped and results so far are kept",
            location=str(self.layout.root),
            fix=f"continue with: specselect run {self.opts.plan_ref} --label {self.label} --resume",
        )

    def run_groups(self, groups: RunGroups) -> None:
        """Round 0 (every group; kept groups of an earlier run are not run again), then the rounds to each look
        for the candidates the rule runs on (`runner.rounds`); on a cluster, as waves of blocks."""
        plan = self.loaded.plan
        if not plan.cluster.is_local:
            self.run_on_cluster(groups)
            return
        for name in first_round_order(plan):
            self.first_launch(groups, plan.group(name))
        loop = self.round_loop(groups, launch=lambda name, index: self.relaunch(groups, plan.group(name), index))
        groups.writer.sequential_stop = loop.run(self.active(groups), start=1, looks=plan.run.look_rounds).stop

    def active(self, groups: RunGroups) -> list[str]:
        """The candidates whose first launch completed."""
        done = RunStatus.COMPLETED
        return [
            c.name for c in self.loaded.plan.groups if not c.is_baseline and groups.results[c.name].run_status == done
        ]

    def round_loop(self, groups: RunGroups, launch: Launch, wave: Wave | None = None) -> RoundLoop:
        """The rounds after round 0 to each look; before each look `groups.before_look` runs."""
        plan, results = self.loaded.plan, groups.results

        def at_look() -> RoundsPlan | None:
            groups.before_look()
            return look(groups.run, [results[c.name] for c in plan.groups if c.name in results]).plan

        return RoundLoop(
            plan,
            launch=launch,
            progress=self.progress,
            look=at_look,
            fits=lambda names, start, end: round_that_does_not_fit(
                plan.run.sequential_budget_s,
                time.monotonic() - self.t0,
                [results[n] for n in names if n in results],
                start=start,
                end=end,
            ),
            wave=wave,
        )

    def run_on_cluster(self, groups: RunGroups) -> None:
        """Round 0 and the waves after it as blocks leased from the plan's cluster (`runner.cluster`)."""
        plan = self.loaded.plan
        leases = RayLeases(plan.cluster, self.progress, node_lines=not isinstance(self.progress, SilentProgress))
        rounds = ClusterRounds(groups, leases, self.progress, self.label, self.previous)
        groups.before_look = rounds.reread_records
        try:
            leases.connect()
            rounds.first_round()
            # With `wave`, the loop runs each stretch of rounds as one wave of blocks; `launch` is not called.
            loop = self.round_loop(groups, launch=lambda name, index: groups.results[name], wave=rounds.wave)
            groups.writer.sequential_stop = loop.run(self.active(groups), start=1, looks=plan.run.look_rounds).stop
            rounds.reread_records()
        except EngineError:
            groups.writer.update(groups.pre, groups.results, "interrupted")
            raise
        except KeyboardInterrupt:
            groups.writer.update(groups.pre, groups.results, "interrupted")
            raise InterruptedRun(
                "interrupted; the blocks in flight were cancelled and the finished ones are kept",
                location=str(self.layout.root),
                fix=f"continue with: specselect run {self.opts.plan_ref} --label {self.label} --resume",
            ) from None
        finally:
            leases.close()
            self.write_nodes(groups, rounds.nodes)

    def write_nodes(self, groups: RunGroups, facts: Mapping[str, NodeFacts]) -> None:
        """cluster.json: the nodes, what each ran, and a warning for a node whose baseline is an outlier."""
        factor = self.loaded.plan.cluster.baseline_outlier
        nodes = cluster_nodes([g for g in groups.results.values()], facts, factor)
        for node in nodes.values():
            if node.outlier:
                self.progress.warn(
                    f"node {node.hostname} ({node.node_id[:12]}): its baseline ran at {node.baseline_rate_ratio:.2f}x "
                    f"the median node's (outlier factor {factor:g}); its pairs stay within it: read the report's "
                    "node table"
                )
        groups.writer.write(self.layout.cluster, ClusterFile(backend="ray", baseline_outlier=factor, nodes=nodes))

    def first_launch(self, groups: RunGroups, cand: Candidate) -> None:
        """A group's launch in round 0 (or, admission refused it, its record without one)."""
        earlier = resumable_group(self.layout, cand.name, self.previous)
        if earlier is not None:
            keep_records(self.layout, earlier, groups.run.records)
            groups.results[cand.name] = earlier
            groups.kept.append(cand.name)
            self.progress.info(f"{cand.name}: kept from the earlier run ({earlier.run_status.value})")
            return
        self.state_budget(groups.writer, groups.adm, groups.run, groups.results)
        self.progress.stage(f"group {cand.name}")
        try:
            result = groups.launch(cand, 0)
        except GroupInterrupted as stop:
            raise self.interrupted(groups, cand.name, stop.result) from None
        if result.run_status == RunStatus.FAILED:
            self.progress.warn(f"{cand.name} failed: {result.reason}: {result.hint}")
        else:
            self.progress.info(f"{cand.name}: {result.run_status.value} ({result.reason})")
        groups.save(cand.name, result)

    def relaunch(self, groups: RunGroups, cand: Candidate, index: int) -> GroupResult:
        """Launch `index` (round `index`) of a group whose first launch completed; kept launches of an earlier run
        are not run again."""
        group = groups.results[cand.name]
        if group.run_status != RunStatus.COMPLETED or len(group.relaunches) >= index:
            return group
        self.progress.stage(f"group {cand.name}, {launch_label(self.loaded.plan.run, index)}")
        try:
            result = groups.launch(cand, index)
        except GroupInterrupted as stop:
            raise self.interrupted(groups, cand.name, stop.result) from None
        latest = result.relaunches[-1]
        if latest.run_status == RunStatus.FAILED:
            self.progress.warn(f"{cand.name} round {index + 1} failed: {latest.reason}: {latest.hint}")
        groups.save(cand.name, result)
        return result

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
        derivation = DerivationInputs(evidence_settings(run), plan_scenarios(self.loaded))
        measured = RunGroups(run, adm, derivation, writer, pre)
        with sigterm_as_interrupt():
            self.run_groups(measured)
        groups, outcome.skipped_groups = measured.results, measured.kept
        outcome.groups = [groups[c.name] for c in self.loaded.plan.groups]
        self.progress.stage("evidence")
        conclusion = conclude(measured.run, outcome.groups, self.label)
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
