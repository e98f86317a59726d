"""`specselect workloads [builtin:NAME]`: the built-in workloads, and where each public prompt set comes from."""

from __future__ import annotations

import argparse

from specselect._common.home import default_home
from specselect._workloads.builtin import BUILTIN_PREFIX, closest_builtin
from specselect._workloads.catalog import builtin_catalog, catalog_lines, entry_details
from specselect.errors import UsageError

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `workloads` command."""
    parser = subparsers.add_parser(
        "workloads",
        help="list the built-in workloads with their provenance",
        description="List the built-in workloads (use them in a plan as builtin:NAME, or sample one: "
        'code = { source = "builtin:humaneval", items = 24, seed = 0 }); with NAME, print everything recorded '
        "about one: package, file and sha256, licences, conversion.",
    )
    parser.add_argument("name", metavar="builtin:NAME", nargs="?", help="one built-in workload")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the catalogue, or the details of `args.name`."""
    if args.name is None:
        print("\n".join(catalog_lines()))
        return 0
    bare = args.name.removeprefix(BUILTIN_PREFIX).strip().lower().replace("-", "_")
    entries = {entry.name: entry for entry in builtin_catalog()}
    if bare not in entries:
        close = closest_builtin(bare)
        hint = f"; did you mean {BUILTIN_PREFIX}{close}?" if close else ""
        raise UsageError(
            f"no built-in workload {args.name[:60]!r}{hint}",
            location="specselect workloads",
            fix="run `specselect workloads` for the list",
        )
    print("\n".join(entry_details(entries[bare], default_home())))
    return 0
