"""Every function of the package can be read at once: at most 60 lines and 8 parameters (ruff checks branches,
returns, statements and complexity; it has no rule for length).

An exception is listed here with the reason it reads better whole; a new one needs a reason too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import specselect

MAX_LINES = 60
MAX_PARAMETERS = 8

EXCEPTIONS: dict[str, str] = {}
"""`path:function` -> why it stays longer or wider than the limits."""

PACKAGE = Path(specselect.__file__).parent


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - 1 if names and names[0].arg in ("self", "cls") else count


def _functions() -> list[tuple[str, int, int]]:
    """(`path:function`, lines, parameters) of every function and method in the package."""
    found: list[tuple[str, int, int]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{path.relative_to(PACKAGE)}:{node.name}"
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((name, lines, _parameters(node)))
    return found


def test_no_function_is_longer_than_60_lines_or_takes_more_than_8_parameters() -> None:
    too_big = [
        f"{name}: {lines} lines, {params} parameters"
        for name, lines, params in _functions()
        if (lines > MAX_LINES or params > MAX_PARAMETERS) and name not in EXCEPTIONS
    ]
    assert too_big == []


def test_every_listed_exception_still_needs_its_exception() -> None:
    sizes = {name: (lines, params) for name, lines, params in _functions()}
    stale = [
        name
        for name in EXCEPTIONS
        if name not in sizes or (sizes[name][0] <= MAX_LINES and sizes[name][1] <= MAX_PARAMETERS)
    ]
    assert stale == []


def test_the_scan_sees_the_package() -> None:
    names = {name for name, _, _ in _functions()}
    assert "_core/decision.py:decide" in names and len(names) > 500
