"""`specselect verify RESULTS_DIR`: check every artifact of a run against its schema and the manifest's hashes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specselect._artifacts.verify import VerifyReport, verify_run
from specselect.errors import ArtifactError

__all__ = ["register", "run", "summary_line"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `verify` command."""
    parser = subparsers.add_parser(
        "verify",
        help="check a run's result files against their schemas and the manifest's hashes",
        description="Validate every result document of results/<label>, the sha256 of every file the manifest "
        "and the group summaries record, and every raw-records line. Exit 0 with a summary; exit 5 with one "
        "line per damaged file; exit 2 when the directory is not a specselect run.",
    )
    parser.add_argument("results", metavar="RESULTS_DIR", type=Path, help="results/<label> of a run")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON on stdout")
    parser.set_defaults(handler=run)


def summary_line(report: VerifyReport) -> str:
    """One line: what was checked and whether it is intact."""
    checked = (
        f"{report.documents} documents, {report.hashed_files} hashed files, "
        f"{report.record_files} records files ({report.records} records)"
    )
    if report.ok:
        return f"OK {report.root}: run {report.label!r} ({report.run_status}): {checked} intact"
    count = len(report.problems)
    return f"{report.root}: {count} problem{'s' if count != 1 else ''} found ({checked} intact)"


def run(args: argparse.Namespace) -> int:
    """Verify and print the summary (stdout) or the problems (stderr, one per line)."""
    report = verify_run(args.results)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    elif report.ok:
        print(summary_line(report))
    if not args.json:
        for note in report.notes:
            print(f"note: {note}", file=sys.stderr)
    if report.ok:
        return 0
    print(f"specselect: error: {summary_line(report)}", file=sys.stderr)
    for problem in report.problems:
        print(problem, file=sys.stderr)
    return ArtifactError.exit_code
