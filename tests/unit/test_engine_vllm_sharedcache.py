"""Servers of one home share vLLM's inspected model classes and nothing else of their caches."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._engines.server import cache_env
from specselect._engines.vllm.sharedcache import share_model_class_cache


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
