"""Servers of one home share vLLM's inspected model classes; launches of one configuration share its compile caches,
and no other configuration ever sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._engines.base import LaunchSpec
from specselect._engines.server import cache_env
from specselect._engines.vllm.sharedcache import launch_cache_key, share_compile_cache, share_model_class_cache


def test_two_servers_see_one_modelinfos_directory_and_keep_their_own_cache_root(tmp_path: Path) -> None:
    shared = tmp_path / "home" / "cache" / "vllm"
    first = share_model_class_cache(tmp_path / "work" / "g0", shared)
    second = share_model_class_cache(tmp_path / "work" / "g1", shared)
    (first / "vllm-model_executor-models-llama-LlamaForCausalLM.json").write_text("{}")
    assert [p.name for p in second.iterdir()] == ["vllm-model_executor-models-llama-LlamaForCausalLM.json"]
    # The link sits where vLLM looks for it: $VLLM_CACHE_ROOT/modelinfos of each server's own cache root.
    assert first == Path(cache_env(tmp_path / "work" / "g0")["VLLM_CACHE_ROOT"]) / "modelinfos"
    assert first.is_symlink() and first.resolve() == (shared / "modelinfos").resolve()
    assert (
        cache_env(tmp_path / "work" / "g0")["VLLM_CACHE_ROOT"] != cache_env(tmp_path / "work" / "g1")["VLLM_CACHE_ROOT"]
    )


def test_a_relaunch_in_the_same_work_dir_keeps_the_link(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    link = share_model_class_cache(tmp_path / "run", shared)
    assert share_model_class_cache(tmp_path / "run", shared) == link and link.is_symlink()


def test_a_relative_run_dir_links_an_absolute_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    link = share_model_class_cache(Path("run"), Path("shared"))
    assert link.is_absolute() and Path(link.readlink()).is_absolute()


def _spec(tmp_path: Path, group: str = "g1_ngram", **fields: object) -> LaunchSpec:
    values: dict[str, object] = {
        "group": group,
        "model_path": Path("/models/smollm2"),
        "served_model_name": "smollm2-135m",
        "dtype": "float32",
        "engine_args": ("--enforce-eager",),
        "env": {"VLLM_CPU_KVCACHE_SPACE": "2"},
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 5},
        "log_path": tmp_path / "logs" / f"{group}.log",
        "run_dir": tmp_path / "work" / group,
    }
    values.update(fields)
    return LaunchSpec(**values)  # type: ignore[arg-type]


ENGINE = "/envs/vllm/bin/python 0.32.0+cpu"


def test_launches_of_one_configuration_have_one_key_wherever_they_run(tmp_path: Path) -> None:
    first = launch_cache_key(_spec(tmp_path), engine=ENGINE)
    later = _spec(tmp_path, port=41234, log_path=tmp_path / "l2.log", run_dir=tmp_path / "work" / "g1_ngram.l1")
    assert launch_cache_key(later, engine=ENGINE) == first
    # The A/A control's second baseline is the baseline's configuration under another name: one configuration.
    assert launch_cache_key(_spec(tmp_path, group="g0_target_only_b"), engine=ENGINE) == first


@pytest.mark.parametrize(
    "change",
    [
        {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}},
        {"speculative_config": None},
        {"engine_args": ()},
        {"env": {"VLLM_CPU_KVCACHE_SPACE": "2", "LD_PRELOAD": "/env/lib/libiomp5.so"}},
        {"dtype": "bfloat16"},
        {"max_model_len": 1024},
        {"disable_prefix_caching": True},
    ],
)
def test_any_change_of_what_the_engine_runs_is_another_configuration(tmp_path: Path, change: dict[str, object]) -> None:
    base = launch_cache_key(_spec(tmp_path), engine=ENGINE)
    assert launch_cache_key(_spec(tmp_path, **change), engine=ENGINE) != base


def test_another_engine_build_is_another_configuration(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert launch_cache_key(spec, engine=ENGINE) != launch_cache_key(spec, engine="/envs/vllm/bin/python 0.33.0")


def test_launches_share_compile_caches_within_a_configuration_and_never_across(tmp_path: Path) -> None:
    shared = tmp_path / "home" / "cache" / "vllm"
    first = share_compile_cache(tmp_path / "work" / "g1", shared, "aaaa")
    later = share_compile_cache(tmp_path / "work" / "g1.l1", shared, "aaaa")
    other = share_compile_cache(tmp_path / "work" / "g2", shared, "bbbb")
    root = Path(cache_env(tmp_path / "work" / "g1")["VLLM_CACHE_ROOT"])
    env = cache_env(tmp_path / "work" / "g1")
    # Where vLLM, Inductor and Triton look: VLLM_CACHE_ROOT/torch_compile_cache, TORCHINDUCTOR_CACHE_DIR, TRITON_...
    assert first == (root / "torch_compile_cache", Path(env["TORCHINDUCTOR_CACHE_DIR"]), Path(env["TRITON_CACHE_DIR"]))
    (first[0] / "5c1e0a9b2d").mkdir()
    assert [p.name for p in later[0].iterdir()] == ["5c1e0a9b2d"]
    assert list(other[0].iterdir()) == []
    assert all(a.resolve() == b.resolve() != c.resolve() for a, b, c in zip(first, later, other, strict=True))
