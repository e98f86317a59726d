"""The rounds of a run as waves of blocks on a cluster, merged into the one results tree as they finish.

Round 0 is one wave: every track's block (its baseline's first launch, then its candidates'). The rounds up to
each look are the next waves, for the candidates the look runs on. A block runs on one node (`BlockLeases`), so
a candidate's launch j is paired with the baseline launch j measured on the same machine; which node ran a launch
is recorded with it. The driver writes each finished block's files and groups (`RunGroups.save`), and before a
look and the conclusion reads the records back from the tree in plan order, so the evidence is the one a local
run would draw from the same records.

`--resume`: a block whose launches are all kept from the earlier run is not run again; a block with any launch
missing runs again whole, its kept launches replaced, so no pair spans two nodes. A block whose node was lost
is placed again once; lost twice, the run stops (the manifest says which groups are unfinished) and `--resume`
redoes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from specselect._artifacts.layout import RunLayout
from specselect._common.fileio import atomic_write_bytes
from specselect._core.status import RunStatus
from specselect._evidence.pipeline import InMemoryRecords
from specselect._runner.blocks import Block, round_blocks, wave_blocks
from specselect._runner.cluster.block import RESULT_DIRS, BlockDone, BlockWork
from specselect._runner.launch import RunGroups
from specselect._runner.progress import Progress
from specselect._runner.resume import keep_records, resumable_group
from specselect.errors import EngineError
from specselect.records.group import GroupResult
from specselect.records.results import Manifest, NodeFacts

__all__ = ["LOST_TWICE", "BlockLeases", "BlockLost", "ClusterRounds"]

LOST_TWICE = 2
"""How many times a block is placed before the run stops on it."""


@dataclass(frozen=True)
class BlockLost:
    """A block whose node (or worker) died before it finished: nothing it measured came back."""

    work: BlockWork
    why: str


class BlockLeases(Protocol):
    """Where blocks run: each on one node, several at once."""

    def run(self, works: Sequence[BlockWork]) -> Iterator[BlockDone | BlockLost]:
        """Run every block; yield each one's outcome as it finishes."""


def _launch_of(group: GroupResult | None, index: int) -> bool:
    if group is None:
        return False
    return index == 0 or any(launch.index == index for launch in group.relaunches)


def _before(group: GroupResult, index: int) -> GroupResult:
    """The group without its launches from `index` on (a block that runs again replaces them)."""
    return group.model_copy(update={"relaunches": tuple(r for r in group.relaunches if r.index < index)})


def _with_launch(current: GroupResult, ran: GroupResult, index: int) -> GroupResult:
    """`current` with launch `index` as the block ran it (launches ordered by index)."""
    new = [r for r in ran.relaunches if r.index == index]
    kept = [r for r in current.relaunches if r.index != index]
    return current.model_copy(update={"relaunches": tuple(sorted((*kept, *new), key=lambda r: r.index))})


def _safe_rel(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] not in RESULT_DIRS:
        raise EngineError(f"a block sent back a file outside the run's records and logs: {rel!r}")
    return path


