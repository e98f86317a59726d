"""Blocks leased from a Ray cluster.

A block is one Ray task. The task is a lease, not the server: it holds the plan's per-group resources on one node
(`num_gpus`, `num_cpus`, custom resources) and runs the block there as a local run would, the engine a child
process of the task's worker (with the lease's `CUDA_VISIBLE_DEVICES`, which Ray sets for a task holding GPUs).
vLLM is never run inside a Ray actor. A task is not retried by Ray: a block whose node dies comes back as
`BlockLost`, and the driver places it again (`ClusterRounds`).

Ray is optional (`pip install 'specselect[ray]'`) and imported only here, only when a plan asks for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from specselect._plan.cluster import ClusterConfig
from specselect._runner.cluster.block import BlockDone, BlockWork, run_block_in_scratch
from specselect._runner.cluster.driver import BlockLost
from specselect._runner.cluster.requirements import import_ray
from specselect._runner.progress import Progress

__all__ = ["InProcessLeases", "RayLeases"]


class _NodeProgress:
    """Progress on a node: lines on the worker's output, which Ray shows on the driver's console with the worker's
    node address, so the console shows what each node is doing."""

    def __init__(self, node: str) -> None:
        self.node = node

    def _line(self, text: str) -> None:
        print(f"[node {self.node[:12]}] {text}", file=sys.stderr, flush=True)

    def stage(self, text: str) -> None:
        self._line(text)

    def info(self, text: str) -> None:
        self._line(text)

    def warn(self, text: str) -> None:
        self._line(f"warning: {text}")

    def requests(self, scenario: str, done: int, total: int) -> None:
        if done == total:
            self._line(f"{scenario}: {done}/{total} requests")


def _run_on_node(work: BlockWork) -> BlockDone:
    node = import_ray().get_runtime_context().get_node_id()
    return run_block_in_scratch(work, _NodeProgress(node), node_id=node)


_LOST_ERRORS = ("NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "OutOfMemoryError", "RaySystemError")


@dataclass
class RayLeases:
    """Blocks as Ray tasks holding `cluster`'s per-group resources; at most `max_parallel_groups` at once."""

    cluster: ClusterConfig
    progress: Progress
    node_lines: bool = True
    """Show the nodes' progress lines (and Ray's own) on this console; off for a silent run (`--json`, the API),
    whose standard output is only its result."""
    poll_s: float = 5.0
    """How often a wait checks that some live node can still hold a block (else the blocks waiting are lost)."""
    _ray: Any = field(default=None, init=False)

    def connect(self) -> None:
        """Join the plan's cluster (or RAY_ADDRESS's); with address "local", start a one-node cluster for the run."""
        ray = self._ray = import_ray()
        if ray.is_initialized():
            return
        address = self.cluster.address or os.environ.get("RAY_ADDRESS")
        if address == "local":
            # Ray (2.60) resolves a loopback node address to the host's and listens on its interfaces, with its
            # token authentication on: the plan asked for this cluster by name (docs/cluster.md).
            ray.init(address="local", include_dashboard=False, log_to_driver=self.node_lines)
        else:
            ray.init(address=address, log_to_driver=self.node_lines)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.progress.info(f"ray: {len(nodes)} node(s) alive, resources {ray.cluster_resources()}")

    def close(self) -> None:
        """Leave the cluster (a "local" one stops with it)."""
        if self._ray is not None and self._ray.is_initialized():
            self._ray.shutdown()

    def _task(self) -> Any:
        c = self.cluster
        return self._ray.remote(_run_on_node).options(
            num_cpus=c.cpus_per_group,
            num_gpus=c.gpus_per_group,
            resources=dict(c.resources_per_group),
            max_retries=0,
            retry_exceptions=False,
        )

    def run(self, works: Sequence[BlockWork]) -> Iterator[BlockDone | BlockLost]:
        """Submit the blocks (at most `max_parallel_groups` in flight) and yield each as it finishes."""
        if self._ray is None:
            self.connect()
        ray, task = self._ray, self._task()
        limit = self.cluster.max_parallel_groups or len(works)
        queue, running = list(works), dict[Any, BlockWork]()
        try:
            while queue or running:
                while queue and len(running) < limit:
                    work = queue.pop(0)
                    running[task.remote(work)] = work
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.poll_s)
                for ref in ready:
                    yield self._outcome(ref, running.pop(ref))
                if not ready and not self._feasible():
                    for ref, work in list(running.items()):
                        ray.cancel(ref, force=True)
                        yield BlockLost(work, f"no live node offers what a block needs ({self._needs()})")
                    queue, running = [], {}
        finally:
            for ref in running:
                ray.cancel(ref)

    def _needs(self) -> dict[str, float]:
        c = self.cluster
        return {
            "CPU": c.cpus_per_group,
            **({"GPU": float(c.gpus_per_group)} if c.gpus_per_group else {}),
            **c.resources_per_group,
        }

    def _feasible(self) -> bool:
        """Whether a live node has the resources of one block in total (busy or not)."""
        needs = self._needs()
        return any(
            all(node.get("Resources", {}).get(key, 0.0) >= amount for key, amount in needs.items())
            for node in self._ray.nodes()
            if node.get("Alive")
        )

    def _outcome(self, ref: Any, work: BlockWork) -> BlockDone | BlockLost:
        try:
            done: BlockDone = self._ray.get(ref)
        except Exception as exc:
            if type(exc).__name__ in _LOST_ERRORS or any(t.__name__ in _LOST_ERRORS for t in type(exc).__mro__):
                return BlockLost(work, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            raise
        return done


@dataclass
class InProcessLeases:
    """Blocks run one after another in this process, each in its own scratch tree (the cluster's path without a
    cluster: what `ClusterRounds` does with the blocks is the same)."""

    progress: Progress

    def run(self, works: Sequence[BlockWork]) -> Iterator[BlockDone | BlockLost]:
        for work in works:
            yield run_block_in_scratch(work, self.progress)
