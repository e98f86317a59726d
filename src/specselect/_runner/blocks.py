"""Blocks and their placement: how a run's rounds spread over several nodes without pairing across machines.

A block is the launches one node runs back to back: a track's baseline and the candidates paired with it, in one
round, in the round's order (`evidence.rounds.design`). Every candidate launch is paired with the baseline launch
of its own block, so raw rates are only ever compared within one node. With `[run] candidates_per_block` a
track's candidates are split over several tracks (`specselect._plan.tracks`), each with its own baseline launch:
more blocks run at once, at the price of one more baseline launch per extra block.

Blocks between two looks are independent of each other, so they form a wave that runs in parallel; the next
wave starts after the look (the evidence decides who runs on). Round 0 is a wave of its own: a candidate's later
launches reuse what its first launch derived (a schedule, the parity pass's reference).

`place` puts a wave's blocks on `slots` parallel leases, longest block first, each on the slot that frees up
first (list scheduling, as a queue of leases behaves when blocks are submitted in that order). Its makespan is at
most 4/3 of the best possible one (Graham's bound for longest-first); the idle share it reports is what the wave
loses to imbalance and to slots it has no block for.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specselect._evidence.rounds.design import block_order
from specselect._plan import Plan
from specselect._runner.rounds import track_rounds

__all__ = ["Block", "Placement", "WaveSchedule", "place", "round_blocks", "wave_blocks"]


@dataclass(frozen=True)
class Block:
    """Launches one node runs back to back: a baseline and the candidates paired with it, in one round."""

    track: str
    round: int
    launches: tuple[str, ...]

    @property
    def baseline(self) -> str:
        return self.track


def round_blocks(plan: Plan, active: Sequence[str], index: int, *, keep_empty: bool = False) -> tuple[Block, ...]:
    """Round `index`'s blocks for the `active` candidates: per track, its baseline then its members (reversed in
    odd rounds, as in `round_order`); a track without an active member has none unless `keep_empty` (round 0
    records every baseline)."""
    blocks: list[Block] = []
    for track in track_rounds(plan, active):
        if track.members or keep_empty:
            order = block_order(track)
            blocks.append(Block(track.baseline, index, order if index % 2 == 0 else order[::-1]))
    return tuple(blocks)


def wave_blocks(plan: Plan, active: Sequence[str], start: int, end: int) -> tuple[Block, ...]:
    """The blocks of rounds `start` .. `end` - 1: one wave, none depending on another."""
    return tuple(block for index in range(start, end) for block in round_blocks(plan, active, index))


@dataclass(frozen=True)
class Placement:
    """Where and when one block ran in a wave."""

    block: Block
    slot: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class WaveSchedule:
    """A wave's blocks on its slots."""

    placements: tuple[Placement, ...]
    slots: int

    @property
    def makespan_s(self) -> float:
        return max((p.end_s for p in self.placements), default=0.0)

    @property
    def busy_s(self) -> float:
        return sum(p.end_s - p.start_s for p in self.placements)

    @property
    def idle_share(self) -> float:
        """The share of the slots' time within the makespan that no block used: lost to imbalance, and to slots
        the wave had no block for."""
        total = self.makespan_s * self.slots
        return 1.0 - self.busy_s / total if total > 0 else 0.0


def place(blocks: Sequence[Block], cost_s: Callable[[Block], float], slots: int) -> WaveSchedule:
    """Longest block first, each on the slot that frees up first (ties: the lowest slot)."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    free: list[tuple[float, int]] = [(0.0, slot) for slot in range(slots)]
    placements: list[Placement] = []
    for block in sorted(blocks, key=lambda b: (-cost_s(b), b.track, b.round)):
        start, slot = heapq.heappop(free)
        end = start + cost_s(block)
        placements.append(Placement(block, slot, start, end))
        heapq.heappush(free, (end, slot))
    return WaveSchedule(tuple(placements), slots)