@dataclass
class ClusterRounds:
    """Round 0 and the waves after it, for one run."""

    groups: RunGroups
    leases: BlockLeases
    progress: Progress
    label: str
    previous: Manifest | None = None
    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    """Node id -> the node's facts, for every node that ran a block."""

    @property
    def layout(self) -> RunLayout:
        return self.groups.run.layout

    def work(self, block: Block) -> BlockWork:
        """What a node needs to run `block`."""
        run, results = self.groups.run, self.groups.results
        return BlockWork(
            block=block,
            loaded=run.loaded,
            label=self.label,
            setup=run.setup,
            workloads=run.workloads,
            adm=self.groups.adm,
            derivation=self.groups.derivation,
            targets=run.targets,
            proposer_costs=run.proposer_costs,
            groups={n: _before(results[n], block.round) for n in block.launches if block.round and n in results},
            verify_weights=run.verify_weights,
        )

    def first_round(self) -> None:
        """Round 0: every track's block; blocks kept whole from an earlier run are not run again."""
        plan = self.groups.run.loaded.plan
        members = [c.name for c in plan.groups if not c.is_baseline]
        for cand in plan.groups:
            earlier = resumable_group(self.layout, cand.name, self.previous)
            if earlier is not None:
                self.groups.results[cand.name] = earlier
        blocks = round_blocks(plan, members, 0, keep_empty=True)
        todo = [b for b in blocks if not all(n in self.groups.results for n in b.launches)]
        for block in todo:
            for name in block.launches:
                self.groups.results.pop(name, None)
        self.groups.kept.extend(n for n in (c.name for c in plan.groups) if n in self.groups.results)
        for name in self.groups.kept:
            self.progress.info(f"{name}: kept from the earlier run ({self.groups.results[name].run_status.value})")
        self.run_blocks(todo)

    def wave(self, active: Sequence[str], start: int, end: int) -> str | None:
        """Rounds `start` .. `end` - 1 of the `active` candidates, their blocks at once (`RoundLoop.wave`)."""
        plan, results = self.groups.run.loaded.plan, self.groups.results
        blocks = wave_blocks(plan, active, start, end)
        completed = [b for b in blocks if all(results[n].run_status == RunStatus.COMPLETED for n in b.launches)]
        self.run_blocks([b for b in completed if not all(_launch_of(results[n], b.round) for n in b.launches)])
        return None

    def run_blocks(self, blocks: Sequence[Block]) -> None:
        """Run `blocks` on the cluster, placing a lost one again; merge each as it finishes."""
        attempts = dict.fromkeys(blocks, 0)
        pending = list(blocks)
        while pending:
            for block in pending:
                attempts[block] += 1
                self.progress.info(f"block {_name(block)}: {', '.join(block.launches)} (placement {attempts[block]})")
            lost: list[Block] = []
            for outcome in self.leases.run([self.work(b) for b in pending]):
                if isinstance(outcome, BlockLost):
                    self.progress.warn(f"block {_name(outcome.work.block)} lost: {outcome.why}")
                    lost.append(outcome.work.block)
                else:
                    self.merge(outcome)
            failed = [b for b in lost if attempts[b] >= LOST_TWICE]
            if failed:
                raise EngineError(
                    f"block {_name(failed[0])} was lost {LOST_TWICE} times (its node or worker died); the blocks "
                    "that finished are kept",
                    location=str(self.layout.root),
                    fix="continue with --resume once the cluster is healthy",
                )
            pending = lost

    def merge(self, done: BlockDone) -> None:
        """Write a finished block's files into the run's tree, then its groups (with their records)."""
        for rel, data in done.files.items():
            atomic_write_bytes(self.layout.root / _safe_rel(rel), data)
        self.nodes[done.node.node_id] = done.node
        index = done.block.round
        for name, ran in done.groups.items():
            current = self.groups.results.get(name)
            result = ran if index == 0 or current is None else _with_launch(current, ran, index)
            self.groups.save(name, _on_node(result, index, done.node.node_id))
        where = f"{done.node.hostname} ({done.node.node_id[:12]})"
        stopped = f", interrupted at {done.interrupted}" if done.interrupted else ""
        self.progress.info(f"block {_name(done.block)} done on {where}{stopped}")

    def reread_records(self) -> None:
        """The run's records from the tree, in plan order (as a local run holds them)."""
        records = InMemoryRecords()
        for cand in self.groups.run.loaded.plan.groups:
            group = self.groups.results.get(cand.name)
            if group is not None:
                keep_records(self.layout, group, records)
        self.groups.run = dataclasses.replace(self.groups.run, records=records)


def _name(block: Block) -> str:
    return f"{block.track}@round{block.round + 1}"


def _on_node(group: GroupResult, index: int, node: str) -> GroupResult:
    """The group with launch `index` marked as run on `node`."""
    if index == 0:
        return group.model_copy(update={"node": node})
    relaunches = tuple(r.model_copy(update={"node": node}) if r.index == index else r for r in group.relaunches)
    return group.model_copy(update={"relaunches": relaunches})
