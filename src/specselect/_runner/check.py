"""`specselect check`: measure a hand-off's configuration and its baseline again, briefly, on the same frozen
workload items and the engine and models installed now, and list every difference from what was recorded.

Order: the recorded plan (or `--plan`) reduced to the candidate, its track's baseline and the scenarios it was
recommended in; preflight and admission (identities are known before any server starts); the cost, stated; the
candidate's server first -- when its acceptance already differs from the recorded spread the answer is clear and
the baseline is not started -- then the baseline's, then the plan's later rounds through the run's own loop;
then THE speedup over every launch and parity against the recorded ones (`evidence.regression`). Everything
measured lands in `<out>/` with `check.json`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from specselect._admission import admit_plan
from specselect._artifacts.check import CheckCost, CheckReport, CheckScenario
from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._common.fileio import atomic_write_json
from specselect._core.status import RunStatus
from specselect._engines import Engine, create_engine
from specselect._evidence.acceptance import acceptance_spread
from specselect._evidence.pipeline import InMemoryRecords, ScenarioKey, build_evidence
from specselect._evidence.regression import (
    Problem,
    SpeedupSpan,
    acceptance_problems,
    config_problems,
    identity_problems,
    parity_problem,
    speedup_judged,
    speedup_problem,
)
from specselect._plan import LoadedPlan, Plan, load_plan
from specselect._runner.conclusion import evidence_settings
from specselect._runner.context import RunContext
from specselect._runner.group import GroupJob, relaunch_group, run_group
from specselect._runner.jobs import build_job
from specselect._runner.preflight import Preflight, run_preflight
from specselect._runner.progress import Progress
from specselect._runner.rounds import RoundLoop
from specselect.errors import ConfigError, ResultsError, UsageError
from specselect.records.evidence.result import Evidence
from specselect.records.group import GroupResult, ServerLife
from specselect.records.handoff import Handoff, HandoffCandidate, HandoffGroup

__all__ = [
    "CHECK_FILE",
    "MAX_REPEATS",
    "MAX_ROUNDS",
    "CheckOptions",
    "CheckOutcome",
    "Recorded",
    "load_recorded",
    "run_check",
]

CHECK_FILE = "check.json"
MAX_REPEATS = 100
MAX_ROUNDS = 50
"""The most passes per side and paired rounds a check takes (`--repeats`, `--rounds`)."""


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """What the user asked `specselect check` for."""

    target: Path
    """results/<label> of a run, or a hand-off file."""
    plan_ref: str | None = None
    """The setup to measure now (default: the recorded plan)."""
    candidate: str | None = None
    repeats: int = 1
    rounds: int | None = None
    """Paired rounds (None: the measured plan's `[run] rounds`, as the recorded run's first look)."""
    out_dir: Path | None = None
    home: Path | None = None

    def __post_init__(self) -> None:
        # The CLI's argument types refuse these first; a library caller gets the same refusal, before any work.
        if not 1 <= self.repeats <= MAX_REPEATS:
            raise UsageError(f"{self.repeats} repeats", location="--repeats", fix=f"give 1 to {MAX_REPEATS} repeats")
        if self.rounds is not None and not 1 <= self.rounds <= MAX_ROUNDS:
            raise UsageError(f"{self.rounds} rounds", location="--rounds", fix=f"give 1 to {MAX_ROUNDS} rounds")


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """The report and where it was written."""

    report: CheckReport
    path: Path


@dataclasses.dataclass(frozen=True)
class Recorded:
    """The hand-off checked against: the candidate, its scenarios and groups."""

    path: Path
    handoff: Handoff
    candidate: str
    entries: dict[str, HandoffCandidate]
    """Scenario -> the candidate's recorded evidence there."""
    group: HandoffGroup | None
    baseline: HandoffGroup | None

    def keys(self) -> list[ScenarioKey]:
        return [
            ScenarioKey(s.workload, s.concurrency, s.temperature)
            for s in self.handoff.scenarios
            if s.scenario in self.entries
        ]


def _handoff_path(target: Path) -> Path:
    path = target / "handoff.json" if target.is_dir() else target
    if not path.is_file():
        raise ResultsError(
            "no hand-off to check",
            location=str(target),
            fix="give results/<label> of a complete run or its handoff.json",
        )
    return path


