"""No vLLM server outlives the `specselect run` that started it, however that run dies (real CPU vLLM).

One run, killed twice (each kill costs a server start, ~50 s here, so both ways of dying share the run):
1. SIGKILL of specselect while the baseline's server is measuring: the supervisor sees its pipe close and stops
   the server's process group; within 15 s nothing of that run is alive.
2. The `--resume` that follows is itself killed, specselect AND its supervisor, while its server is stopped
   (SIGSTOP, so even its parent-death signal waits): the server outlives both; the next `--resume` finds it
   through the launch's record, says so, stops it before it starts anything, and completes; `verify` passes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from _reduced_plan import (
    copy_code_item,
    copy_list_item,
    reduced_plan,
    specselect,
    start_specselect,
    write_workload,
)

from specselect._engines.serverrecords import ServerRecord

pytestmark = pytest.mark.integration

# The baseline alone: each test starts one server before the kill and one in its --resume.
PLAN = reduced_plan(
    label="killed", max_tokens=48, workload="copy", workload_file="copy.jsonl", refused=False, ngram=False
)
"""The baseline alone; 48 tokens keep it measuring long enough for the kills to land mid-scenario."""

_GONE_WITHIN_S = 15.0


def _servers_of(root: Path) -> list[psutil.Process]:
    """Processes of this test's run: vLLM servers and their workers, whose cwd is a work dir under `root`."""
    found = []
    for proc in psutil.process_iter(["cwd", "status"]):
        if str(root) in (proc.info.get("cwd") or "") and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _start_run(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    write_workload(tmp_path / "copy.jsonl", [copy_list_item(), copy_code_item("def f(x):\n    return x * 2\n")])
    (tmp_path / "plan.toml").write_text(PLAN)
    return start_specselect("run", "plan.toml", "--results-dir", "results", *args, cwd=tmp_path)


def _wait_until_measuring(proc: subprocess.Popen[str], log: Path, timeout_s: float = 420.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if "ready in" in log.read_text():
            time.sleep(3.0)  # sanity request, then the warm-up and the measured requests are under way
            return
        time.sleep(1.0)
    pytest.fail(f"the baseline's server never became ready: {log.read_text()[-3000:]}")


def _records(tmp_path: Path) -> list[ServerRecord]:
    work = tmp_path / "results" / "killed" / "work"
    return [ServerRecord.model_validate_json(p.read_text()) for p in sorted(work.glob("*/server-*.json"))]


def _resume_and_verify(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    resumed = specselect("run", "plan.toml", "--results-dir", "results", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert _servers_of(tmp_path) == []
    verified = specselect("verify", "results/killed", "--json", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    assert json.loads(verified.stdout)["problems"] == []
    return resumed


def _sigkill_while_measuring(tmp_path: Path) -> None:
    proc, log = _start_run(tmp_path)
    _wait_until_measuring(proc, log)
    running = _servers_of(tmp_path)
    assert running, "no server of this run was found while it measured"
    assert [r.name for r in _records(tmp_path)] == ["vLLM server for g0_target_only"]

    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.monotonic()
    _, alive = psutil.wait_procs(running, timeout=_GONE_WITHIN_S)
    gone_after = time.monotonic() - killed_at
    assert alive == [], f"still alive {gone_after:.1f} s after specselect died: {[p.pid for p in alive]}"
    assert _servers_of(tmp_path) == []
    server_log = (tmp_path / "results" / "killed" / "logs" / "g0_target_only.log").read_text()
    assert "specselect is gone" in server_log


def _orphan_a_stopped_server(tmp_path: Path) -> list[psutil.Process]:
    """Resume, and while its server measures stop the server and SIGKILL specselect and the supervisor."""
    proc, log = _start_run(tmp_path, "--resume")
    _wait_until_measuring(proc, log)
    assert "still running" not in log.read_text()  # the supervisor had stopped the first kill's server already
    (record,) = _records(tmp_path)  # the first kill's record was found stale and removed
    (server,) = psutil.Process(record.leader.pid).children()
    workers = [server, *server.children(recursive=True)]
    for worker in workers:
        worker.suspend()  # stopped: neither its parent-death signal nor the supervisor's TERM can act
    proc.send_signal(signal.SIGKILL)
    os.kill(record.leader.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(2.0)
    assert all(w.is_running() and w.status() == psutil.STATUS_STOPPED for w in workers)
    return workers


def test_no_server_outlives_specselect_however_it_dies(tmp_path: Path) -> None:
    _sigkill_while_measuring(tmp_path)
    workers = _orphan_a_stopped_server(tmp_path)

    resumed = _resume_and_verify(tmp_path)
    assert "of an earlier attempt still running" in resumed.stderr
    assert "stopping them before anything starts" in resumed.stderr
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert _records(tmp_path) == []  # every launch of the resumed run was torn down and forgotten
