"""What a cluster run refuses before it starts anything: a plan it cannot spread, a node without the engine."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_plan_validation import _load

from specselect._admission import Admissions
from specselect._engines import EngineSetup
from specselect._runner.blocks import Block
from specselect._runner.cluster.block import BlockWork, check_node
from specselect._runner.cluster.requirements import cluster_problems
from specselect.errors import ConfigError


def _work(python: Path) -> BlockWork:
    none: Any = None
    return BlockWork(
        block=Block("g0_target_only", 0, ("g0_target_only",)),
        loaded=_load({}),
        label="t",
        setup=EngineSetup(kind="vllm", python=python),
        workloads={},
        adm=Admissions((), {}),
        derivation=none,
        targets={},
    )


def test_a_node_with_the_engine_where_the_driver_found_it_runs_the_block() -> None:
    check_node(_work(Path(sys.executable)))


def test_a_node_without_the_engine_environment_names_it_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "home" / "envs" / "vllm-cpu" / "bin" / "python"
    with pytest.raises(ConfigError) as info:
        check_node(_work(missing))
    assert info.value.one_line().startswith("cluster: node ")
    assert f"has no {missing}, which the driver found" in info.value.one_line()
    assert "same SPECSELECT_HOME on every node" in info.value.one_line()


def test_a_cluster_plan_with_a_fixed_port_is_refused_before_anything_starts() -> None:
    loaded = _load({"engine": {"port": 8000}, "cluster": {"backend": "ray", "address": "auto"}})
    with pytest.raises(ConfigError) as info:
        cluster_problems(loaded, launches_servers=True)
    assert info.value.one_line() == (
        "p.toml: engine.port: [engine] port = 8000: blocks that share a node would start their servers on the same "
        "port (fix: set port = 0 (each server picks a free port), or max_parallel_groups = 1 in [cluster])"
    )


def test_a_cluster_plan_for_an_endpoint_that_is_already_running_is_refused() -> None:
    loaded = _load({"cluster": {"backend": "ray", "address": "auto"}})
    with pytest.raises(ConfigError, match="starts no server"):
        cluster_problems(loaded, launches_servers=False)


def test_a_cluster_plan_that_names_no_cluster_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigError) as info:
        cluster_problems(_load({"cluster": {"backend": "ray"}}), launches_servers=True)
    assert info.value.one_line().startswith('p.toml: cluster.address: [cluster] backend = "ray" names no cluster')
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # the environment names it: on to the next check
    with pytest.raises(ConfigError, match="starts no server"):
        cluster_problems(_load({"cluster": {"backend": "ray"}}), launches_servers=False)
