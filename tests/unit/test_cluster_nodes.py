"""A cluster run's node table: launches per node and each node's baseline rate against the median node's."""

from __future__ import annotations

from types import SimpleNamespace

from specselect._measure.hostfacts import collect_host_info
from specselect._runner.cluster.nodes import cluster_nodes
from specselect.records.group import GroupLaunch, GroupResult, ScenarioRun
from specselect.records.results import NodeFacts
from specselect.records.server import LaunchRecord

HOST = collect_host_info()


def _run(launch: int, rate: float, scenario: str = "w-c1") -> ScenarioRun:
    summary = SimpleNamespace(output_throughput_tok_s=rate)
    return ScenarioRun.model_construct(scenario=scenario, status="completed", summary=summary, launch=launch)


STARTED = LaunchRecord.model_construct()


def _group(name: str, role: str, nodes: list[str], rates: list[float]) -> GroupResult:
    later = tuple(
        GroupLaunch.model_construct(index=i, node=nodes[i], scenarios=(_run(i, rates[i]),), launch=STARTED)
        for i in range(1, len(nodes))
    )
    return GroupResult.model_construct(
        group=name, role=role, node=nodes[0], scenarios=(_run(0, rates[0]),), relaunches=later, launch=STARTED
    )


def _facts(*nodes: str) -> dict[str, NodeFacts]:
    return {n: NodeFacts(node_id=n, hostname=f"host-{n}", host=HOST) for n in nodes}


def test_a_node_whose_baseline_runs_at_70_percent_of_the_median_is_flagged() -> None:
    groups = [
        _group("base", "baseline", ["a", "b", "c"], [20.0, 21.0, 14.0]),
        _group("g1", "candidate", ["a", "b", "c"], [30.0, 31.0, 21.0]),
    ]
    nodes = cluster_nodes(groups, _facts("a", "b", "c"), outlier=1.25)
    assert {n: (v.launches, v.baseline_launches) for n, v in nodes.items()} == {"a": (2, 1), "b": (2, 1), "c": (2, 1)}
    assert {n: round(v.baseline_rate_ratio or 0, 3) for n, v in nodes.items()} == {"a": 1.0, "b": 1.05, "c": 0.7}
    assert [n for n, v in nodes.items() if v.outlier] == ["c"]


def test_a_spread_within_the_factor_flags_no_node() -> None:
    groups = [_group("base", "baseline", ["a", "b", "c"], [20.0, 21.0, 18.0])]
    assert not any(v.outlier for v in cluster_nodes(groups, _facts("a", "b", "c"), outlier=1.25).values())


def test_one_node_has_nothing_to_be_compared_with() -> None:
    groups = [_group("base", "baseline", ["a", "a"], [20.0, 10.0])]
    (only,) = cluster_nodes(groups, _facts("a"), outlier=1.25).values()
    assert (only.launches, only.baseline_rate_ratio, only.outlier) == (2, None, False)


def test_a_group_whose_block_launched_nothing_is_no_launch_of_its_node() -> None:
    ran = _group("base", "baseline", ["a", "a"], [20.0, 21.0])
    skipped = GroupResult.model_construct(group="base.block2", role="baseline", node="a", scenarios=(), relaunches=())
    refused = GroupResult.model_construct(group="g2", role="candidate", node="a", scenarios=(), relaunches=())
    (only,) = cluster_nodes([ran, skipped, refused], _facts("a"), outlier=1.25).values()
    assert (only.launches, only.baseline_launches) == (2, 2)
