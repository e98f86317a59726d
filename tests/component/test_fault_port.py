"""Ports: the default (port 0) picks a free port per group; a pinned port that is taken is refused before
anything starts, and one taken later fails only that group, naming the port, without spawning anything."""

from __future__ import annotations

import re
import socket
import sys
from collections.abc import Iterator

import pytest
from test_fault_harness import (  # noqa: F401  (fixtures)
    FakeRun,
    fake_engine_processes,
    fake_run_fixture,
    fake_vllm_fixture,
    ngram,
    ports_in_logs,
)

import specselect._engines.server as server_module
from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect.records.group import GroupResult
from specselect.records.results import Manifest

LABEL = "faults"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port something else listens on for the duration of the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_default_port_is_chosen_per_group_and_recorded(fake_run: FakeRun) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")])
    done = fake_run.call("run", "plan.toml", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    layout = RunLayout(fake_run.results / LABEL)
    for name in ("g0_target_only", "g1_ngram"):
        launch = load_document(layout.group_summary(name), GroupResult).launch
        assert launch is not None
        port = int(launch.base_url.rsplit(":", 1)[1])
        assert launch.command[launch.command.index("--port") + 1] == str(port)
    assert len(ports_in_logs(fake_run.results)) >= 1


def test_pinned_free_port_is_reused_by_each_group_in_turn(fake_run: FakeRun) -> None:
    port = _free_port()
    fake_run.plan(candidates=[ngram("g1_ngram"), ngram("g2_ngram")], engine={"port": port})
    done = fake_run.call("run", "plan.toml", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert ports_in_logs(fake_run.results) == {port}
    manifest = load_document(RunLayout(fake_run.results / LABEL).manifest, Manifest)
    assert all(g.run_status.value == "completed" for g in manifest.groups)


def test_pinned_port_already_taken_is_refused_before_anything_starts(fake_run: FakeRun, held_port: int) -> None:
    fake_run.plan(candidates=[ngram("g1_ngram")], engine={"port": held_port})
    done = fake_run.call("run", "plan.toml")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"port_in_use: port {held_port} on 127.0.0.1 is already in use" in done.stderr
    assert not (fake_run.results / LABEL).exists()


def test_pinned_port_taken_after_preflight_fails_only_that_group(
    fake_run: FakeRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port is free at preflight, then taken when g1's server would start (simulated at the server layer)."""
    port = _free_port()
    real = server_module.port_is_free

    def port_is_free(host: str, p: int) -> bool:
        # Taken only when g1's server is about to start (its start check; teardown checks are left alone).
        caller = sys._getframe(1)
        starting = caller.f_code.co_name == "_choose_port" and "g1_ngram" in caller.f_locals["self"]._name
        return False if p == port and starting else real(host, p)

    monkeypatch.setattr(server_module, "port_is_free", port_is_free)
    fake_run.plan(candidates=[ngram("g1_ngram"), ngram("g2_ngram")], engine={"port": port})
    done = fake_run.call("run", "plan.toml", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    layout = RunLayout(fake_run.results / LABEL)
    manifest = load_document(layout.manifest, Manifest)
    assert {g.name: g.run_status.value for g in manifest.groups} == {
        "g0_target_only": "completed",
        "g1_ngram": "failed",
        "g2_ngram": "completed",
    }
    failed = load_document(layout.group_summary("g1_ngram"), GroupResult)
    assert failed.reason == "server_start_failed"
    assert failed.hint and f"port {port} on 127.0.0.1 is already in use" in failed.hint
    assert failed.launch is None
    log = layout.root / "logs" / "g1_ngram.log"
    assert not log.exists() or not re.search(r"attempt \d+ on port", log.read_text())
    assert not fake_engine_processes(fake_run.python.parents[1])
