"""A server killed mid-scenario is a crash even when the client sees the dropped connections first."""

from __future__ import annotations

import time

import pytest

from specselect._engines.base import Session
from specselect._runner import scenario as scenario_mod
from specselect._runner.scenario import _check_alive_after, _check_some_succeeded
from specselect.errors import ServerCrashedError, ServerTimeoutError
from specselect.records.measurement import ErrorKind, RequestRecord
from specselect.records.server import SanityResult


def _record(kind: ErrorKind | None) -> RequestRecord:
    return RequestRecord(
        request_id="s:a",
        item_id="a",
        scenario="s",
        repeat=0,
        warmup=False,
        send_time_s=0.0,
        error_kind=kind,
        error=None if kind is None else "ServerDisconnectedError talking to the server",
    )


class _DyingServer:
    """Reports its exit only `after_s` after the connections dropped (as the OS does for a killed process)."""

    def __init__(self, after_s: float) -> None:
        self.dies_at = time.monotonic() + after_s
        self.checks = 0

    def check_alive(self) -> None:
        self.checks += 1
        if time.monotonic() >= self.dies_at:
            raise ServerCrashedError("server exited with code -9 while it was being measured")


def _serving(check_alive: object) -> Session:
    return Session(
        base_url="http://127.0.0.1:9",
        model="m",
        api_key_env=None,
        snapshot=lambda: None,  # type: ignore[arg-type,return-value]
        spec_counters=lambda before, after: None,  # type: ignore[arg-type,return-value]
        request_spec_metrics=lambda fields: None,
        check_alive=check_alive,  # type: ignore[arg-type]
        log_location="server.log",
        log_tail=lambda: None,
        sanity=SanityResult(model_ids=("m",), api="chat", reply_text="hi", seconds=0.0),
    )


def test_late_exit_after_dropped_connections_is_a_crash() -> None:
    server = _DyingServer(after_s=0.3)
    with pytest.raises(ServerCrashedError):
        _check_alive_after(_serving(server.check_alive), [_record(ErrorKind.CONNECTION_ERROR)])


def test_live_server_with_dropped_connections_is_watched_then_judged_by_its_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scenario_mod, "CRASH_GRACE_S", 0.3)
    server = _DyingServer(after_s=3600)
    records = [_record(ErrorKind.CONNECTION_ERROR)]
    serving = _serving(server.check_alive)
    _check_alive_after(serving, records)
    assert server.checks > 1
    with pytest.raises(ServerTimeoutError, match="every request of scenario s failed"):
        _check_some_succeeded(serving, records, "s")


def test_no_connection_errors_means_one_check_and_no_wait() -> None:
    server = _DyingServer(after_s=3600)
    started = time.monotonic()
    _check_alive_after(_serving(server.check_alive), [_record(None)])
    assert server.checks == 1 and time.monotonic() - started < 0.1
