"""The [cluster] table: local by default and invisible in the plan hash; Ray settings only with backend = "ray"."""

from __future__ import annotations

from typing import Any

import pytest
from test_plan_validation import _load, problems


def test_a_plan_without_cluster_runs_locally_and_keeps_its_hash() -> None:
    plan = _load({}).plan
    assert plan.cluster.backend == "local" and plan.cluster.is_local
    assert "cluster" not in plan.model_dump()
    assert _load({"cluster": {"backend": "local"}}).plan.plan_hash == plan.plan_hash


def test_a_ray_table_is_read_and_changes_the_hash() -> None:
    plan = _load(
        {
            "cluster": {
                "backend": "ray",
                "address": "ray://head.example:10001",
                "gpus_per_group": 2,
                "resources_per_group": {"specselect_node": 1.0},
                "max_parallel_groups": 8,
            }
        }
    ).plan
    assert (plan.cluster.gpus_per_group, plan.cluster.max_parallel_groups) == (2, 8)
    assert plan.cluster.resources_per_group == {"specselect_node": 1.0}
    assert plan.model_dump()["cluster"] == {
        "backend": "ray",
        "address": "ray://head.example:10001",
        "gpus_per_group": 2,
        "resources_per_group": {"specselect_node": 1.0},
        "max_parallel_groups": 8,
    }
    assert plan.plan_hash != _load({}).plan.plan_hash


CASES: list[tuple[dict[str, Any], str]] = [
    (
        {"backend": "slurm"},
        "cluster.backend: 'slurm' is not one of 'local', 'ray' (fix: use one of: 'local', 'ray')",
    ),
    (
        {"gpus_per_group": 1},
        'cluster.gpus_per_group: gpus_per_group only apply with backend = "ray" (fix: set backend = "ray", or remove '
        "them)",
    ),
    (
        {"backend": "ray", "address": "http://user:secret@head:8265"},
        'cluster.address: \'http://user:secret@head:8265\' is not a Ray address (fix: write "auto", "local", '
        '"HOST:PORT" or "ray://HOST:PORT" (no credentials: they come from the environment))',
    ),
    (
        {"backend": "ray", "resources_per_group": {"GPU": 1.0}},
        "cluster.resources_per_group.GPU: 'GPU' is one of Ray's own resources (fix: use gpus_per_group / "
        "cpus_per_group for GPUs and CPUs; resources_per_group is for custom ones)",
    ),
    (
        {"backend": "ray", "cpus_per_group": 0.0},
        "cluster.cpus_per_group: must be > 0 (got 0.0) (fix: use a value > 0)",
    ),
]


@pytest.mark.parametrize(("table", "expected"), CASES, ids=[c[1].split(":")[0] + f"-{i}" for i, c in enumerate(CASES)])
def test_cluster_rule_gives_exact_problem_line(table: dict[str, Any], expected: str) -> None:
    assert problems({"cluster": table}) == [f"p.toml: {expected}"]
