"""`specselect probe [PLAN]`: preflight + admission only -- no server starts, nothing is written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specselect._common.home import default_home
from specselect._report.console import admission_table, make_console
from specselect._runner.progress import make_progress
from specselect._runner.run import probe_plan

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `probe` command."""
    parser = subparsers.add_parser(
        "probe",
        help="preflight + admission of a plan, without starting any server",
        description="Resolve the engine, target and workloads, audit the configuration and run the admission "
        "gates for every candidate. No server starts.",
    )
    parser.add_argument("plan", metavar="PLAN", nargs="?", default="builtin:cpu-smoke")
    parser.add_argument("--results-dir", default="results", type=Path)
    parser.add_argument("--json", action="store_true", help="print preflight and admission as JSON")
    parser.add_argument(
        "--verify-weights",
        action="store_true",
        help="hash every byte of large local checkpoints (default: their files and headers identify them)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Probe and print the admission table."""
    progress = make_progress(json_output=args.json)
    outcome = probe_plan(
        args.plan,
        home=default_home(),
        results_dir=args.results_dir,
        progress=progress,
        verify_weights=args.verify_weights,
    )
    if args.json:
        doc = {
            "preflight": outcome.preflight.model_dump(mode="json"),
            "admission": outcome.admission.model_dump(mode="json"),
        }
        print(json.dumps(doc, indent=2))
        return 0
    make_console().print(admission_table(outcome.admission))
    return 0
