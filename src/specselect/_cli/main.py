"""The `specselect` command: parse, dispatch to one module per command, map errors to exit codes.

Exit codes:
  0    success
  1    internal error: a bug in specselect (a traceback is printed; please report it)
  2    bad input: plan, workload file, flag, results directory, or command-line usage
  3    the engine environment or a model asset could not be set up
  4    the serving engine failed: did not start, crashed, timed out or answered nonsense
  5    a result file could not be written or verified
  6    `specselect check` found the recorded configuration changed (one line per problem)
  7    `specselect doctor` found a check that failed (one line per check)
  130  interrupted (Ctrl-C); completed work is kept
  141  the output pipe was closed (e.g. `specselect plan show ... | head`)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from specselect import __version__
from specselect.errors import SpecselectError

__all__ = ["COMMAND_MODULES", "EXIT_CODES_HELP", "build_parser", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "specselect._cli.validate",
    "specselect._cli.plan",
    "specselect._cli.workloads",
    "specselect._cli.schema",
    "specselect._cli.setup",
    "specselect._cli.fetch",
    "specselect._cli.probe",
    "specselect._cli.run",
    "specselect._cli.report",
    "specselect._cli.verify",
    "specselect._cli.check",
    "specselect._cli.doctor",
)
"""Each module defines `register(subparsers)`, which adds its sub-parser with `handler=<function(args) -> int>`."""

EXIT_CODES_HELP = "exit codes:\n" + (__doc__ or "").split("Exit codes:\n", 1)[1].rstrip()
"""The exit-code table of this module's docstring, shown as the epilog of `specselect --help`."""

_PREFIX = "specselect: error: "


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="specselect",
        description="Choose the speculative-decoding mechanism for an LLM deployment from measured evidence.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"specselect {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _report(error: SpecselectError) -> None:
    print(_PREFIX + error.one_line(), file=sys.stderr)
    for problem in getattr(error, "problems", ()):
        print(problem, file=sys.stderr)


def _closed_pipe() -> int:
    # Python would complain again while flushing stdout at exit; point it at /dev/null instead.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (see the table in this module's docstring)."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version and usage errors (argparse uses 2 for those)
            return _exit_status(exc.code)
        status = args.handler(args)
        sys.stdout.flush()
        return int(status)
    except SpecselectError as exc:
        _report(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        print("specselect: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception:
        traceback.print_exc()
        print(
            "specselect: internal error: this is a bug in specselect; please report it with the traceback above",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
