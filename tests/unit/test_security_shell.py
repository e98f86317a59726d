"""No shell is ever built from plan values: commands are argument lists, so shell syntax in a plan is inert."""

from __future__ import annotations

import ast
from pathlib import Path

import specselect

SRC = Path(specselect.__file__).parent
_SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output"}
_SHELL_FUNCTIONS = {
    ("os", "system"),
    ("os", "popen"),
    ("subprocess", "getoutput"),
    ("subprocess", "getstatusoutput"),
    ("asyncio", "create_subprocess_shell"),
}


def _dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _is_built_string(node: ast.expr) -> bool:
    """A command given as one string: a literal, an f-string, `+`/`%` on strings or `" ".join(...)`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.JoinedStr | ast.BinOp):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in {"join", "format"}


def _shell_uses(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name[-2:] in _SHELL_FUNCTIONS:
            found.append((node.lineno, ".".join(name)))
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append((node.lineno, "shell=..."))
        if name and name[-1] in _SUBPROCESS_CALLS and node.args and _is_built_string(node.args[0]):
            found.append((node.lineno, f"{'.'.join(name)} with a command string"))
    return found


def test_no_module_starts_a_shell_or_a_command_string() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for line, what in _shell_uses(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(SRC)}:{line}: {what}")
    assert offenders == []


def test_the_scanner_catches_shell_forms() -> None:
    code = (
        "import os, subprocess\nos.system('x')\nsubprocess.run('ls -l', shell=True)\n"
        "subprocess.Popen(' '.join(argv))\nsubprocess.check_output(f'ls {x}')\n"
    )
    assert [what for _, what in _shell_uses(ast.parse(code))] == [
        "os.system",
        "shell=...",
        "subprocess.run with a command string",
        "subprocess.Popen with a command string",
        "subprocess.check_output with a command string",
    ]
