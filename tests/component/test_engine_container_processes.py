"""The tests of test_engine_container that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_engine_container import IMAGE
from test_fault_harness import make_fake_vllm

from specselect._engines.container import (
    LABEL_OWNER,
    owner_label,
    parse_container_command,
    remove_leftovers,
)
from specselect._engines.probecommand import probe_runner
from specselect._engines.server import ServerOptions, ServerProcess
from specselect._engines.vllm.probe import probe_vllm_command
from specselect.errors import EngineSetupError

STANDIN = Path(__file__).resolve().parents[1] / "standin_docker.py"


def test_the_probe_reads_the_vllm_inside_the_image_not_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "image" (the stand-in runtime's python) has a fake vLLM that declares 5 methods; the host's managed
    vLLM declares 39. An image without vllm fails the probe, naming the command."""
    docker, env = _runtime(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("STANDIN_DOCKER_PYTHON", str(make_fake_vllm(tmp_path / "image")))
    runner = probe_runner([str(docker), "run", IMAGE])
    caps = probe_vllm_command(runner, tmp_path / "cache")
    assert set(caps.spec_methods) == {"ngram", "draft_model", "eagle", "eagle3", "suffix"}
    assert caps.engine_version == "0.32.0+cpu" and f"--entrypoint python3 {IMAGE}" in caps.python
    monkeypatch.setenv("STANDIN_DOCKER_PYTHON", sys.executable)  # specselect's own venv: no vllm
    with pytest.raises(EngineSetupError, match="vllm is not installed"):
        probe_vllm_command(runner, tmp_path / "cache")


_SERVER = textwrap.dedent(
    """
    import http.server, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *a):
            pass
    print("stand-in server up", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def _runtime(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir(parents=True, exist_ok=True)
    docker.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    docker.chmod(0o755)
    env = {"STANDIN_DOCKER_STATE": str(tmp_path / "state"), "STANDIN_DOCKER_PYTHON": sys.executable}
    return docker, env


def _containers(docker: Path, env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [str(docker), "ps", "-a", "--filter", f"label={LABEL_OWNER}"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    return out.stdout.split()


def _container_argv(docker: Path, tmp_path: Path, name: str, port: int, *more: str) -> list[str]:
    script = tmp_path / "server.py"
    script.write_text(_SERVER)
    return [
        str(docker), "run", *more, "--rm", "--name", name, "--label", f"{LABEL_OWNER}={owner_label()}",
        "-p", f"127.0.0.1:{port}:{port}", "-v", f"{tmp_path}:{tmp_path}:ro",
        "--entrypoint", "python3", IMAGE, str(script), "--port", str(port),
    ]  # fmt: skip


def test_group_end_stops_and_removes_the_container_and_keeps_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker, env = _runtime(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parsed = parse_container_command([str(docker), "run", IMAGE])
    assert parsed is not None
    options = ServerOptions(
        log_path=tmp_path / "server.log",
        served_model="x",
        cleanup=parsed.cleanup_argvs("specselect-t-g1"),
        poll_interval_s=0.1,
    )
    with ServerProcess(lambda port: _container_argv(docker, tmp_path, "specselect-t-g1", port), options):
        assert _containers(docker, env) == ["specselect-t-g1"]
    assert _containers(docker, env) == []
    log = (tmp_path / "server.log").read_text()
    assert "stand-in server up" in log and "stop -t 10 specselect-t-g1" in log


def test_after_sigkill_of_specselect_no_container_is_left(tmp_path: Path) -> None:
    """A child python holds a ServerProcess over the stand-in runtime and is SIGKILLed: the supervisor's cleanup
    removes the container (whose processes the runtime, not the killed process group, owns). `--sig-proxy=false`:
    the client does not pass the supervisor's SIGTERM on, as when it is killed outright; without the cleanup
    commands the container would run on (checked by disabling them: this test then fails)."""
    docker, env = _runtime(tmp_path)
    holder = tmp_path / "holder.py"
    holder.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1] / "unit")!r}]
            from pathlib import Path
            from specselect._engines.container import parse_container_command
            from specselect._engines.server import ServerOptions, ServerProcess
            from test_engine_container_processes import _container_argv
            docker, tmp = Path({str(docker)!r}), Path({str(tmp_path)!r})
            cleanup = parse_container_command([str(docker), "run", "img"]).cleanup_argvs("specselect-t-killed")
            opts = ServerOptions(log_path=tmp / "server.log", served_model="x", cleanup=cleanup, poll_interval_s=0.1)
            argv = lambda port: _container_argv(docker, tmp, "specselect-t-killed", port, "--sig-proxy=false")
            with ServerProcess(argv, opts):
                print("ready", flush=True)
                time.sleep(600)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(holder)], stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    record = json.loads((tmp_path / "state" / "containers" / "specselect-t-killed.json").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 30
    while _containers(docker, env) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _containers(docker, env) == []
    while _live_members(record["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _live_members(record["pid"]) == []


def _live_members(pgid: int) -> list[int]:
    """The group's processes that still run: a killed one whose parent died is a zombie until the system's init
    reaps it, which in a container may be never, so zombies do not count (`killpg(pgid, 0)` would)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def test_leftovers_of_a_dead_specselect_are_removed_and_a_live_ones_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker, env = _runtime(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    state = tmp_path / "state" / "containers"
    state.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        for name, owner in (("specselect-dead", "1.1"), ("specselect-live", owner_label())):
            state.joinpath(f"{name}.json").write_text(
                json.dumps({"name": name, "pid": sleeper.pid, "labels": {LABEL_OWNER: owner}, "rm": True})
            )
        said: list[str] = []
        assert remove_leftovers(str(docker), said.append) == ["specselect-dead"]
        assert "killed" in said[0]
        assert _containers(docker, env) == ["specselect-live"]
    finally:
        sleeper.kill()
        sleeper.wait()
