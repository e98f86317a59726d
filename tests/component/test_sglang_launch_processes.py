"""The tests of test_sglang_launch that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "data"))  # the fake SGLang installer
import sglang_fake_install as FAKE
from test_sglang_launch import _caps, spec

from specselect._engines.base import Proposal
from specselect._engines.http import local_request
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.launch import SGLANG_SERVER_MODULE
from specselect._engines.sglang.serverinfo import ServerInfoSnapshot
from specselect.errors import ConfigError, ProtocolError


def fake_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    FAKE.install(site, "registry")
    return site


def engine_for(tmp_path: Path) -> tuple[SglangEngine, dict[str, str]]:
    return SglangEngine(sys.executable, poll_interval_s=0.05, term_grace_s=5.0), {
        "PYTHONPATH": str(fake_site(tmp_path))
    }


def _chat(base_url: str, model: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}).encode()
    status, _ = local_request(
        "POST",
        f"{base_url}/v1/chat/completions",
        body=body,
        headers={"Content-Type": "application/json", **(headers or {})},
        timeout_s=10,
    )
    assert status == 200


def test_launch_sanity_snapshot_and_acceptance(tmp_path: Path) -> None:
    engine, env = engine_for(tmp_path)
    config = engine.speculative_config(Proposal("eagle", "eagle3", 4, "/models/eagle3"))
    launch = spec(tmp_path, model_path=Path("/models/llama"), speculative_config=config, env=env)
    proc = engine.launch(launch)
    with proc as server:
        assert server.command[:3] == (sys.executable, "-m", SGLANG_SERVER_MODULE)
        assert server.spec_config == config
        sanity = engine.sanity(server)
        assert sanity.model_ids == ("llama",) and sanity.reply_text == "Hello there."
        before = engine.snapshot(server)
        for _ in range(5):
            _chat(server.base_url, "llama")
        after = engine.snapshot(server)
        assert isinstance(after, ServerInfoSnapshot) and after.server_info is not None
        assert after.server_info.algorithm == "EAGLE3" and after.server_info.proposals_per_step == 4
        acc = engine.acceptance(before, after, "llama")
        # The stand-in emits 8 tokens by 4 verify steps per request (plus one prefill token): exactly 2.0.
        assert acc.source == "prometheus_counters" and acc.mean_acceptance_length == pytest.approx(2.0)
        assert (acc.drafts, acc.accepted_tokens, acc.draft_tokens) == (20, 20, 80)
        assert engine.spec_counters(before, after, "llama").draft_tokens == 80
        common = engine.spec_telemetry(before, after, "llama")
        assert common.source == "prometheus" and common.acceptance_rate == pytest.approx(0.25)
    assert proc.release_check is not None and proc.release_check.port_free and proc.release_check.processes_gone


def _server_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def test_old_endpoint_counts_and_api_key_scrubbed_from_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_TEST_AUTH", "sk-sglang-secret-42")
    engine, env = engine_for(tmp_path)
    config = engine.speculative_config(Proposal("mtp", None, 4, None), target_path="/models/llama")
    launch = spec(
        tmp_path,
        speculative_config=config,
        env=env,
        api_key_env="SGLANG_TEST_AUTH",
        engine_args=("--fake-old-endpoint", "--fake-expose-counts"),
    )
    proc = engine.launch(launch)
    with proc as server:
        # The key reaches SGLang in a file only its owner can read, never on the command line (`ps`).
        command = list(server.command)
        assert "sk-sglang-secret-42" not in " ".join(command) and "--api-key" not in command
        key_file = Path(command[command.index("--config") + 1])
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        assert "sk-sglang-secret-42" in key_file.read_text()
        assert all("sk-sglang-secret-42" not in " ".join(p.cmdline()) for p in _server_tree(server.pid))
        assert engine.sanity(server).model_ids == ("llama",)
        before = engine.snapshot(server)
        for _ in range(3):
            _chat(server.base_url, "llama", {"Authorization": "Bearer sk-sglang-secret-42"})
        after = engine.snapshot(server)
        acc = engine.acceptance(before, after, "llama")
        assert acc.source == "server_info_counts" and acc.exact and acc.drafts == 12
        assert acc.cross_check is not None and acc.cross_check.agree is True
        assert "sk-sglang-secret-42" not in proc.log_tail()
    log = launch.log_path.read_text()
    assert "server_args=ServerArgs(" in log and "sk-sglang-secret-42" not in log
    assert not key_file.exists()  # removed with the server


def test_missing_api_key_and_missing_server_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, env = engine_for(tmp_path)
    monkeypatch.delenv("SGLANG_TEST_AUTH", raising=False)
    with pytest.raises(ConfigError, match="SGLANG_TEST_AUTH is not set"):
        engine.launch(spec(tmp_path, api_key_env="SGLANG_TEST_AUTH", env=env))
    # The probe said /server_info but the server has only the old path: recorded, not raised.
    fake_caps = _caps().model_copy(update={"server_endpoints": ("/server_info",)})
    other = SglangEngine(sys.executable, caps=fake_caps, poll_interval_s=0.05, term_grace_s=5.0)
    with other.launch(spec(tmp_path, env=env, engine_args=("--fake-old-endpoint",))) as server:
        snap = other.snapshot(server)
        assert snap.server_info is None and snap.server_info_error is not None
        assert "/server_info is not served (HTTP 404)" in snap.server_info_error
        with pytest.raises(ProtocolError, match="neither /server_info nor /get_server_info"):
            SglangEngine(sys.executable).server_info(server.model_copy(update={"base_url": server.base_url + "/x"}))