def _chosen(handoff: Handoff, asked: str | None) -> str:
    if asked is not None:
        return asked
    if handoff.mix is not None and handoff.mix.recommended is not None:
        return handoff.mix.recommended
    named = [s.recommended for s in handoff.scenarios if s.recommended is not None]
    if not named:
        known = sorted({c.candidate for s in handoff.scenarios for c in s.candidates})
        raise UsageError(
            "the hand-off recommends no candidate",
            location="--candidate",
            fix=f"name the configuration to check with --candidate ({', '.join(known) or 'none was comparable'})",
        )
    return max(dict.fromkeys(named), key=named.count)


def _mix_scenarios(handoff: Handoff, name: str) -> set[str]:
    """The scenarios the mix's answer runs `name` in: every weighted one for the single configuration, its
    segments' for a hand-off written before schema 3 (whose answer routed workloads)."""
    mix = handoff.mix
    if mix is None or mix.recommended != name:
        return set()
    if mix.single is not None:
        return {
            f"{w}-c{c}" for w, share in mix.workloads.items() if share > 0 for c, p in mix.concurrency.items() if p > 0
        }
    option = next(o for o in mix.options if o.candidate == name)
    return {f"{s.workload}-c{c}" for s in option.segments for c in s.levels}


def load_recorded(target: Path, candidate: str | None) -> Recorded:
    """The hand-off at `target` and the candidate to check (the recommendation unless one is named)."""
    path = _handoff_path(target)
    handoff = load_document(path, Handoff)
    if handoff.plan is None:
        raise ResultsError(
            "this hand-off does not record its plan (written by an older specselect)",
            location=str(path),
            fix="run the plan again with this version",
        )
    name = _chosen(handoff, candidate)
    recommended = {s.scenario for s in handoff.scenarios if s.recommended == name} | _mix_scenarios(handoff, name)
    found = {s.scenario: c for s in handoff.scenarios for c in s.candidates if c.candidate == name}
    if not found:
        raise UsageError(
            f"{name} has no comparable evidence in the hand-off", location="--candidate", fix="name another candidate"
        )
    entries = {k: v for k, v in found.items() if k in recommended} or found
    groups = {g.group: g for g in handoff.groups}
    track = next(iter(entries.values())).track
    return Recorded(path, handoff, name, entries, groups.get(name), groups.get(track))


def _recorded_plan(recorded: Recorded) -> LoadedPlan:
    handoff = recorded.handoff
    plan = Plan.model_validate(handoff.plan)
    source = handoff.plan_source or str(recorded.path)
    base = (
        load_plan(source, check_files=False).base_dir
        if source.startswith("builtin:")
        else Path(source).expanduser().resolve().parent
    )
    return LoadedPlan(plan=plan, source=source, plan_hash=plan.plan_hash, base_dir=base, text="")


def reduced_plan(loaded: LoadedPlan, recorded: Recorded, repeats: int, rounds: int | None = None) -> LoadedPlan:
    """`loaded` with only the candidate (no sweep or schedule origin), its track's declared baseline, the
    checked workloads and levels, `repeats` repeats, no parity pass, no early stop and no [traffic]; the
    estimand is `frozen_prompts`: a regression check asks about the same prompts, not about the traffic.

    Its `[run] rounds` (or `rounds`) are measured, so THE speedup now has the recorded one's launch variance;
    one look: a check spends the cost it states up front, later looks would add rounds."""
    plan = loaded.plan
    cand = next((c for c in plan.candidates if c.name == recorded.candidate), None)
    if cand is None:
        raise UsageError(
            f"the plan measured now has no candidate {recorded.candidate}",
            location=loaded.source,
            fix="give --plan a plan with that candidate, or check another one with --candidate",
        )
    track = plan.track_of(cand.name).name
    entry = cand.model_dump(mode="json", exclude={"sweep", "schedule_of"})
    baselines = [c.model_dump(mode="json") for c in plan.candidates if c.is_baseline and c.name == track]
    keys = recorded.keys()
    data = plan.model_dump(mode="json", exclude={"traffic"})
    temperatures = sorted({k.temperature for k in keys})
    data.update(
        label=f"{plan.label[:90]}-check",
        sampling={**data["sampling"], "temperature": temperatures[0] if len(temperatures) == 1 else temperatures},
        thresholds={**data["thresholds"], "estimand": "frozen_prompts"},
        candidates=[*baselines, entry],
        workloads={w: data["workloads"][w] for w in dict.fromkeys(k.workload for k in keys)},
        run={
            **data["run"],
            "concurrency": sorted({k.concurrency for k in keys}),
            "repeats": repeats,
            "rounds": rounds or plan.run.rounds,
            "looks": [],
            "candidates_per_block": None,
            "sequential_budget_s": None,
            "parity_pass": "off",
            "early_stop": False,
        },
    )
    reduced = Plan.model_validate(data)
    return loaded.model_copy(update={"plan": reduced, "plan_hash": reduced.plan_hash})


