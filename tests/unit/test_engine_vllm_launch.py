"""vLLM argv per family, redaction, and VllmEngine's launch/sanity/scrape against the stand-in server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from specselect._common.secrets import redact_argv, redact_text
from specselect._engines.base import LaunchSpec, Proposal
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.launch import VLLM_CLI_MODULE, build_vllm_argv
from specselect._engines.vllm.specconfig import build_speculative_config
from specselect.errors import ConfigError

DATA = Path(__file__).parent / "data"
FAKE = DATA / "engine_fake_server.py"
PY = "/envs/vllm/bin/python"


def spec(tmp_path: Path, **kw: Any) -> LaunchSpec:
    fields: dict[str, Any] = {
        "group": "g0_target_only",
        "model_path": Path("/models/smollm2"),
        "served_model_name": "smollm2",
        "dtype": "float32",
        "max_model_len": 2048,
        "log_path": tmp_path / "g.log",
        "run_dir": tmp_path / "run",
    }
    fields.update(kw)
    return LaunchSpec(**fields)


def test_baseline_argv_is_exact(tmp_path: Path) -> None:
    argv = build_vllm_argv(spec(tmp_path, engine_args=("--enforce-eager",)), 8123, python=PY)
    assert argv == [
        PY,
        "-m",
        VLLM_CLI_MODULE,
        "serve",
        "/models/smollm2",
        "--served-model-name",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--tensor-parallel-size",
        "1",
        "--enforce-eager",
    ]


def test_ngram_argv_with_per_request_metrics_and_no_prefix_cache(tmp_path: Path) -> None:
    cfg = build_speculative_config(Proposal("ngram", None, 4, None, {"prompt_lookup_min": 2, "prompt_lookup_max": 5}))
    s = spec(tmp_path, speculative_config=cfg, per_request_spec_metrics=True, disable_prefix_caching=True)
    argv = build_vllm_argv(s, 1, python=PY)
    i = argv.index("--speculative-config")
    assert json.loads(argv[i + 1]) == cfg
    assert argv[i + 1] == '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":5}'
    assert argv[i + 2 : i + 4] == ["--per-request-spec-decode-metrics", "summary"]
    assert argv[-1] == "--no-enable-prefix-caching"


def test_per_request_flag_needs_speculation_and_the_probe(tmp_path: Path) -> None:
    assert "--per-request-spec-decode-metrics" not in build_vllm_argv(
        spec(tmp_path, per_request_spec_metrics=True), 1, python=PY
    )
    cfg = build_speculative_config(Proposal("ngram", None, 4, None))
    assert "--per-request-spec-decode-metrics" not in build_vllm_argv(
        spec(tmp_path, speculative_config=cfg, per_request_spec_metrics=False), 1, python=PY
    )


@pytest.mark.parametrize(
    ("family", "method", "proposer"),
    [
        ("draft_model", None, "/models/draft4l"),
        ("eagle", "eagle3", "/models/eagle3-head"),
        ("mtp", None, None),
        ("suffix", None, None),
        ("dflash", None, "/models/dflash"),
    ],
)
def test_each_family_passes_one_speculative_config(
    tmp_path: Path, family: str, method: str | None, proposer: str | None
) -> None:
    cfg = build_speculative_config(Proposal(family, method, 3, proposer))
    argv = build_vllm_argv(spec(tmp_path, speculative_config=cfg), 1, python=PY)
    assert argv.count("--speculative-config") == 1
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == cfg
    assert "--speculative-model" not in argv


def test_parallel_sizes_backend_and_command_prefix(tmp_path: Path) -> None:
    s = spec(
        tmp_path,
        tensor_parallel_size=2,
        pipeline_parallel_size=2,
        data_parallel_size=2,
        distributed_executor_backend="mp",
        max_model_len=None,
        host="0.0.0.0",
    )
    argv = build_vllm_argv(s, 9000, command=["vllm", "serve"])
    assert argv[:2] == ["vllm", "serve"]
    assert "--max-model-len" not in argv
    for flag, value in [
        ("--tensor-parallel-size", "2"),
        ("--pipeline-parallel-size", "2"),
        ("--data-parallel-size", "2"),
        ("--distributed-executor-backend", "mp"),
        ("--host", "0.0.0.0"),
    ]:
        assert argv[argv.index(flag) + 1] == value


@pytest.mark.parametrize("extra", [("--port", "1"), ("--speculative-config={}",), ("--served-model-name", "x")])
def test_engine_args_cannot_override_plan_fields(tmp_path: Path, extra: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="cannot be repeated") as info:
        build_vllm_argv(spec(tmp_path, engine_args=extra), 1, python=PY)
    assert info.value.location == "groups.g0_target_only.engine_args"


def test_api_key_in_engine_args_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="api_key_env"):
        build_vllm_argv(spec(tmp_path, engine_args=("--api-key", "sk-1")), 1, python=PY)


def test_no_python_and_no_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no python"):
        build_vllm_argv(spec(tmp_path), 1)
    with pytest.raises(ConfigError, match="needs a python"):
        VllmEngine().argv(spec(tmp_path), 1)


def test_redaction_of_argv_and_text() -> None:
    argv = [
        "env",
        "HF_TOKEN=hf_abc",
        "vllm",
        "serve",
        "--api-key",
        "sk-1",
        "--hf-token=hf_x",
        "--max-num-batched-tokens",
        "8",
    ]
    assert redact_argv(argv) == (
        "env",
        "HF_TOKEN=***",
        "vllm",
        "serve",
        "--api-key",
        "***",
        "--hf-token=***",
        "--max-num-batched-tokens",
        "8",
    )
    text = "args: --api-key sk-1 num_speculative_tokens=4 OPENAI_API_KEY=abc value s3cr3t-value"
    assert redact_text(text, ["s3cr3t-value"]) == (
        "args: --api-key *** num_speculative_tokens=4 OPENAI_API_KEY=*** value ***"
    )


def fake_engine() -> VllmEngine:
    return VllmEngine(command=[sys.executable, str(FAKE)], poll_interval_s=0.05, term_grace_s=5.0)


def test_missing_api_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECSELECT_NOT_SET_KEY", raising=False)
    with pytest.raises(ConfigError, match="SPECSELECT_NOT_SET_KEY is not set"):
        fake_engine().launch(spec(tmp_path, api_key_env="SPECSELECT_NOT_SET_KEY"))
