"""The tests of test_engine_vllm_launch that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_engine_vllm_launch import DATA, fake_engine, spec

from specselect._engines.base import Engine, Proposal
from specselect._engines.http import sanity_check
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect._engines.vllm.telemetry import spec_decode_delta
from specselect.errors import ProtocolError


def test_launch_sanity_and_scrape_against_stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSELECT_TEST_KEY", "key-0123456789")
    cfg = build_speculative_config(Proposal("ngram", None, 4, None))
    s = spec(
        tmp_path,
        speculative_config=cfg,
        engine_args=("--metrics-file", str(DATA / "engine_metrics_ngram_k4_after.txt")),
        api_key_env="SPECSELECT_TEST_KEY",
        startup_timeout_s=20,
    )
    engine = fake_engine()
    assert isinstance(engine, Engine)
    launcher = engine.launch(s)
    with launcher as server:
        assert server.spec_config == cfg
        assert server.served_model == "smollm2"
        assert "key-0123456789" not in " ".join(server.command)
        assert engine.sanity(server).reply_text == "Hello there."
        with pytest.raises(ProtocolError, match="HTTP 401"):
            sanity_check(server.base_url, "smollm2")  # no key: the stand-in refuses like vLLM does
        after = engine.snapshot(server)
    assert launcher.release_check is not None
    assert launcher.release_check.processes_gone
    assert spec_decode_delta(after, after, "smollm2").exported


def test_sanity_detects_wrong_model_and_empty_text(tmp_path: Path) -> None:
    engine = fake_engine()
    with engine.launch(spec(tmp_path, engine_args=("--reply", " "), startup_timeout_s=20)) as server:
        with pytest.raises(ProtocolError, match="empty text"):
            engine.sanity(server)
        with pytest.raises(ProtocolError, match="not the served model 'other'"):
            sanity_check(server.base_url, "other")
        assert engine.scrape_metrics(server) == ""  # no metrics endpoint -> nothing exported