def check_cost(recorded: Recorded, items: Mapping[str, int], repeats: int, warmup: int, rounds: int = 1) -> CheckCost:
    """Two servers, each started once per round, and each checked scenario once per side and round
    (`items`: workload -> item count), timed as the recorded run ran them: its start-ups, the baseline's seconds
    per request and the candidate's speedup; `warmup` waves of a scenario's concurrency warm it up."""
    startup = sum(g.startup_s or 0.0 for g in (recorded.group, recorded.baseline) if g is not None)
    requests = 0
    seconds = 0.0
    for scenario in recorded.handoff.scenarios:
        entry = recorded.entries.get(scenario.scenario)
        if entry is None or scenario.workload not in items:
            continue
        n = items[scenario.workload] * repeats + warmup * scenario.concurrency
        requests += 2 * n
        per = (scenario.baseline_seconds or 0.0) * n / scenario.concurrency
        seconds += per * (1.0 + 1.0 / (entry.throughput_speedup or 1.0))
    return CheckCost(
        servers=2 * rounds,
        rounds=rounds,
        recorded_rounds=recorded.handoff.rounds,
        startup_s=startup * rounds,
        requests=requests * rounds,
        measure_s=seconds * rounds,
        seconds=(startup + seconds) * rounds,
    )


def _span(point: float | None, low: float | None, high: float | None) -> SpeedupSpan:
    return SpeedupSpan(point=point, low=low, high=high)


@dataclasses.dataclass(frozen=True)
class _Prepared:
    pre: Preflight
    run: RunContext
    candidate: GroupJob
    baseline: GroupJob


