"""A launch's LD_PRELOAD reaches the server process and not specselect's supervisor (a stand-in server, no vLLM).

Component tier: it starts processes."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from specselect._engines.http import local_request
from specselect._engines.server import ServerOptions, ServerProcess

FAKE = Path(__file__).resolve().parents[1] / "unit" / "data" / "engine_fake_server.py"
LIBRARY = "libc.so.6"
"""Preloading the C library changes nothing in either process: the test sees only where the variable went."""

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ss-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_preload_is_set_on_the_server_and_never_on_the_supervisor(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    options = ServerOptions(
        log_path=short_dir / "server.log",
        served_model="fake-model",
        run_dir=short_dir / "run",
        env={"LD_PRELOAD": LIBRARY, "VLLM_NO_USAGE_STATS": "1"},
        startup_timeout_s=20.0,
        poll_interval_s=0.05,
        term_grace_s=5.0,
    )
    with ServerProcess(lambda port: [sys.executable, str(FAKE), "--port", str(port)], options) as server:
        _, body = local_request("GET", f"{server.base_url}/env")
        supervisor = _environ(server.pgid)  # the supervisor leads the server's process group
    seen = json.loads(body)
    assert seen["LD_PRELOAD"] == LIBRARY
    assert seen["VLLM_NO_USAGE_STATS"] == "1"
    assert "LD_PRELOAD" not in supervisor
    assert supervisor["VLLM_NO_USAGE_STATS"] == "1"  # every other variable of the launch reaches both


def test_a_preload_specselect_itself_runs_with_passes_through_unchanged(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LD_PRELOAD", LIBRARY)
    options = ServerOptions(
        log_path=short_dir / "server.log",
        served_model="fake-model",
        run_dir=short_dir / "run",
        startup_timeout_s=20.0,
        poll_interval_s=0.05,
    )
    with ServerProcess(lambda port: [sys.executable, str(FAKE), "--port", str(port)], options) as server:
        _, body = local_request("GET", f"{server.base_url}/env")
        supervisor = _environ(server.pgid)
    assert json.loads(body)["LD_PRELOAD"] == LIBRARY == supervisor["LD_PRELOAD"]
