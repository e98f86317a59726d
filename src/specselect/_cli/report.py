"""`specselect report RESULTS_DIR`: render report.html + report.md from a run's result files (no measuring)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specselect._report.console import (
    admission_table,
    decision_table,
    estimand_lines,
    groups_table,
    make_console,
    mix_closing_lines,
)
from specselect._report.data import load_report_data
from specselect._report.write import write_report_data

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `report` command."""
    parser = subparsers.add_parser(
        "report",
        help="write report.html and report.md for a results directory",
        description="Read results/<label>/ (never re-measures) and write a self-contained report.html (tables and "
        "plots, works offline) and report.md (decision table for a pull request or ticket); prints the tables.",
    )
    parser.add_argument("results", metavar="RESULTS_DIR", type=Path, help="a run's directory, e.g. results/smoke")
    parser.add_argument("--out", type=Path, help="write the reports here instead of into RESULTS_DIR")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="print nothing")
    out.add_argument("--json", action="store_true", help="print the written paths as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, render, write; a ResultsError (missing, foreign, other schema) propagates as exit 2."""
    data = load_report_data(args.results)
    html_path, md_path = write_report_data(data, args.out)
    if args.json:
        print(json.dumps({"html": str(html_path), "markdown": str(md_path), "notes": list(data.notes)}, indent=2))
        return 0
    if args.quiet:
        return 0
    console = make_console()
    if data.admission is not None:
        console.print(admission_table(data.admission))
    console.print(groups_table(data.groups))
    if data.evidence is not None:
        console.print(decision_table(data.evidence, data.groups))
        for cand, verdict in data.evidence.verdicts.items():
            console.print(f"  {cand}: {verdict}", markup=False, highlight=False)
        for line in estimand_lines(data.evidence):
            console.print(f"  {line}", markup=False, highlight=False)
    for line in mix_closing_lines(data.handoff):
        console.print(f"  {line}", markup=False, highlight=False)
    for note in data.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    console.print(f"wrote {html_path}", markup=False, highlight=False)
    console.print(f"wrote {md_path}", markup=False, highlight=False)
    return 0
