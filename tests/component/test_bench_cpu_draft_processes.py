"""The tests of test_bench_cpu_draft that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import subprocess
import sys

from test_bench_cpu_draft import BENCH


def test_help_and_dry_run() -> None:
    script = str(BENCH / "bench_cpu_draft.py")
    done = subprocess.run(
        [sys.executable, script, "--dry-run"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "dry run: nothing started" in done.stdout
    assert "run builtin:cpu-draft --label cpu-draft --json" in done.stdout
