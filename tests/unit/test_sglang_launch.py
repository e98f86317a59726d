"""SGLang command lines per algorithm, and SglangEngine's life cycle against the stand-in server.

The stand-in (data/sglang_fake_launch_server.py) is installed as `sglang/launch_server.py` of a fake
package, so `python -m sglang.launch_server` runs exactly as it would with SGLang installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))  # the fake SGLang installer is test support

from specselect._engines.base import Engine, LaunchSpec, Proposal
from specselect._engines.registry import get_engine, known_engine_kinds
from specselect._engines.sglang.engine import SglangEngine
from specselect._engines.sglang.launch import SGLANG_SERVER_MODULE, build_sglang_argv, speculative_argv
from specselect._engines.sglang.probe import LAUNCH_FLAGS
from specselect._engines.sglang.specargs import build_sglang_speculative_args
from specselect.errors import ConfigError
from specselect.records.capabilities import SglangCapabilities

DATA = Path(__file__).parent / "data"
PY = "/envs/sglang/bin/python"
HEAD = [PY, "-m", SGLANG_SERVER_MODULE]
BASE = [
    "--model-path",
    "/models/llama",
    "--served-model-name",
    "llama",
    "--host",
    "127.0.0.1",
    "--port",
    "30001",
    "--dtype",
    "bfloat16",
    "--context-length",
    "4096",
    "--tp-size",
    "1",
    "--enable-metrics",
]


def spec(tmp_path: Path, **kw: Any) -> LaunchSpec:
    fields: dict[str, Any] = {
        "group": "c1",
        "model_path": Path("/models/llama"),
        "served_model_name": "llama",
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "log_path": tmp_path / "g.log",
        "run_dir": tmp_path / "run",
    }
    fields.update(kw)
    return LaunchSpec(**fields)


def candidate(
    tmp_path: Path, family: str, method: str | None, k: int | None, proposer: str | None, **kw: Any
) -> list[str]:
    config = build_sglang_speculative_args(Proposal(family, method, k, proposer, kw), target_path="/models/llama")
    return build_sglang_argv(spec(tmp_path, speculative_config=config), 30001, python=PY)


def test_target_only_argv_is_exact(tmp_path: Path) -> None:
    assert build_sglang_argv(spec(tmp_path), 30001, python=PY) == HEAD + BASE


@pytest.mark.parametrize(
    "case",
    [
        (
            "eagle",
            None,
            3,
            "/models/eagle",
            {},
            [
                "--speculative-algorithm",
                "EAGLE",
                "--speculative-draft-model-path",
                "/models/eagle",
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "4",
            ],
        ),
        (
            "eagle",
            "eagle3",
            5,
            "/models/eagle3",
            {"eagle_topk": 8, "num_steps": 3},
            [
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-draft-model-path",
                "/models/eagle3",
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "8",
                "--speculative-num-draft-tokens",
                "6",
            ],
        ),
        (
            "mtp",
            None,
            2,
            None,
            {},
            [
                "--speculative-algorithm",
                "NEXTN",
                "--speculative-draft-model-path",
                "/models/llama",
                "--speculative-num-steps",
                "2",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "3",
            ],
        ),
        (
            "draft_model",
            None,
            4,
            "/models/draft",
            {"accept_threshold_single": 0.5},
            [
                "--speculative-algorithm",
                "STANDALONE",
                "--speculative-draft-model-path",
                "/models/draft",
                "--speculative-num-steps",
                "4",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "5",
                "--speculative-accept-threshold-single",
                "0.5",
            ],
        ),
        (
            "ngram",
            None,
            7,
            None,
            {"ngram_min_match_window_size": 1, "ngram_max_match_window_size": 12, "ngram_match_type": "BFS"},
            [
                "--speculative-algorithm",
                "NGRAM",
                "--speculative-num-draft-tokens",
                "8",
                "--speculative-ngram-min-match-window-size",
                "1",
                "--speculative-ngram-max-match-window-size",
                "12",
                "--speculative-ngram-match-type",
                "BFS",
            ],
        ),
        (
            "dflash",
            None,
            15,
            "/models/dflash",
            {},
            [
                "--speculative-algorithm",
                "DFLASH",
                "--speculative-draft-model-path",
                "/models/dflash",
                "--speculative-num-draft-tokens",
                "16",
            ],
        ),
    ],
)
def test_exact_argv_per_algorithm(tmp_path: Path, case: tuple[Any, ...]) -> None:
    family, method, k, proposer, options, tail = case
    assert candidate(tmp_path, family, method, k, proposer, **options) == HEAD + BASE + tail


def test_parallel_sizes_radix_cache_key_file_and_user_args(tmp_path: Path) -> None:
    launch = spec(
        tmp_path,
        tensor_parallel_size=4,
        pipeline_parallel_size=2,
        data_parallel_size=2,
        disable_prefix_caching=True,
        max_model_len=None,
        engine_args=("--mem-fraction-static", "0.8", "--trust-remote-code"),
    )
    key_file = tmp_path / "key.yaml"
    argv = build_sglang_argv(launch, 30001, command=["sglang-wrapper", "serve"], secrets_file=key_file)
    assert argv == [
        "sglang-wrapper",
        "serve",
        *BASE[:10],
        "--tp-size",
        "4",
        "--pp-size",
        "2",
        "--dp-size",
        "2",
        "--enable-metrics",
        "--disable-radix-cache",
        "--config",
        str(key_file),
        "--mem-fraction-static",
        "0.8",
        "--trust-remote-code",
    ]
    assert "--enable-metrics" not in build_sglang_argv(spec(tmp_path), 1, python=PY, enable_metrics=False)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (("--api-key", "k"), "must not be written"),
        (("--api-key=k",), "must not be written"),
        (("--speculative-num-steps", "3"), "set by specselect from the candidate"),
        (("--tp", "2"), "cannot be repeated"),
        (("--model", "/other"), "cannot be repeated"),
        (("--port=9",), "cannot be repeated"),
        (("--enable-metrics",), "cannot be repeated"),
    ],
)
def test_engine_args_cannot_override_plan_fields(tmp_path: Path, extra: tuple[str, ...], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_sglang_argv(spec(tmp_path, engine_args=extra), 1, python=PY)
    with pytest.raises(ConfigError, match="cannot be repeated"):
        build_sglang_argv(
            spec(tmp_path, disable_prefix_caching=True, engine_args=("--disable-radix-cache",)), 1, python=PY
        )


def test_vllm_only_settings_and_missing_head(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vLLM setting"):
        build_sglang_argv(spec(tmp_path, distributed_executor_backend="ray"), 1, python=PY)
    with pytest.raises(ConfigError, match="no python and no command"):
        build_sglang_argv(spec(tmp_path), 1)
    with pytest.raises(ConfigError, match="not an SGLang speculative argument"):
        speculative_argv({"method": "eagle"})
    assert speculative_argv({"speculative_flag_on": True, "speculative_flag_off": False}) == ["--speculative-flag-on"]
    # vLLM's per-request metrics flag has no SGLang counterpart: ignored, never passed.
    assert build_sglang_argv(spec(tmp_path, per_request_spec_metrics=True), 30001, python=PY) == HEAD + BASE


def test_registry_builds_the_sglang_engine() -> None:
    assert "sglang" in known_engine_kinds()
    engine = get_engine("sglang")(python=PY)
    assert isinstance(engine, SglangEngine) and isinstance(engine, Engine) and engine.kind == "sglang"


def _caps(**launch_flags: bool) -> SglangCapabilities:
    return SglangCapabilities(
        engine_version="0.4.3",
        python=PY,
        device_kind="cuda",
        devices=(),
        memory_budget_mb=1,
        memory_budget_basis="test",
        spec_methods=("eagle",),
        method_hardware={"eagle": "cuda"},
        versions={"sglang": "0.4.3"},
        speculative_algorithms=("EAGLE",),
        algorithm_source="argparse_choices",
        speculative_flags=("--speculative-algorithm", "--speculative-num-steps"),
        launch_flags={flag: launch_flags.get(flag.strip("-").replace("-", "_"), True) for flag in LAUNCH_FLAGS},
        server_endpoints=("/get_server_info",),
        probed_in_s=0.0,
    )


def test_probed_capabilities_check_arguments_before_launch(tmp_path: Path) -> None:
    engine = SglangEngine(PY, caps=_caps(pp_size=False, enable_metrics=False))
    with pytest.raises(ConfigError, match="does not accept --speculative-algorithm NGRAM"):
        engine.speculative_config(Proposal("ngram", None, 4, None))
    with pytest.raises(ConfigError, match="no --speculative-eagle-topk"):
        engine.speculative_config(Proposal("eagle", None, 4, "/d", {"eagle_topk": 2, "num_steps": 2}))
    with pytest.raises(ConfigError, match="does not declare --pp-size"):
        engine.launch(spec(tmp_path, pipeline_parallel_size=2))
    assert "--enable-metrics" not in engine.argv(spec(tmp_path), 1)


# -- life cycle against the stand-in server ---------------------------------------------------------------


def test_an_sglang_without_config_files_refuses_a_key_rather_than_showing_it(tmp_path: Path) -> None:
    old = _caps().model_copy(update={"launch_flags": {**_caps().launch_flags, "--config": False}})
    engine = SglangEngine(sys.executable, caps=old)
    with pytest.raises(ConfigError, match="only from its command line"):
        engine.launch(spec(tmp_path, api_key_env="HOME"))
