"""`specselect doctor [PLAN]`: is this host ready to run the plan? One screen of checks; exit 0 ready, 7 not."""

from __future__ import annotations

import argparse
import json

from specselect._assets.hub_access import DEFAULT_TIMEOUT_S
from specselect._common.home import default_home
from specselect._runner.doctor import run_doctor
from specselect.errors import UsageError
from specselect.records.doctor import DoctorReport

__all__ = ["PROBLEMS_FOUND", "register", "render", "run"]

PROBLEMS_FOUND = 7
"""The exit code when a check failed (warnings alone exit 0); 1 stays a bug's, as for every command."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `doctor` command."""
    parser = subparsers.add_parser(
        "doctor",
        help="check this host before a run: GPUs, engine, hub access, disk, host load",
        description="Check, in one screen, what a run needs from this host: the driver and the devices with their "
        "free memory and the processes on them, the engine's version and speculative methods, the plan's "
        "configuration audit, hub access and the token when the plan needs a download, disk space for the models "
        "and the host's load. Installs, downloads and starts nothing. Exit 0 when no check failed (warnings "
        "included), 7 when one did, 2 for a bad plan or flag.",
    )
    parser.add_argument("plan", metavar="PLAN", nargs="?", default=None, help="a plan file or builtin:NAME")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--sample-s", type=float, default=1.0, help="seconds of host-load sample (default 1)")
    parser.add_argument(
        "--hub-timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for the hub (default 5)"
    )
    parser.set_defaults(handler=run)


_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def render(report: DoctorReport) -> str:
    """The report as the terminal shows it: one line per check, its facts and fix indented under it."""
    lines = [f"specselect doctor{f' {report.plan}' if report.plan else ''}"]
    for check in report.checks:
        lines.append(f"  {_MARK[check.status]}  {check.name:<9}  {check.reason}")
        lines.extend(f"              {detail}" for detail in check.details)
        if check.fix and check.status != "ok":
            lines.append(f"              fix: {check.fix}")
    lines.append(f"verdict: {report.verdict}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run every check and print them (or the JSON report)."""
    for flag, value in (("--sample-s", args.sample_s), ("--hub-timeout-s", args.hub_timeout_s)):
        if not 0 < value <= 60:
            raise UsageError(f"{flag} {value:g} is out of range", location=flag, fix="give a number in (0, 60]")
    report = run_doctor(args.plan, home=default_home(), sample_s=args.sample_s, hub_timeout_s=args.hub_timeout_s)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else render(report))
    return PROBLEMS_FOUND if report.status == "fail" else 0
