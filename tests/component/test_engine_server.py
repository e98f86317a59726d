"""ServerProcess against a tiny stand-in server this test controls (no vLLM)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psutil
import pytest

from specselect._engines import server as server_mod
from specselect._engines.http import local_request, pick_free_port, port_is_free
from specselect._engines.server import ServerOptions, ServerProcess, cache_env, read_log_tail
from specselect.errors import ServerCrashedError, ServerStartError, ServerTimeoutError

FAKE = Path(__file__).resolve().parents[1] / "unit" / "data" / "engine_fake_server.py"

pytestmark = pytest.mark.timeout(60)


def fake_argv(*extra: str) -> Callable[[int], Sequence[str]]:
    return lambda port: [sys.executable, str(FAKE), "--port", str(port), *extra]


def make(tmp_path: Path, *extra: str, **kwargs: object) -> ServerProcess:
    options: dict[str, object] = {
        "log_path": tmp_path / "logs" / "server.log",
        "served_model": "fake-model",
        "run_dir": tmp_path / "run",
        "startup_timeout_s": 20.0,
        "poll_interval_s": 0.05,
        "term_grace_s": 5.0,
    }
    options.update(kwargs)
    return ServerProcess(fake_argv(*extra), ServerOptions(**options))  # type: ignore[arg-type]


def group_alive(pgid: int) -> list[int]:
    alive = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                alive.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return alive


@pytest.fixture
def held_port() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def test_ready_server_is_yielded_then_torn_down_and_port_reusable(tmp_path: Path) -> None:
    proc = make(tmp_path, "--child", "--ready-after", "0.3")
    with proc as server:
        status, _ = local_request("GET", f"{server.base_url}/health")
        assert status == 200
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert os.getpgid(server.pid) == server.pgid != server.pid  # the supervisor leads the server's group
        assert len(group_alive(server.pgid)) == 3  # the supervisor, the server and its child
        assert server.startup_s is not None
        assert server.startup_s >= 0.3
        port, pgid = server.port, server.pgid
    check = proc.release_check
    assert check is not None
    assert check.port_free
    assert check.processes_gone
    assert not check.killed
    assert group_alive(pgid) == []
    # The same explicit port works again right after teardown.
    again = make(tmp_path, port=port)
    with again as second:
        assert second.port == port
    assert again.release_check is not None
    assert again.release_check.port_free


def test_child_env_keeps_caches_under_run_dir_and_offline(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="ss-"))
    try:
        with make(short, env={"VLLM_NO_USAGE_STATS": "1"}, run_dir=short / "run") as server:
            _, body = local_request("GET", f"{server.base_url}/env")
    finally:
        shutil.rmtree(short, ignore_errors=True)
    seen = json.loads(body)
    run = short / "run"
    assert seen["TMPDIR"] == str(run / "tmp")
    assert seen["VLLM_CACHE_ROOT"].startswith(str(run))
    assert seen["HF_HUB_OFFLINE"] == "1"
    assert seen["TRANSFORMERS_OFFLINE"] == "1"
    assert seen["VLLM_NO_USAGE_STATS"] == "1"
    assert seen["cwd"] == str(run)


def test_a_relative_run_dir_gives_the_server_absolute_cache_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server runs with cwd=run_dir: a relative VLLM_CACHE_ROOT would point at run_dir/run_dir/cache.
    short = Path(tempfile.mkdtemp(prefix="ss-"))
    monkeypatch.chdir(short)
    try:
        with make(short, run_dir=Path("run")) as server:
            _, body = local_request("GET", f"{server.base_url}/env")
    finally:
        shutil.rmtree(short, ignore_errors=True)
    seen = json.loads(body)
    assert seen["VLLM_CACHE_ROOT"] == str(short / "run" / "cache" / "vllm")
    assert seen["TMPDIR"] == str(short / "run" / "tmp")


def test_a_deep_run_dir_gets_a_short_tmpdir_for_ipc_sockets_removed_at_teardown(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 80) / "run"
    with make(tmp_path, run_dir=deep) as server:
        _, body = local_request("GET", f"{server.base_url}/env")
        tmpdir = Path(json.loads(body)["TMPDIR"])
        assert len(str(tmpdir)) <= server_mod.MAX_TMPDIR_CHARS
        assert tmpdir.is_dir()
    assert not tmpdir.exists()
    assert json.loads(body)["VLLM_CACHE_ROOT"].startswith(str(deep))


def test_early_exit_raises_start_error_with_redacted_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SECRET_TOKEN", "hunter2-very-secret")
    proc = make(tmp_path, "--mode", "exit", "--child")
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info, proc:
        pytest.fail("must not get here")
    assert time.monotonic() - started < 10
    err = info.value
    assert "exited with code 3" in err.message
    assert err.log_path == str(tmp_path / "logs" / "server.log")
    assert err.log_tail is not None
    assert "fake failure for the test" in err.log_tail
    assert "hunter2-very-secret" not in err.log_tail
    assert "***" in err.log_tail
    assert proc.release_check is not None
    assert proc.release_check.processes_gone  # the orphaned child was killed too


def test_never_ready_times_out_with_tail_and_cleans_up(tmp_path: Path) -> None:
    proc = make(tmp_path, "--mode", "never", "--child", startup_timeout_s=1.5)
    with pytest.raises(ServerTimeoutError) as info, proc:
        pytest.fail("must not get here")
    assert "within 2 s" in info.value.message or "within 1 s" in info.value.message
    assert info.value.log_tail is not None
    assert "listening on" in info.value.log_tail
    assert proc.release_check is not None
    assert proc.release_check.processes_gone
    assert proc.release_check.port_free


def test_keyboard_interrupt_inside_block_kills_group(tmp_path: Path) -> None:
    proc = make(tmp_path, "--child")
    seen: list[int] = []

    def interrupted_measurement() -> None:
        with proc as server:
            seen.extend(group_alive(server.pgid))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_measurement()
    assert len(seen) == 3  # the supervisor, the server and its child
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE for pid in seen)
    assert proc.release_check is not None
    assert proc.release_check.processes_gone


def test_exception_inside_block_tears_down_and_propagates(tmp_path: Path) -> None:
    proc = make(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), proc:
        raise RuntimeError("boom")
    assert proc.release_check is not None
    assert proc.release_check.processes_gone


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path) -> None:
    proc = make(tmp_path, "--ignore-term", "--child", term_grace_s=0.5)
    with proc as server:
        pgid = server.pgid
    assert proc.release_check is not None
    assert proc.release_check.killed
    assert proc.release_check.processes_gone
    assert group_alive(pgid) == []


def test_explicit_port_in_use_fails_fast(tmp_path: Path, held_port: int) -> None:
    with pytest.raises(ServerStartError, match="already in use"), make(tmp_path, port=held_port):
        pytest.fail("must not get here")


def test_lost_port_race_retries_another_port(tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pre-check says the taken port is free (as in a real race); the server then fails to bind it.
    monkeypatch.setattr(server_mod, "port_is_free", lambda host, port: True)
    picks = iter([held_port, pick_free_port()])
    proc = make(tmp_path, port_picker=lambda host: next(picks))
    with proc as server:
        assert server.port != held_port
    log = (tmp_path / "logs" / "server.log").read_text()
    assert "attempt 1" in log
    assert "attempt 2" in log
    assert "Address already in use" in log


def test_missing_executable_is_a_start_error(tmp_path: Path) -> None:
    proc = ServerProcess(
        lambda port: [str(tmp_path / "no-such-python"), "--port", str(port)],
        ServerOptions(log_path=tmp_path / "server.log", served_model="m"),
    )
    with pytest.raises(ServerStartError, match="cannot start"), proc:
        pytest.fail("must not get here")


def test_recorded_command_redacts_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_SECRET", "abcd-1234-xyz")
    with make(tmp_path, "--api-key", "sk-live-123", "--note", "abcd-1234-xyz") as server:
        assert "sk-live-123" not in server.command
        assert "abcd-1234-xyz" not in " ".join(server.command)
        assert server.command[-4:] == ("--api-key", "***", "--note", "***")
    log = (tmp_path / "logs" / "server.log").read_text()
    assert "sk-live-123" not in log.splitlines()[0]


def test_raise_if_dead_reports_a_crash(tmp_path: Path) -> None:
    proc = make(tmp_path)
    with proc as server:
        proc.raise_if_dead()
        psutil.Process(server.pid).kill()
        psutil.Process(server.pid).wait(5)
        # The supervisor ends as its server did once its poll sees it (every 0.2 s): on a busy machine not at once.
        deadline = time.monotonic() + 5.0
        while proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not proc.is_alive()
        with pytest.raises(ServerCrashedError) as info:
            proc.raise_if_dead()
        assert info.value.log_tail is not None
        assert "listening on" in info.value.log_tail
    assert proc.release_check is not None
    assert proc.release_check.processes_gone


def test_cache_env_and_log_tail(tmp_path: Path) -> None:
    env = cache_env(tmp_path / "r")
    assert (tmp_path / "r" / "tmp").is_dir()
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TRANSFORMERS_OFFLINE"] == "1"
    assert all(env[k].startswith(str(tmp_path)) for k in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TMPDIR"))
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "HF_TOKEN=abc123\n")
    tail = read_log_tail(log, 3)
    assert tail.splitlines() == ["line 98", "line 99", "HF_TOKEN=***"]
    assert read_log_tail(tmp_path / "missing.log") == ""
    assert port_is_free("127.0.0.1", pick_free_port())


def test_keyboard_interrupt_during_startup_kills_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = time.sleep
    calls: list[float] = []

    def sleep_then_interrupt(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) == 3:  # Ctrl-C while waiting for readiness
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(server_mod.time, "sleep", sleep_then_interrupt)
    proc = make(tmp_path, "--mode", "never", "--child")
    with pytest.raises(KeyboardInterrupt), proc:
        pytest.fail("must not get here")
    assert proc.release_check is not None
    assert proc.release_check.processes_gone
    assert proc.port is not None
    assert port_is_free("127.0.0.1", proc.port)


def test_local_request_bypasses_proxies_and_maps_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with make(tmp_path) as server:
        assert local_request("GET", f"{server.base_url}/health")[0] == 200
        assert local_request("GET", f"{server.base_url}/nothing-here")[0] == 404
    with pytest.raises(OSError, match="refused"):  # nothing listens there any more
        local_request("GET", f"{server.base_url}/health", timeout_s=2)
    garbage = socket.create_server(("127.0.0.1", 0))
    port = garbage.getsockname()[1]

    def answer_garbage() -> None:
        conn, _ = garbage.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    worker = threading.Thread(target=answer_garbage)
    worker.start()
    try:
        with pytest.raises(ConnectionError):
            local_request("GET", f"http://127.0.0.1:{port}/health", timeout_s=5)
    finally:
        worker.join(5)
        garbage.close()
