"""Rerun agreement: the same plan run twice back to back -- does every decision survive the rerun?

1. `specselect run PLAN --label rerun-a --json`, then the same with `--label rerun-b`, in the default home (after
   `specselect setup`), each under the machine's server lock and timed (default plan: builtin:cpu-smoke).
2. From both runs' evidence.json, per candidate and scenario: each run's decision and reason, THE speedup with its
   interval (at the level of the look that decided), each round's rates behind it, whether the decisions agree,
   and whether each run's point lies inside the other run's interval and inside the other run's rerun interval
   (where that run expected a rerun's point: its interval widened by sqrt 2, `speedup.rerun_low/high`). The
   rerun interval is a prediction that can be wrong: a point outside it is a miss the table shows.
3. Any A/A controls of both runs (the baseline's configuration judged as a candidate).

Targets (issues 17 and 26): the two runs agree on every decision; each run's point for every comparable pair lies
inside the other run's interval; each run within 600 s; and on builtin:cpu-smoke both runs accept n-gram on the
copy task (repetition) and neither accepts it on the chat prompts (general).

    .venv/bin/python benchmarks/bench_rerun.py --server-lock /tmp/specselect-vllm.lock \\
        [--write-results benchmarks/RESULTS.md]
    .venv/bin/python benchmarks/bench_rerun.py --analyse results/rerun-a results/rerun-b [--write-results ...]
(the lock is taken in-process around each `specselect run` only, and waiting for it is not timed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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
)
from bench_selection_cost import CONTROL_HEADERS, control_rows, plan_line
from specselect._report.data import ReportData, load_report_data
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.rounds import RoundEstimate

TITLE = "Rerun agreement: the same plan twice, back to back"
TARGET_S = 600.0
LABELS = ("rerun-a", "rerun-b")


@dataclass(frozen=True)
class TimedRun:
    """One `specselect run` and where its results are; `seconds` is None when only analysed."""

    root: Path
    seconds: float | None = None
    lock_wait_s: float = 0.0


@dataclass(frozen=True)
class Agreement:
    """One candidate and scenario in both runs."""

    candidate: str
    scenario: str
    first: ScenarioEvidence
    second: ScenarioEvidence

    @property
    def comparable(self) -> bool:
        """Both runs have a point and an interval for this pair."""
        return all(_bounded(e.speedup) for e in (self.first, self.second))

    @property
    def same_decision(self) -> bool:
        return self.first.decision.decision == self.second.decision.decision

    def point_inside(self, *, rerun: bool) -> tuple[bool, bool] | None:
        """(first's point in second's interval, second's point in first's); None when not comparable."""
        if not self.comparable:
            return None
        return (_inside(self.first.speedup, self.second.speedup, rerun=rerun),
                _inside(self.second.speedup, self.first.speedup, rerun=rerun))  # fmt: skip


def _bounded(est: RoundEstimate | None) -> bool:
    return est is not None and None not in (est.point, est.low, est.high)


def _inside(point_of: RoundEstimate | None, interval_of: RoundEstimate | None, *, rerun: bool) -> bool:
    assert point_of is not None and interval_of is not None and point_of.point is not None
    low, high = (interval_of.rerun_low, interval_of.rerun_high) if rerun else (interval_of.low, interval_of.high)
    return low is not None and high is not None and low <= point_of.point <= high


def pair_up(first: Sequence[ScenarioEvidence], second: Sequence[ScenarioEvidence]) -> list[Agreement]:
    """The entries of two runs of one plan, matched on (candidate, scenario); SystemExit when the plans differ."""
    keyed = {(e.candidate, e.scenario): e for e in second}
    if set(keyed) != {(e.candidate, e.scenario) for e in first}:
        raise SystemExit("the two runs measured different candidates or scenarios; fix: give two runs of one plan")
    return [Agreement(e.candidate, e.scenario, e, keyed[(e.candidate, e.scenario)]) for e in first]


def _interval(est: RoundEstimate | None) -> str:
    if not _bounded(est):
        return "-"
    assert est is not None
    return f"{est.point:.2f}x [{est.low:.2f}, {est.high:.2f}] {est.level * 100:.4g}%"


def _decision(entry: ScenarioEvidence) -> str:
    return f"{entry.decision.decision.value} ({entry.decision.reason})"


def _yes_no(flags: tuple[bool, bool] | None) -> str:
    return "-" if flags is None else " / ".join("yes" if f else "NO" for f in flags)


def agreement_rows(pairs: Sequence[Agreement]) -> list[list[str]]:
    """One row per measured candidate and scenario."""
    return [
        [
            p.candidate,
            p.scenario,
            _decision(p.first),
            _decision(p.second),
            "yes" if p.same_decision else "NO",
            _interval(p.first.speedup),
            _interval(p.second.speedup),
            _yes_no(p.point_inside(rerun=False)),
            _yes_no(p.point_inside(rerun=True)),
        ]
        for p in pairs
        if p.comparable or not p.same_decision
    ]


def _rates(est: RoundEstimate | None, side: str) -> str:
    rates = () if est is None else (est.baseline_values if side == "baseline" else est.candidate_values)
    return ", ".join(f"{r:.1f}" for r in rates) or "-"


def launch_rows(pairs: Sequence[Agreement], names: Sequence[str]) -> list[list[str]]:
    """Each comparable pair's rates per round (tokens/s, round order) in both runs: the spread behind the intervals."""
    rows = []
    for p in pairs:
        if p.comparable:
            for run, entry in zip(names, (p.first, p.second), strict=True):
                rows.append([p.candidate, p.scenario, run, _rates(entry.speedup, "baseline"),
                             _rates(entry.speedup, "candidate")])  # fmt: skip
    return rows


