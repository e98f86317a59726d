"""What every stage of one run shares: the plan, the results layout, the engine and its setup, the workloads,
the run's records in memory and the progress sink."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specselect._admission.gather import Gathered
from specselect._artifacts.layout import RunLayout
from specselect._engines import Engine, EngineSetup, GroupContext
from specselect._evidence.pipeline import InMemoryRecords
from specselect._plan import Candidate, LoadedPlan
from specselect._runner.progress import Progress
from specselect.records.assets import ResolvedModel
from specselect.records.evidence.prediction import ProposerCost
from specselect.records.workloads import Workload

__all__ = ["RunContext", "group_context"]


def group_context(
    loaded: LoadedPlan,
    setup: EngineSetup,
    targets: Mapping[str, ResolvedModel],
    cand: Candidate,
    *,
    verify_weights: bool = False,
) -> GroupContext:
    """A group on its own track, as the engine sees it (`verify_weights`: hash big checkpoints in full)."""
    track = loaded.plan.track_of(cand.name)
    return GroupContext(
        candidate=cand,
        engine=loaded.plan.engine,
        target_config=track.target,
        target=targets.get(track.name),
        setup=setup,
        verify_weights=verify_weights,
    )


@dataclass(frozen=True)
class RunContext:
    """One run's shared state (the records are filled as groups are measured or kept)."""

    loaded: LoadedPlan
    layout: RunLayout
    engine: Engine
    setup: EngineSetup
    workloads: dict[str, Workload]
    records: InMemoryRecords
    progress: Progress
    proposer_costs: Mapping[str, ProposerCost] = field(default_factory=dict)
    """Candidate -> its draft model's cost per drafted token, for the speedup prediction (from admission)."""
    targets: Mapping[str, ResolvedModel] = field(default_factory=dict)
    """Track (its baseline's name) -> the resolved target preflight found."""
    gathered: Mapping[str, Gathered] = field(default_factory=dict)
    """Candidate -> what admission resolved for it (method, proposer)."""
    verify_weights: bool = False

    def group_context(self, cand: Candidate) -> GroupContext:
        """A group on its own track, as the engine sees it."""
        return group_context(self.loaded, self.setup, self.targets, cand, verify_weights=self.verify_weights)
