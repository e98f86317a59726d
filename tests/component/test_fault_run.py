"""The fault matrix against the stand-in engine (fast; the same faults against real vLLM: tests/integration).

Each test leaves no server process and no taken port behind (checked by the `fake_run` fixture).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_fault_harness import (  # noqa: F401  (fixtures)
    FakeRun,
    assert_no_orphans,
    fake_engine_processes,
    fake_run_fixture,
    fake_vllm_fixture,
    ngram,
    wait_for_line,
)

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect.records.group import GroupResult
from specselect.records.results import Manifest

LABEL = "faults"


def _layout(run: FakeRun) -> RunLayout:
    return RunLayout(run.results / LABEL)


def _group(run: FakeRun, name: str) -> GroupResult:
    return load_document(_layout(run).group_summary(name), GroupResult)


def _manifest(run: FakeRun) -> Manifest:
    return load_document(_layout(run).manifest, Manifest)


def _statuses(run: FakeRun) -> dict[str, tuple[str, str]]:
    return {g.name: (g.run_status.value, g.reason) for g in _manifest(run).groups}


def _every_json_parses(root: Path) -> None:
    for path in root.rglob("*.json"):
        if "work" not in path.relative_to(root).parts:
            json.loads(path.read_text(encoding="utf-8"))
    leftovers = [p for p in root.rglob(".*.tmp") if "work" not in p.relative_to(root).parts]
    assert not leftovers, leftovers


def test_engine_killed_mid_scenario_fails_that_group_and_keeps_everything_else(fake_run: FakeRun) -> None:
    # Two scenarios per group (concurrency 1, then 2): g2's engine dies once two requests are in flight.
    crash = ("--fake-crash-when-concurrent", "2", "--fake-token-delay", "0.02")
    fake_run.plan(
        candidates=[ngram("g1_ngram"), ngram("g2_crash", *crash), ngram("g3_ngram")],
        # g2's slow tokens lose at concurrency 1: without early_stop = false its concurrency 2 would be skipped.
        run={"concurrency": [1, 2], "early_stop": False},
    )
    done = fake_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _statuses(fake_run) == {
        "g0_target_only": ("completed", "measured"),
        "g1_ngram": ("completed", "measured"),
        "g2_crash": ("failed", "server_crashed"),
        "g3_ngram": ("completed", "measured"),
    }
    crashed = _group(fake_run, "g2_crash")
    assert crashed.log_tail and "crashing with 2 requests in flight" in crashed.log_tail
    assert crashed.hint and "exited with code -9" in crashed.hint
    assert crashed.release is not None and crashed.release.processes_gone and crashed.release.port_free
    # The scenario measured before the crash is kept, with its records file intact.
    assert [(s.scenario, s.status) for s in crashed.scenarios] == [("w-c1", "completed")]
    assert (_layout(fake_run).root / "records" / "g2_crash" / "w-c1.jsonl").is_file()
    report = verify_run(_layout(fake_run).root)
    assert report.ok, report.problems
    assert report.record_files >= 7  # 3 measured groups x 2 scenarios + the crashed group's first one

    before = {g: _group(fake_run, g).finished_at for g in ("g0_target_only", "g1_ngram", "g2_crash", "g3_ngram")}
    again = fake_run.call("run", "plan.toml", "--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("kept from the earlier run") == 4
    assert {g: _group(fake_run, g).finished_at for g in before} == before
    assert verify_run(_layout(fake_run).root).ok


def test_engine_that_hangs_hits_request_and_scenario_timeouts_and_is_stopped(fake_run: FakeRun) -> None:
    # After the warm-up every streamed request hangs: the first measured one reaches its 2 s request
    # time-out, the next is cancelled by the 3 s scenario time-out (6 requests x 2 s would take 12 s).
    fake_run.plan(
        candidates=[ngram("g1_hang", "--fake-hang-after", "1"), ngram("g2_ngram")],
        run={"request_timeout_s": 2.0, "scenario_timeout_s": 3.0},
    )
    started = time.monotonic()
    done = fake_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 30
    assert _statuses(fake_run)["g1_hang"] == ("failed", "server_timeout")
    assert _statuses(fake_run)["g2_ngram"] == ("completed", "measured")
    hung = _group(fake_run, "g1_hang")
    assert hung.hint and "every request of scenario w-c1 failed (first: request_timeout" in hung.hint
    assert hung.log_tail and "hanging on streamed request 2" in hung.log_tail
    assert hung.release is not None and hung.release.processes_gone and hung.release.port_free
    assert verify_run(_layout(fake_run).root).ok


def test_engine_that_never_becomes_ready_hits_the_startup_timeout(fake_run: FakeRun) -> None:
    fake_run.plan(candidates=[ngram("g1_never", "--fake-never-ready")], engine={"startup_timeout_s": 3.0})
    done = fake_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _statuses(fake_run)["g1_never"] == ("failed", "server_timeout")
    never = _group(fake_run, "g1_never")
    assert never.hint and "did not become ready within 3 s" in never.hint
    assert never.log_tail and "fake engine listening" in never.log_tail
    assert never.launch is None and never.release is not None and never.release.processes_gone


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_the_server_keeps_a_consistent_manifest_and_resume_finishes(
    fake_run: FakeRun, sig: signal.Signals
) -> None:
    fake_run.plan(candidates=[ngram("g1_slow", "--fake-token-delay", "0.04"), ngram("g2_ngram")])
    proc = fake_run.start("run", "plan.toml")
    try:
        wait_for_line(proc, r"== group g1_slow")
        wait_for_line(proc, r"w-c1: 6 measured requests")
        assert fake_engine_processes(fake_run.python.parents[1])
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted during group g1_slow" in err and "--resume" in err and "Traceback" not in err
    assert_no_orphans(fake_run.python.parents[1], fake_run.results)
    manifest = _manifest(fake_run)
    assert manifest.status == "interrupted"
    assert _statuses(fake_run) == {
        "g0_target_only": ("completed", "measured"),
        "g1_slow": ("failed", "interrupted"),
        "g2_ngram": ("runnable", "pending"),
    }
    slow = _group(fake_run, "g1_slow")
    assert slow.release is not None and slow.release.processes_gone
    report = verify_run(_layout(fake_run).root)
    assert report.ok, report.problems
    baseline_done = _group(fake_run, "g0_target_only").finished_at

    again = fake_run.call("run", "plan.toml", "--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "g0_target_only: kept from the earlier run" in again.stderr
    assert _group(fake_run, "g0_target_only").finished_at == baseline_done
    assert _manifest(fake_run).status == "complete"
    assert {name: status for name, (status, _) in _statuses(fake_run).items()} == {
        "g0_target_only": "completed",
        "g1_slow": "completed",
        "g2_ngram": "completed",
    }
    assert verify_run(_layout(fake_run).root).ok


@contextmanager
def _tmpfs(path: Path, *, size: str, readonly: bool) -> Iterator[None]:
    """A small tmpfs at `path` (read-only if asked) for the duration; skips the test without mount rights."""
    path.mkdir()
    options = f"size={size}" + (",ro" if readonly else "")
    argv = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)]
    mounted = subprocess.run(argv, capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (test_fault_disk.py covers this in-process)")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.parametrize(
    ("size", "readonly", "code"),
    [("64m", True, "results_not_writable"), ("1m", False, "disk_full")],
    ids=["read-only", "full"],
)
def test_results_disk_read_only_or_full_is_refused_before_anything_starts(
    fake_run: FakeRun, size: str, readonly: bool, code: str
) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    with _tmpfs(fake_run.results, size=size, readonly=readonly):
        done = fake_run.call("run", "plan.toml")
        assert done.returncode == 2, done.stderr[-3000:]
        assert "configuration audit failed; nothing was started" in done.stderr
        assert f"{code}: results" in done.stderr and "Traceback" not in done.stderr
        assert not list(fake_run.results.iterdir())
    assert not (fake_run.results / LABEL).exists()