def _smoke_targets(pairs: Sequence[Agreement]) -> list[TargetCheck]:
    """builtin:cpu-smoke's demo: n-gram accepted on the copy task in both runs, on the chat prompts in neither."""
    by = {(p.candidate, p.scenario): p for p in pairs}
    copy, chat = by.get(("g1_ngram", "repetition-c1")), by.get(("g1_ngram", "general-c1"))
    if copy is None or chat is None:
        return []
    decisions = [e.decision.decision.value for e in (copy.first, copy.second)]
    chat_decisions = [e.decision.decision.value for e in (chat.first, chat.second)]
    return [
        TargetCheck(
            target="rerun: both runs accept n-gram on the copy task (repetition-c1)",
            result=" and ".join(decisions),
            met=decisions == ["accept", "accept"],
        ),
        TargetCheck(
            target="rerun: neither run accepts n-gram on the chat prompts (general-c1)",
            result=" and ".join(chat_decisions),
            met="accept" not in chat_decisions,
        ),
    ]


def agreement_targets(pairs: Sequence[Agreement], runs: Sequence[TimedRun]) -> list[TargetCheck]:
    """Every decision the same; every comparable point inside the other run's interval; each run within 600 s."""
    differing = [f"{p.candidate}/{p.scenario}" for p in pairs if not p.same_decision]
    measured = [p for p in pairs if p.comparable]
    flags = [f for p in measured for f in p.point_inside(rerun=False) or ()]
    checks = [
        TargetCheck(
            target="rerun: the same decision for every candidate and scenario in both runs",
            result=f"{len(pairs) - len(differing)} of {len(pairs)} the same"
            + (f" (differ: {', '.join(differing)})" if differing else f", {len(measured)} of them measured"),
            met=not differing,
        ),
        TargetCheck(
            target="rerun: each run's point inside the other run's interval, every measured pair",
            result=f"{sum(flags)} of {len(flags)} points",
            met=bool(flags) and all(flags),
        ),
    ]
    checks += _smoke_targets(pairs)
    timed = [r.seconds for r in runs if r.seconds is not None]
    if timed:
        checks.append(
            TargetCheck(
                target=f"rerun: each run of the plan <= {TARGET_S:.0f} s",
                result=" and ".join(f"{s:.0f} s" for s in timed),
                met=max(timed) <= TARGET_S,
            )
        )
    return checks


