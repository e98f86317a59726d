"""Engines listen on 127.0.0.1 unless the plan explicitly allows another address; either way it is recorded."""

from __future__ import annotations

import json

import psutil
from test_fault_harness import (  # noqa: F401
    FakeRun,
    fake_engine_processes,
    fake_run_fixture,
    fake_vllm_fixture,
    wait_for_line,
)

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect.records.group import GroupResult
from specselect.records.results import Manifest


def _listening_addresses(run: FakeRun) -> set[str]:
    addresses: set[str] = set()
    for proc in fake_engine_processes(run.python.parents[1]):
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                addresses.add(conn.laddr.ip)
    return addresses


def test_default_bind_is_loopback_and_recorded(fake_run: FakeRun) -> None:
    fake_run.plan(engine={"args": ["--fake-token-delay", "0.03"]})
    proc = fake_run.start("run", "plan.toml")
    try:
        wait_for_line(proc, r"w-c1: 6 measured requests")
        assert _listening_addresses(fake_run) == {"127.0.0.1"}
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    layout = RunLayout(fake_run.results / "faults")
    manifest = load_document(layout.manifest, Manifest)
    assert manifest.plan["engine"]["host"] == "127.0.0.1" and manifest.plan["engine"]["allow_remote_bind"] is False
    launch = load_document(layout.group_summary("g0_target_only"), GroupResult).launch
    assert launch is not None and launch.base_url.startswith("http://127.0.0.1:")
    assert launch.command[launch.command.index("--host") + 1] == "127.0.0.1"


def test_another_address_without_the_explicit_setting_is_refused(fake_run: FakeRun) -> None:
    fake_run.plan(engine={"host": "0.0.0.0"})
    done = fake_run.call("validate", "plan.toml")
    assert done.returncode == 2
    assert "engine.host" in done.stderr and "allow_remote_bind = true" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_allowed_remote_bind_is_recorded(fake_run: FakeRun) -> None:
    fake_run.plan(engine={"host": "0.0.0.0", "allow_remote_bind": True})
    done = fake_run.call("run", "plan.toml", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    layout = RunLayout(fake_run.results / "faults")
    manifest = load_document(layout.manifest, Manifest)
    assert manifest.plan["engine"]["host"] == "0.0.0.0" and manifest.plan["engine"]["allow_remote_bind"] is True
    launch = load_document(layout.group_summary("g0_target_only"), GroupResult).launch
    assert launch is not None and launch.command[launch.command.index("--host") + 1] == "0.0.0.0"
    assert json.loads((layout.root / "preflight.json").read_text())["plan_hash"] == manifest.plan_hash
