"""Selection at temperature 0 and 0.7 on the real CPU vLLM: `specselect run builtin:cpu-sampled`, tabulated.

1. `specselect run builtin:cpu-sampled --json` under the server lock, timed: n-gram and an A/A control against
   the SmolLM2-135M target-only baseline, every workload (the copy task and chat prompts) at temperature 0 and 0.7.
2. From the results, per candidate, workload and temperature: THE speedup with its interval, acceptance (the
   engine's counters), how quality was judged (exact parity at 0: outputs equal; above 0 the distribution test:
   its verdict and smallest family-wise adjusted p-value) and the decision.

`--write-results benchmarks/RESULTS.md` writes that file's section 10 through the shared section writer
(`_common.publish`) and saves the run's record to `benchmarks/figures/bench_cpu_sampled.json`; `--analyse DIR`
tabulates an existing results directory instead of running.

    .venv/bin/python benchmarks/bench_cpu_sampled.py --server-lock /tmp/specselect-vllm.lock \\
        --write-results benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from _common import Report, RunClock, TargetCheck, add_results_arguments, machine_description, publish, server_lock
from bench_selection_cost import Timed, plan_line
from specselect._report.console import fmt_interval
from specselect._report.data import ReportData, load_report_data
from specselect.records.evidence.result import ScenarioEvidence

PLAN = "builtin:cpu-sampled"
TITLE = "Selection at temperature 0 and 0.7 on the real engine: `builtin:cpu-sampled`"


def _quality(e: ScenarioEvidence) -> str:
    """Exact parity's count at temperature 0; the distribution test's verdict and smallest adjusted p above."""
    test = e.sampled_parity
    if test is not None:
        smallest = min((s.adjusted_p_value for s in test.statistics), default=None)
        shown = f", min adj. p {smallest:.3f}" if smallest is not None else ""
        return f"distribution: {test.verdict}{shown}"
    if e.parity is not None:
        return f"exact: {e.parity.n_equal}/{e.parity.n_compared} equal"
    return "-"


def temperature_rows(data: ReportData) -> list[list[str]]:
    """One row per candidate (A/A control included), workload and temperature, lowest temperature first."""
    evidence = data.evidence
    if evidence is None:
        return []
    entries = sorted((*evidence.entries, *evidence.controls), key=lambda e: (e.candidate, e.workload, e.temperature))
    rows = []
    for e in entries:
        s, telemetry = e.speedup, e.telemetry
        rate = telemetry.acceptance_rate if telemetry is not None else None
        rows.append(
            [
                e.candidate,
                e.workload,
                f"{e.temperature:g}",
                fmt_interval(s.point, s.low, s.high, s.level) if s is not None else "-",
                "-" if rate is None else f"{rate:.2f}",
                _quality(e),
                f"{e.decision.decision.value} ({e.decision.reason})",
            ]
        )
    return rows


def control_target(data: ReportData) -> TargetCheck:
    """The A/A control passes the distribution test wherever it is sampled (a fail is the 5 % it allows)."""
    tests = [e.sampled_parity for e in (data.evidence.controls if data.evidence else ()) if e.sampled_parity]
    passed = sum(t.verdict == "pass" for t in tests)
    return TargetCheck(
        target="A/A control passes the distribution test at T 0.7 (each test allows 5 % false alarms)",
        result=f"{passed}/{len(tests)} passed",
        met=bool(tests) and passed == len(tests),
    )


def verdict_target(data: ReportData) -> TargetCheck:
    """Every candidate x workload x temperature gets a quality verdict from what the run measured."""
    entries = data.evidence.entries if data.evidence else ()
    judged = [e for e in entries if _quality(e) != "-" and "not_assessed" not in _quality(e)]
    temperatures = sorted({e.temperature for e in entries})
    return TargetCheck(
        target="n-gram judged at T 0 (exact parity) and T 0.7 (distribution test) on both workloads",
        result=f"{len(judged)}/{len(entries)} judged at T {', '.join(f'{t:g}' for t in temperatures)}",
        met=bool(entries) and len(judged) == len(entries) and len(temperatures) >= 2,
    )


def tabulate(report: Report, root: Path, timed: Timed | None) -> list[TargetCheck]:
    """The section's table and the targets it checks."""
    data = load_report_data(root)
    report.table(
        "per candidate, workload and temperature (concurrency 1; speedups with their intervals' levels)",
        ["candidate", "workload", "T", "throughput speedup", "acceptance", "quality", "decision (reason)"],
        temperature_rows(data),
    )
    if timed is not None:
        report.text(f"`specselect run {PLAN}` took {timed.run_s:.0f} s ({timed.run_s / 60:.1f} min).")
    return [verdict_target(data), control_target(data)]


def _run(results: Path, lock: Path | None) -> Timed:
    cmd = [sys.executable, "-m", "specselect._cli.main", "run", PLAN, "--results-dir", str(results), "--json"]
    print(f"run: {' '.join(cmd)}", flush=True)
    asked = datetime.now(UTC)
    with server_lock(lock):
        print(f"load before run: {machine_description()}", flush=True)
        start = datetime.now(UTC)
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        end = datetime.now(UTC)
    (results / "bench-stderr.log").write_text(done.stderr)
    if done.returncode:
        raise SystemExit(f"specselect run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    root = Path(json.loads(done.stdout)["results_dir"])
    return Timed(None, start, end, root, lock_wait_s=(start - asked).total_seconds())


def _arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--analyse", type=Path, help="only tabulate this existing results/<label> directory")
    add_results_arguments(parser)
    return parser.parse_args(argv)


def main() -> int:
    args = _arguments()
    clock = RunClock.start()
    print(f"machine: {machine_description()}", flush=True)
    report = Report()
    timed: Timed | None = None
    if args.analyse:
        root = args.analyse
    else:
        timed = _run(args.results_dir or Path(tempfile.mkdtemp(prefix="bench-sampled-")), args.server_lock)
        root = timed.root
    targets = tabulate(report, root, timed)
    if args.write_results:
        data = load_report_data(root)
        manifest = data.manifest
        record = clock.record(
            "bench_cpu_sampled",
            TITLE,
            configuration=(plan_line(data), f"**Engine:** {manifest.engine_kind} {manifest.engine_version}."),
            engine_version=manifest.engine_version,
            model=manifest.target_ref,
            model_snapshot=manifest.target_snapshot,
            figures={"run_s": timed.run_s if timed else None},
            targets=tuple(targets),
            lock_wait_s=timed.lock_wait_s if timed else 0.0,
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
