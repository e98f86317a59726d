"""The one loop that runs a design's rounds, for `specselect run` and `specselect check` alike.

Round j launches every active group once, in the design's order (`evidence.rounds.design.round_order`); launch
j of a group is its launch in round j, so a candidate's launch j is paired with its baseline's launch j. At each
look but the last the evidence says which candidates run on (`Evidence.plan`); the rounds to the next look start
only when they fit the plan's `sequential_budget_s`. A launch that already exists (`--resume`) is not run again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specselect._core.status import RunStatus
from specselect._evidence.rounds.design import TrackRound, round_order
from specselect._plan import Plan
from specselect._runner.progress import Progress
from specselect.records.evidence.rounds import RoundsPlan
from specselect.records.group import GroupResult

__all__ = ["Fits", "Launch", "Look", "RoundLoop", "RoundsOutcome", "Wave", "first_round_order", "track_rounds"]

Launch = Callable[[str, int], GroupResult]
"""Run launch `index` of group `name` (its first launch when 0) and return the group with it."""
Look = Callable[[], RoundsPlan | None]
"""The rule's plan at a look, from every group measured so far."""
Fits = Callable[[Sequence[str], int, int], str | None]
"""Why rounds `start` .. `end` - 1 of these groups do not fit the time budget, or None."""
Wave = Callable[[Sequence[str], int, int], str | None]
"""Run rounds `start` .. `end` - 1 of these candidates at once (a cluster's blocks); the first group whose launch
did not complete, or None."""


def track_rounds(plan: Plan, members: Sequence[str]) -> tuple[TrackRound, ...]:
    """The plan's tracks with the given members (in plan order), for `round_order`."""
    wanted = set(members)
    return tuple(
        TrackRound(baseline=track.name, members=tuple(m for m in track.members if m in wanted)) for track in plan.tracks
    )


@dataclass(frozen=True)
class RoundsOutcome:
    """How the rounds ended."""

    rounds_done: int
    stop: str | None = None
    """Why rounds were left out while pairs were open (the time budget); None when the design ran out."""
    broken: str | None = None
    """With `stop_on_failure`: the group whose latest launch did not complete."""


@dataclass
class RoundLoop:
    """Rounds `start` .. the last look of `looks`, for the `active` candidates of `plan`."""

    plan: Plan
    launch: Launch
    progress: Progress
    look: Look | None = None
    fits: Fits | None = None
    reverse_first: bool = False
    stop_on_failure: bool = False
    wave: Wave | None = None
    """Runs the rounds between two looks together instead of one after another (`runner.cluster`)."""

    def one_round(self, active: Sequence[str], index: int) -> str | None:
        """Launch `index` of every group in the round; with `stop_on_failure` the first that failed."""
        for name in round_order(track_rounds(self.plan, active), index, reverse_first=self.reverse_first):
            group = self.launch(name, index)
            life = group.relaunches[-1] if index and group.relaunches else group
            if self.stop_on_failure and life.run_status != RunStatus.COMPLETED:
                return name
        return None

    def continuing(self, active: Sequence[str], done: int) -> tuple[str, ...]:
        """The candidates the rule runs on after the look at `done` rounds."""
        plan = self.look() if self.look is not None else None
        if plan is None:
            return tuple(active)
        self.progress.info(
            f"look {(plan.look or 0) + 1} after {done} rounds ({plan.level * 100:.4g}% intervals): "
            + (f"{', '.join(plan.continuing)} run on" if plan.continuing else plan.stop or "nothing open")
        )
        return tuple(name for name in active if name in plan.continuing)

    def run(self, active: Sequence[str], *, start: int, looks: Sequence[int]) -> RoundsOutcome:
        """Run the rounds from `start` (rounds before it are done) through the last look."""
        done = start
        for k, target in enumerate(looks):
            if done >= target:
                continue
            if k > 0 and done == looks[k - 1]:
                active = self.continuing(active, done)
                if not active:
                    return RoundsOutcome(done)
                why = self.fits(_with_baselines(self.plan, active), done, target) if self.fits else None
                if why is not None:
                    self.progress.info(f"rounds: {why}")
                    return RoundsOutcome(done, stop=why)
            if self.wave is not None:
                broken = self.wave(active, done, target)
                if broken is not None:
                    return RoundsOutcome(done, broken=broken)
                done = target
            while done < target:
                broken = self.one_round(active, done)
                if broken is not None:
                    return RoundsOutcome(done, broken=broken)
                done += 1
        return RoundsOutcome(done)


def _with_baselines(plan: Plan, active: Sequence[str]) -> tuple[str, ...]:
    return round_order(track_rounds(plan, active), 0)


def first_round_order(plan: Plan) -> tuple[str, ...]:
    """Round 0 of a run: every group of the plan, each track's baseline before its members (a candidate's first
    launch reads its baseline's records of that round), tracks without members included."""
    members = [c.name for c in plan.groups if not c.is_baseline]
    return round_order(track_rounds(plan, members), 0, keep_empty=True)
