"""`specselect run [PLAN]`: the main job -- preflight, admission, every group, evidence, hand-off."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from specselect._common.home import default_home
from specselect._report import write_reports
from specselect._report.console import (
    admission_table,
    control_lines,
    decision_table,
    estimand_lines,
    groups_table,
    make_console,
    mix_closing_lines,
)
from specselect._report.sweep_tables import sweep_summary_lines
from specselect._report.trust import capacity_lines, trust_lines
from specselect._runner.progress import make_progress
from specselect._runner.run import RunOptions, RunOutcome, run_plan
from specselect.records.group import GroupResult
from specselect.records.results import EvidenceFile

__all__ = ["DEFAULT_PLAN", "register", "run", "summary_json"]

DEFAULT_PLAN = "builtin:cpu-smoke"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `run` command."""
    parser = subparsers.add_parser(
        "run",
        help="run a selection experiment (default: builtin:cpu-smoke on the bundled CPU model)",
        description="Preflight, admission, then one server per group (baseline first), measured on identical "
        "workloads; writes results/<label>/ and prints the decision table.",
    )
    parser.add_argument("plan", metavar="PLAN", nargs="?", default=DEFAULT_PLAN, help=f"default: {DEFAULT_PLAN}")
    parser.add_argument("--label", help="results label (default: the plan's label)")
    parser.add_argument("--results-dir", default="results", type=Path, help="default: ./results")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted or partly failed run")
    parser.add_argument("--dry-run", action="store_true", help="preflight + admission only; start nothing")
    parser.add_argument(
        "--verify-weights",
        action="store_true",
        help="hash every byte of large local checkpoints (default: their files and headers identify them)",
    )
    parser.add_argument(
        "--allow-changed-environment",
        action="store_true",
        help="let --resume keep groups measured under another engine version, host, device set or target "
        "snapshot (the changes are recorded in preflight.json)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="no progress output")
    out.add_argument("--json", action="store_true", help="print the final summary as JSON on stdout")
    parser.set_defaults(handler=run)


def summary_json(outcome: RunOutcome) -> dict[str, object]:
    """The final summary printed by --json: where the results are and what was decided."""
    return {
        "label": outcome.layout.root.name,
        "results_dir": str(outcome.layout.root),
        "plan_hash": outcome.loaded.plan_hash,
        "admission": [
            r.model_dump(mode="json", include={"candidate", "run_status", "reason"}) for r in outcome.admission.results
        ],
        "groups": [{"group": g.group, "run_status": g.run_status.value, "reason": g.reason} for g in outcome.groups],
        "verdicts": outcome.evidence.verdicts if outcome.evidence else {},
        "handoff": outcome.handoff.model_dump(mode="json") if outcome.handoff else None,
    }


def _print_decisions(console: Console, evidence: EvidenceFile, groups: Sequence[GroupResult]) -> None:
    console.print(decision_table(evidence, groups))
    for cand, verdict in evidence.verdicts.items():
        console.print(f"  {cand}: {verdict}")
    for line in estimand_lines(evidence):
        console.print(f"  {escape(line)}")
    for line in control_lines(evidence):
        console.print(f"  {escape(line)}")
    for line in sweep_summary_lines(evidence.sweeps):
        console.print(f"  sweep: {line}")


def run(args: argparse.Namespace) -> int:
    """Run the plan and print the tables (or JSON)."""
    progress = make_progress(quiet=args.quiet, json_output=args.json)
    opts = RunOptions(
        plan_ref=args.plan,
        results_dir=args.results_dir,
        label=args.label,
        resume=args.resume,
        dry_run=args.dry_run,
        verify_weights=args.verify_weights,
        allow_changed_environment=args.allow_changed_environment,
        home=default_home(),
        command=("specselect", *sys.argv[1:]),
    )
    outcome = run_plan(opts, progress)
    reports = None if args.dry_run else write_reports(outcome.layout.root)
    if args.json:
        doc = summary_json(outcome)
        doc["reports"] = [str(p) for p in reports] if reports else []
        print(json.dumps(doc, indent=2))
        return 0
    if args.quiet:
        return 0
    console = make_console()
    console.print(admission_table(outcome.admission))
    if args.dry_run:
        console.print("dry run: nothing was started or written")
        return 0
    console.print(groups_table(outcome.groups))
    if outcome.evidence is not None:
        _print_decisions(console, outcome.evidence, outcome.groups)
    for line in mix_closing_lines(outcome.handoff):
        console.print(f"  {escape(line)}")
    stop = outcome.manifest.sequential_stop if outcome.manifest is not None else None
    for line in trust_lines(outcome.evidence, stop):
        console.print(f"  [bold]not fully trusted[/bold]: {escape(line)}")
    for line in capacity_lines(outcome.evidence):
        console.print(f"  kv capacity: {escape(line)}")
    console.print(f"results: {outcome.layout.root}")
    if reports:
        console.print(f"report:  {reports[0]}  (Markdown: {reports[1]})")
    return 0
