"""A node refuses a block whose engine or target is not where the driver found it, before starting anything."""

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
from specselect.errors import ConfigError


def _work(python: Path) -> BlockWork:
    none: Any = None
    return BlockWork(
        block=Block("g0_target_only", 0, 0, ("g0_target_only",)),
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
