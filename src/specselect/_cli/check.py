"""`specselect check RESULTS_DIR|HANDOFF`: measure the hand-off's configuration and baseline again and list what
changed (exit 6 with one line per problem)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specselect._common.home import default_home
from specselect._runner.check import MAX_REPEATS, MAX_ROUNDS, CheckOptions, run_check
from specselect._runner.progress import make_progress
from specselect.errors import RegressionFound

__all__ = ["register", "run"]


def _repeats(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_REPEATS:
        raise argparse.ArgumentTypeError(f"give 1 to {MAX_REPEATS} repeats")
    return value


def _rounds(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"give 1 to {MAX_ROUNDS} rounds")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `check` command."""
    parser = subparsers.add_parser(
        "check",
        help="re-measure a hand-off's configuration and baseline briefly; exit 6 when anything changed",
        description="For CI after an engine or model upgrade: starts the recommended configuration (or "
        "--candidate) and its target-only baseline on the engine and models installed now, sends the same frozen "
        "workload items briefly, and compares identities, the speculative configuration, acceptance per draft "
        "position, speedup and parity with what the hand-off recorded. The cost is stated before any server "
        "starts; when acceptance already differs after the candidate, the baseline is not started.",
    )
    parser.add_argument("target", metavar="RESULTS_DIR|HANDOFF", type=Path, help="results/<label> or its handoff.json")
    parser.add_argument("--plan", help="the setup to measure now (default: the plan the hand-off records)")
    parser.add_argument("--candidate", help="the configuration to check (default: the hand-off's recommendation)")
    parser.add_argument("--repeats", type=_repeats, default=1, help="passes over the items per side (default: 1)")
    parser.add_argument(
        "--rounds",
        "--launches",
        dest="rounds",
        type=_rounds,
        help="paired rounds, each side launched once per round (default: the plan's [run] rounds, as the recorded "
        "interval's first look; 1 is quicker, and its speedup is then shown, not judged: one round's interval has "
        "no launch variance); --launches is the older name",
    )
    parser.add_argument(
        "--out", type=Path, help="where the check's records and check.json go (default: <label>-check next to the run)"
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="no progress output")
    out.add_argument("--json", action="store_true", help="print check.json on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check, then print OK or one line per problem (stderr) and exit 6."""
    opts = CheckOptions(
        target=args.target,
        plan_ref=args.plan,
        candidate=args.candidate,
        repeats=args.repeats,
        rounds=args.rounds,
        out_dir=args.out,
        home=default_home(),
    )
    outcome = run_check(opts, make_progress(quiet=args.quiet, json_output=args.json))
    report = outcome.report
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    elif report.ok:
        print(f"OK {report.candidate}: as recorded in {report.handoff} ({outcome.path})")
        for row in report.scenarios:
            print(f"  {row.line()}")
    if report.ok:
        return 0
    count = len(report.problems)
    print(
        f"specselect: error: {report.candidate} changed since {report.handoff}: {count} problem"
        f"{'s' if count != 1 else ''} ({outcome.path})",
        file=sys.stderr,
    )
    for problem in report.problems:
        print(problem.line(), file=sys.stderr)
    if report.stopped_early:
        print(f"note: {report.stopped_early}", file=sys.stderr)
    return RegressionFound.exit_code
