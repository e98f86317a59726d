"""Each node of a cluster run: what it ran, and its baseline's rate against the other nodes' (an outlier is
flagged, not dropped: every pair stays within its node, so a slow node slows both sides of its pairs)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from specselect.records.group import GroupResult, ScenarioRun
from specselect.records.results import ClusterNode, NodeFacts

__all__ = ["cluster_nodes"]


def _launch_nodes(group: GroupResult) -> dict[int, str | None]:
    """Launch index -> its node, for the launches that started a server (a skipped or refused group's block ran
    on a node too, but launched nothing there)."""
    lives = ((0, group), *((r.index, r) for r in group.relaunches))
    return {index: life.node for index, life in lives if life.launch is not None}


def _baseline_rates(groups: Sequence[GroupResult]) -> dict[tuple[str, str], list[float]]:
    """(node, baseline scenario) -> the output rates its completed baseline launches measured."""
    rates: dict[tuple[str, str], list[float]] = {}
    for group in (g for g in groups if g.role == "baseline"):
        nodes = _launch_nodes(group)
        for run in group.all_scenario_runs():
            node, rate = nodes.get(run.launch), _rate(run)
            if node is not None and rate is not None:
                rates.setdefault((node, f"{group.group}/{run.scenario}"), []).append(rate)
    return rates


def _rate(run: ScenarioRun) -> float | None:
    if run.status != "completed" or run.summary is None:
        return None
    return run.summary.output_throughput_tok_s


def _ratios(rates: Mapping[tuple[str, str], list[float]]) -> dict[str, float]:
    """Node -> the median over scenarios of its median rate over the median node's median rate."""
    per_node: dict[str, list[float]] = {}
    for scenario in {s for _, s in rates}:
        medians = {node: statistics.median(v) for (node, s), v in rates.items() if s == scenario}
        if len(medians) < 2:
            continue
        middle = statistics.median(medians.values())
        for node, value in medians.items():
            per_node.setdefault(node, []).append(value / middle)
    return {node: statistics.median(values) for node, values in per_node.items()}


def cluster_nodes(
    groups: Sequence[GroupResult], facts: Mapping[str, NodeFacts], outlier: float
) -> dict[str, ClusterNode]:
    """Every node that ran a block, with its launches, its baseline's rate ratio and whether it is an outlier."""
    lives = [n for g in groups for n in _launch_nodes(g).values() if n is not None]
    base = [n for g in groups if g.role == "baseline" for n in _launch_nodes(g).values() if n is not None]
    ratios = _ratios(_baseline_rates(groups))
    out: dict[str, ClusterNode] = {}
    for node, fact in facts.items():
        ratio = ratios.get(node)
        out[node] = ClusterNode(
            **dict(fact),
            launches=lives.count(node),
            baseline_launches=base.count(node),
            baseline_rate_ratio=ratio,
            outlier=ratio is not None and not 1 / outlier <= ratio <= outlier,
        )
    return out
