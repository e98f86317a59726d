"""`specselect plan list` and `specselect plan show builtin:NAME`: the built-in plans, ready to copy."""

from __future__ import annotations

import argparse
import sys

from specselect._plan import BUILTIN_PREFIX, builtin_plan_names, builtin_plan_text, load_plan
from specselect.errors import UsageError

__all__ = ["register", "run_list", "run_show"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `plan` command with its `list` and `show` sub-commands."""
    parser = subparsers.add_parser(
        "plan", help="list or print the built-in plans", description="The built-in plans, ready to copy and edit."
    )
    actions = parser.add_subparsers(dest="plan_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the built-in plans", description="List the built-in plans.")
    listing.set_defaults(handler=run_list)
    show = actions.add_parser(
        "show",
        help="print a built-in plan's TOML",
        description="Print a built-in plan's TOML verbatim, e.g. `specselect plan show builtin:cpu-smoke > my.toml`.",
    )
    show.add_argument("name", metavar="builtin:NAME", help="a built-in plan (see `specselect plan list`)")
    show.set_defaults(handler=run_show)


def run_list(args: argparse.Namespace) -> int:
    """Print one line per built-in plan: its reference and description."""
    names = builtin_plan_names()
    width = max((len(BUILTIN_PREFIX + name) for name in names), default=0)
    for name in names:
        description = load_plan(BUILTIN_PREFIX + name, check_files=False).plan.description
        print(f"{BUILTIN_PREFIX + name:<{width}}  {description}".rstrip())
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print the TOML of `args.name` exactly as shipped."""
    name: str = args.name
    if not name.startswith(BUILTIN_PREFIX) and ("/" in name or name.endswith(".toml")):
        raise UsageError(
            "`plan show` prints built-in plans only",
            location=name,
            fix="open your own plan in an editor; `specselect plan list` lists the built-in ones",
        )
    sys.stdout.write(builtin_plan_text(name))
    return 0
