"""`specselect validate PLAN`: check a plan file (or builtin:NAME) and print its hash."""

from __future__ import annotations

import argparse

from specselect._runner.cost import plan_cost_lines
from specselect._runner.preflight import distribution_test_cost, validate_plan

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `validate` command."""
    parser = subparsers.add_parser(
        "validate",
        help="check a plan and print its hash and what it will cost",
        description="Validate a plan without running anything. Exit 0 with an OK line and the estimated "
        "cost (server starts, GPU- or CPU-hours, disk for models to fetch), or exit 2 with one line per problem.",
    )
    parser.add_argument("plan", metavar="PLAN", help="a plan file (.toml) or builtin:NAME")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate `args.plan` (and what its engine can tell without a probe); errors go to the CLI's handler."""
    loaded = validate_plan(args.plan)
    plan = loaded.plan
    candidates = sum(not g.is_baseline for g in plan.groups)
    baselines = len(plan.groups) - candidates  # tracks and blocks each have their own
    print(
        f"OK {loaded.source}: plan {plan.label!r} is valid: "
        f"{'baseline' if baselines == 1 else f'{baselines} baselines'} + {candidates} "
        f"candidate{'s' if candidates != 1 else ''}, {len(plan.workloads)} "
        f"workload{'s' if len(plan.workloads) != 1 else ''}, plan_hash {loaded.plan_hash}"
    )
    if plan.sampling.sampled:
        print(distribution_test_cost(plan))
    for line in plan_cost_lines(loaded):
        print(line)
    return 0