class _Check:
    """One check: the recorded side, the reduced plan measured now, the run context once prepared."""

    def __init__(self, opts: CheckOptions, progress: Progress) -> None:
        self.opts, self.progress = opts, progress
        self.recorded = load_recorded(opts.target, opts.candidate)
        base = load_plan(opts.plan_ref) if opts.plan_ref else _recorded_plan(self.recorded)
        self.loaded = reduced_plan(base, self.recorded, opts.repeats, opts.rounds)
        handoff = self.recorded.handoff
        self.layout = RunLayout(opts.out_dir or self.recorded.path.parent.parent / f"{handoff.label}-check")
        self.engine: Engine = create_engine(self.loaded.plan.engine)
        self.track = self.loaded.plan.track_of(self.recorded.candidate).name

    def prepare(self) -> _Prepared:
        """Preflight and admission of the reduced plan, and both jobs (the candidate's recorded schedule in)."""
        pre = run_preflight(
            self.loaded,
            self.engine,
            home=self.opts.home,
            results_root=self.layout.root.parent,
            label_existed=self.layout.root.exists(),
            progress=self.progress,
        )
        if pre.errors:
            raise ConfigError(
                "configuration audit failed; nothing was started",
                location=self.loaded.source,
                problems=[f"{f.code}: {f.message}" for f in pre.errors],
            )
        run = RunContext(
            self.loaded, self.layout, self.engine, pre.setup, pre.workloads, InMemoryRecords(), self.progress
        )
        run = dataclasses.replace(run, targets=pre.targets)
        adm = admit_plan(self.loaded.plan, lambda c: self.engine.admit(run.group_context(c), home=self.opts.home))
        run = dataclasses.replace(run, gathered=adm.gathered)
        job = build_job(self.loaded, self.loaded.plan.group(self.recorded.candidate), adm=adm)
        schedule = self.recorded.group.derived_schedule if self.recorded.group is not None else None
        setting = self.engine.batch_schedule(schedule.ranges, run.group_context(job.candidate)) if schedule else None
        if setting is not None:
            cand = job.candidate.model_copy(update={"options": {**job.candidate.options, **setting}})
            job = dataclasses.replace(job, candidate=cand, schedule=schedule)
        baseline = build_job(self.loaded, self.loaded.plan.group(self.track), adm=adm)
        return _Prepared(pre, run, job, baseline)

    def identity(self, pre: Preflight, run: RunContext, job: GroupJob) -> list[Problem]:
        """Engine version, snapshots, workload keys and the speculative configuration, before any server starts."""
        ctx = dataclasses.replace(run.group_context(job.candidate), candidate=job.candidate)
        flags = self.engine.serve_flags(ctx, run.gathered.get(job.name))
        entry = next(iter(self.recorded.entries.values()))
        gathered = run.gathered.get(job.name)
        recorded: dict[str, str | None] = {
            "engine version": self.recorded.handoff.engine_version,
            "proposer snapshot": entry.proposer_snapshot,
        }
        now: dict[str, str | None] = {
            "engine version": pre.setup.engine_version,
            "proposer snapshot": gathered.proposer.snapshot if gathered and gathered.proposer else None,
        }
        if self.recorded.group is not None and self.recorded.group.serve is not None and flags is not None:
            recorded["target snapshot"], now["target snapshot"] = (
                self.recorded.group.serve.target_snapshot,
                flags.target_snapshot,
            )
        for scenario in self.recorded.handoff.scenarios:
            if scenario.scenario in self.recorded.entries and scenario.workload in pre.workloads:
                name = f"workload {scenario.workload}"
                recorded[name], now[name] = scenario.workload_key, pre.workloads[scenario.workload].identity.key
        speculative = flags.speculative if flags is not None else None
        local = flags.speculative_local_keys if flags is not None else ()
        return identity_problems(recorded, now) + config_problems(entry.speculative_config, speculative, ignore=local)

    def measure(
        self, run: RunContext, job: GroupJob, pre: Preflight, primary: GroupResult | None = None
    ) -> GroupResult:
        """The group's first launch, or with `primary` (its first launch's result) one more launch of it."""
        target = pre.targets.get(job.track)
        result = run_group(job, run, target) if primary is None else relaunch_group(job, run, target, primary)
        atomic_write_json(self.layout.group_summary(job.name), result.model_dump(mode="json"))
        return result

    def later_rounds(
        self, ready: _Prepared, first: Mapping[str, GroupResult]
    ) -> tuple[dict[str, GroupResult], str | None]:
        """Rounds 2 .. of candidate and baseline through the run's loop (round 1 ran the candidate first, so the
        design's order starts reversed); the groups, and None or the group whose latest launch did not complete."""
        groups = dict(first)
        jobs = {ready.candidate.name: ready.candidate, ready.baseline.name: ready.baseline}

        def launch(name: str, index: int) -> GroupResult:
            del index  # the next launch of the group: measure() appends it
            groups[name] = self.measure(ready.run, jobs[name], ready.pre, groups[name])
            return groups[name]

        plan = self.loaded.plan
        loop = RoundLoop(plan, launch=launch, progress=self.progress, reverse_first=True, stop_on_failure=True)
        outcome = loop.run([ready.candidate.name], start=1, looks=plan.run.look_rounds)
        return groups, outcome.broken

    def acceptance(self, run: RunContext) -> tuple[list[Problem], dict[str, CheckScenario]]:
        """The candidate's acceptance per scenario against the recorded spread."""
        policy = evidence_settings(run).bootstrap
        problems: list[Problem] = []
        rows: dict[str, CheckScenario] = {}
        for scenario, entry in self.recorded.entries.items():
            now = acceptance_spread(run.records.timed(self.recorded.candidate, scenario), policy)
            problems += acceptance_problems(scenario, entry.acceptance_spread, now.rates() if now else None)
            rows[scenario] = CheckScenario(
                scenario=scenario,
                recorded_speedup=_span(entry.throughput_speedup, entry.speedup_low, entry.speedup_high),
                speedup=None,
                recorded_acceptance=entry.acceptance_spread,
                acceptance=now,
                recorded_parity=entry.parity,
                parity=None,
            )
        return problems, rows

    def compare(self, evidence: Evidence, rows: dict[str, CheckScenario]) -> list[Problem]:
        """Speedup and parity per scenario against the recorded ones."""
        problems: list[Problem] = []
        rounds = self.loaded.plan.run.rounds
        judged = speedup_judged(rounds)
        for entry in evidence.entries:
            row = rows.get(entry.scenario)
            if row is None:
                continue
            # THE speedup over every launch measured now, as the recorded interval was.
            est = entry.speedup
            span = _span(est.point, est.low, est.high) if est is not None else _span(None, None, None)
            parity = entry.parity.verdict.value if entry.parity is not None else None
            rows[entry.scenario] = row.model_copy(update={"speedup": span, "speedup_judged": judged, "parity": parity})
            ev = entry.evidence
            why = f"{ev.evidence_status.value}, missing {', '.join(ev.missing_evidence)}" if ev.missing_evidence else ""
            found = speedup_problem(
                entry.scenario, row.recorded_speedup, span, why or ev.evidence_status.value, rounds=rounds
            )
            p = entry.parity
            detail = f"{p.n_compared - p.n_equal} of {p.n_compared} outputs differ" if p is not None else ""
            changed = parity_problem(entry.scenario, row.recorded_parity, parity, detail)
            problems += [p for p in (found, changed) if p is not None]
        return problems

    def report(
        self, cost: CheckCost, rows: Mapping[str, CheckScenario], problems: Sequence[Problem], stopped: str | None
    ) -> CheckOutcome:
        handoff = self.recorded.handoff
        report = CheckReport(
            handoff=str(self.recorded.path),
            label=handoff.label,
            plan_hash=handoff.plan_hash,
            candidate=self.recorded.candidate,
            plan_source=self.loaded.source,
            cost=cost,
            scenarios=tuple(rows.values()),
            problems=tuple(problems),
            stopped_early=stopped,
            ok=not problems,
        )
        path = self.layout.root / CHECK_FILE
        atomic_write_json(path, report.model_dump(mode="json"))
        return CheckOutcome(report=report, path=path)

    def failed(self, result: GroupResult, *, latest: bool = False) -> Problem | None:
        """A group (or, `latest`, its latest launch) that did not complete now."""
        life: ServerLife = result.relaunches[-1] if latest and result.relaunches else result
        if life.run_status == RunStatus.COMPLETED:
            return None
        name = f"{result.group} launch {len(result.relaunches) + 1}" if latest else result.group
        return Problem(
            kind="not_measured",
            message=f"{name} {life.run_status.value} now: {life.reason} {life.hint or ''}".strip(),
        )