def tabulate(report: Report, data: Sequence[ReportData], runs: Sequence[TimedRun]) -> list[TargetCheck]:
    """The section's tables from two runs' results; the targets they meet."""
    evidence = [d.evidence for d in data]
    if any(e is None for e in evidence):
        raise SystemExit("a run has no evidence.json (it did not conclude); fix: rerun it or --resume it")
    pairs = pair_up(*(e.entries for e in evidence if e is not None))
    a, b = names = [r.root.name for r in runs]
    report.table(
        "decisions and THE speedup in both runs (each interval at the level of the look that decided)",
        ["candidate", "scenario", f"{a} decision", f"{b} decision", "same", f"{a} speedup", f"{b} speedup",
         f"{a}'s point in {b}'s interval / {b}'s in {a}'s", "the same, rerun intervals"],
        agreement_rows(pairs),
        ["Refused candidates (not_evaluated in both runs) are left out. The rerun interval is where a run expected "
         "a rerun's point (its interval widened by sqrt 2): a point outside it is that prediction missing."],
    )  # fmt: skip
    report.table(
        "rates behind each interval (tokens/s per round, in round order)",
        ["candidate", "scenario", "run", "baseline rounds", "candidate rounds"],
        launch_rows(pairs, names),
    )
    for label, d in zip(names, data, strict=True):
        if d.evidence is not None and d.evidence.controls:
            report.table(f"A/A controls of {label}", list(CONTROL_HEADERS), control_rows(d))
    times = [f"{label} {fmt(r.seconds, '.0f', ' s')}" for label, r in zip(names, runs, strict=True)]
    report.text(f"Run times: {', '.join(times)}.")
    return agreement_targets(pairs, runs)


def run_twice(plan: str, results_dir: Path, lock: Path | None) -> list[TimedRun]:
    """The plan run with each label in turn, each under the server lock and timed."""
    runs = []
    for label in LABELS:
        argv = [sys.executable, "-m", "specselect._cli.main", "run", plan, "--label", label,
                "--results-dir", str(results_dir), "--json"]  # fmt: skip
        print(f"run:   {' '.join(argv[1:])}", flush=True)
        asked = time.monotonic()
        with server_lock(lock):
            waited = time.monotonic() - asked
            start = time.monotonic()
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
            seconds = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"specselect run {plan} --label {label} exited {done.returncode}")
        runs.append(TimedRun(results_dir / label, seconds, waited))
    return runs


def manifest_seconds(data: ReportData) -> float | None:
    """A finished run's duration from its manifest (created -> last update); None unless it completed."""
    manifest = data.manifest
    if manifest.status != "complete":
        return None
    return (datetime.fromisoformat(manifest.updated_at) - datetime.fromisoformat(manifest.created_at)).total_seconds()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plan", default="builtin:cpu-smoke")
    parser.add_argument("--results-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--analyse", type=Path, nargs=2, metavar="RESULTS", help="tabulate two existing runs")
    parser.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    clock = RunClock.start()
    print(f"machine: {machine_description()}")
    if args.dry_run:
        print(f"run:   specselect run {args.plan} --label {LABELS[0]} --json, then --label {LABELS[1]}")
        print("dry run: nothing started")
        return 0
    if args.analyse:
        data = [load_report_data(p) for p in args.analyse]
        runs = [TimedRun(Path(p), manifest_seconds(d)) for p, d in zip(args.analyse, data, strict=True)]
    else:
        results = args.results_dir or Path(tempfile.mkdtemp(prefix="bench-rerun-"))
        runs = run_twice(args.plan, results, args.server_lock)
        data = [load_report_data(r.root) for r in runs]
    report = Report()
    targets = tabulate(report, data, runs)
    if args.write_results:
        configuration = (
            plan_line(data[0]),
            f"**Results:** `{runs[0].root}` and `{runs[1].root}`"
            + ("" if not args.analyse else " (tabulated with `--analyse`: the runs were created "
               f"{data[0].manifest.created_at} and {data[1].manifest.created_at}; their times are the manifests' "
               "creation to last update)"),
        )  # fmt: skip
        record = clock.record(
            "bench_rerun",
            TITLE,
            engine_version=data[0].manifest.engine_version,
            model=data[0].manifest.target_ref,
            model_snapshot=data[0].manifest.target_snapshot,
            configuration=configuration,
            lock_wait_s=sum(r.lock_wait_s for r in runs),
            targets=tuple(targets),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
