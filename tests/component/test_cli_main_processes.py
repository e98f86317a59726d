"""The tests of test_cli_main that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_console_script_in_a_subprocess(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\nlabel = "bad label"\n', encoding="utf-8")
    cmd = [sys.executable, "-m", "specselect._cli.main"]
    ok = subprocess.run(
        [*cmd, "validate", "builtin:cpu-smoke"], check=False, capture_output=True, text=True, timeout=120
    )
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.startswith("OK builtin:cpu-smoke: ")
    failed = subprocess.run([*cmd, "validate", str(bad)], check=False, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2
    assert failed.stdout == ""
    assert "Traceback" not in failed.stderr
    lines = failed.stderr.splitlines()
    assert lines[0] == f"specselect: error: {bad}: plan does not validate (4 problems)"
    assert lines[1:] == [
        f"{bad}: label: 'bad label' may contain only letters, digits, '.', '_' and '-' "
        "(fix: use 1 to 100 letters, digits, '.', '_' or '-')",
        f'{bad}: target: missing required table (fix: add [target] with model = "builtin:smollm2-135m")',
        f'{bad}: engine: missing required table (fix: add [engine] with python = "managed:vllm-cpu")',
        f'{bad}: workloads: missing required table (fix: add [workloads] with general = "builtin:general")',
    ]
