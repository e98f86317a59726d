"""One block on one node: its launches back to back in a scratch results tree, then everything it wrote sent
back with the groups and the node's facts.

The node runs what a local run runs (`launch_group`, the engine started as the node's child process); only the
results tree is the node's own, so nothing depends on a file system shared with the machine that drives the run.
The driver writes the files into the run's tree and reads their records (`ClusterRounds`).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specselect._admission import Admissions
from specselect._artifacts.layout import RunLayout
from specselect._engines import EngineSetup, create_engine
from specselect._engines.probing import leased_setup
from specselect._evidence.pipeline import InMemoryRecords
from specselect._measure.hostfacts import collect_host_info
from specselect._plan import LoadedPlan
from specselect._runner.blocks import Block
from specselect._runner.context import RunContext
from specselect._runner.group import GroupInterrupted
from specselect._runner.launch import launch_group
from specselect._runner.progress import Progress
from specselect._runner.schedule_candidate import DerivationInputs
from specselect.errors import ConfigError
from specselect.records.assets import ResolvedModel
from specselect.records.evidence.prediction import ProposerCost
from specselect.records.group import GroupResult
from specselect.records.results import NodeFacts
from specselect.records.workloads import Workload

__all__ = ["RESULT_DIRS", "BlockDone", "BlockWork", "check_node", "run_block", "run_block_in_scratch"]

RESULT_DIRS = ("records", "logs")
"""What a block writes that belongs to the run (the engine's work directory stays on the node)."""


@dataclass(frozen=True)
class BlockWork:
    """Everything a node needs to run one block: the plan, the frozen workloads, what preflight and admission
    resolved, and the block's groups as they stood before it."""

    block: Block
    loaded: LoadedPlan
    label: str
    setup: EngineSetup
    workloads: Mapping[str, Workload]
    adm: Admissions
    derivation: DerivationInputs
    targets: Mapping[str, ResolvedModel]
    proposer_costs: Mapping[str, ProposerCost] = field(default_factory=dict)
    groups: Mapping[str, GroupResult] = field(default_factory=dict)
    """The block's groups before it (empty in round 0)."""
    verify_weights: bool = False


@dataclass(frozen=True)
class BlockDone:
    """What a block produced: its groups with the block's launches, the files they wrote, and where it ran."""

    block: Block
    groups: dict[str, GroupResult]
    files: dict[str, bytes]
    """Path relative to the run root -> content, for every file under `RESULT_DIRS`."""
    node: NodeFacts
    interrupted: str | None = None
    """The group whose launch was interrupted (the launches after it did not run)."""


def check_node(work: BlockWork) -> None:
    """The engine and the targets must be where the driver found them; ConfigError naming the first that is not."""
    paths = (work.setup.python, *(t.path for t in work.targets.values()))
    missing = next((p for p in paths if p is not None and not Path(p).exists()), None)
    if missing is not None:
        raise ConfigError(
            f"node {socket.gethostname()} has no {missing}, which the driver found",
            location="cluster",
            fix="run `specselect setup` with the same SPECSELECT_HOME on every node (or share it); a local model "
            "directory must exist at the same path on every node",
        )


def run_block(work: BlockWork, root: Path, progress: Progress, node_id: str = "local") -> BlockDone:
    """Run the block's launches in order in the results tree `root`; an interrupted launch ends the block."""
    check_node(work)
    layout = RunLayout(root)
    run = RunContext(
        work.loaded,
        layout,
        create_engine(work.loaded.plan.engine),
        leased_setup(work.setup),
        dict(work.workloads),
        InMemoryRecords(),
        progress,
        proposer_costs=work.proposer_costs,
        targets=work.targets,
        gathered=work.adm.gathered,
        verify_weights=work.verify_weights,
    )
    groups = dict(work.groups)
    interrupted = None
    for name in work.block.launches:
        try:
            groups[name] = launch_group(
                run, work.adm, work.derivation, groups, work.loaded.plan.group(name), work.block.round
            )
        except GroupInterrupted as stop:
            groups[name], interrupted = stop.result, name
            break
    ran = {name: groups[name] for name in work.block.launches if name in groups}
    node = NodeFacts(node_id=node_id, hostname=socket.gethostname(), host=collect_host_info())
    return BlockDone(work.block, ran, written_files(layout), node, interrupted)


def run_block_in_scratch(work: BlockWork, progress: Progress, node_id: str = "local") -> BlockDone:
    """`run_block` in a temporary results tree of this node, removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="specselect-block-"))
    try:
        return run_block(work, scratch / work.label, progress, node_id)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def written_files(layout: RunLayout) -> dict[str, bytes]:
    """Every file under the result directories of `layout`, by its path relative to the run root."""
    return {
        layout.rel(path): path.read_bytes()
        for top in RESULT_DIRS
        for path in sorted((layout.root / top).rglob("*"))
        if path.is_file()
    }