def run_check(opts: CheckOptions, progress: Progress) -> CheckOutcome:
    """Measure the hand-off's configuration and its baseline again and compare (see the module docstring)."""
    check = _Check(opts, progress)
    ready = check.prepare()
    pre, run = ready.pre, ready.run
    items = {name: len(w.items) for name, w in pre.workloads.items()}
    plan_run = check.loaded.plan.run
    cost = check_cost(check.recorded, items, opts.repeats, plan_run.warmup_requests, plan_run.rounds)
    progress.info(f"check of {ready.candidate.name}: {cost.line()}")
    problems = check.identity(pre, run, ready.candidate)
    candidate = check.measure(run, ready.candidate, pre)
    failed = check.failed(candidate)
    if failed is not None:
        return check.report(cost, {}, [*problems, failed], "the candidate did not run")
    found, rows = check.acceptance(run)
    problems += found
    if found:
        stopped = "acceptance already differs from the recorded spread: the baseline was not started"
        progress.warn(f"check: {stopped}")
        return check.report(cost, rows, problems, stopped)
    baseline = check.measure(run, ready.baseline, pre)
    failed = check.failed(baseline)
    if failed is not None:
        return check.report(cost, rows, [*problems, failed], "the baseline did not run")
    groups, broken = check.later_rounds(ready, {candidate.group: candidate, baseline.group: baseline})
    candidate, baseline = groups[candidate.group], groups[baseline.group]
    if broken is not None:
        failed = check.failed(groups[broken], latest=True)
        return check.report(cost, rows, [*problems, *([failed] if failed else [])], f"a launch of {broken} did not run")
    evidence = build_evidence(
        [baseline, candidate],
        check.recorded.keys(),
        records=run.records,
        categories={name: {i.id: i.category for i in w.items} for name, w in run.workloads.items()},
        settings=evidence_settings(run),
    )
    problems += check.compare(evidence, rows)
    return check.report(cost, rows, problems, None)
