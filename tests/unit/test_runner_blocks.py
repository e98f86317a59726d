"""Blocks keep every candidate launch on the node of its baseline launch; placement spreads a wave over slots."""

from __future__ import annotations

from typing import Any

import pytest
from test_plan_validation import _load

from specselect._evidence.rounds.design import round_order
from specselect._runner.blocks import Block, place, round_blocks, wave_blocks
from specselect._runner.rounds import track_rounds

OTHER_TARGET = {"model": "org/Other-Model"}
OTHER = "g0_target_only@Other-Model"


def _plan(*names: str, other: tuple[str, ...] = ()) -> Any:
    candidates: list[dict[str, Any]] = [{"name": n, "family": "ngram"} for n in names]
    if other:
        candidates += [{"name": n, "family": "ngram", "target": OTHER_TARGET} for n in other]
    return _load({"candidates": candidates}).plan


def test_a_block_is_one_tracks_share_of_a_round_in_the_rounds_order() -> None:
    plan = _plan("a", "b", other=("c",))
    even, odd = round_blocks(plan, ["a", "b", "c"], 0), round_blocks(plan, ["a", "b", "c"], 1)
    assert [b.launches for b in even] == [("g0_target_only", "a", "b"), (OTHER, "c")]
    assert [b.launches for b in odd] == [("b", "a", "g0_target_only"), ("c", OTHER)]


def test_blocks_hold_every_launch_of_the_round_once() -> None:
    plan = _plan("a", "b", other=("c",))
    for index in (0, 1):
        launches = [name for block in round_blocks(plan, ["a", "b", "c"], index) for name in block.launches]
        assert sorted(launches) == sorted(round_order(track_rounds(plan, ["a", "b", "c"]), index))


def test_split_candidates_get_their_own_baseline_launch() -> None:
    plan = _load({"run": {"candidates_per_block": 2}, "candidates": [{"name": n, "family": "ngram"} for n in "abc"]})
    blocks = round_blocks(plan.plan, ["a", "b", "c"], 1)
    assert [b.launches for b in blocks] == [("b", "a", "g0_target_only"), ("c", "g0_target_only.block2")]
    assert [b.baseline for b in blocks] == ["g0_target_only", "g0_target_only.block2"]


def test_a_track_whose_candidates_stopped_has_no_block() -> None:
    plan = _plan("a", other=("c",))
    assert [b.track for b in round_blocks(plan, ["c"], 2)] == [OTHER]


def test_a_wave_is_its_rounds_blocks() -> None:
    plan = _plan("a", "b")
    assert [(b.round, b.launches[0]) for b in wave_blocks(plan, ["a", "b"], 1, 3)] == [(1, "b"), (2, "g0_target_only")]


def _costs(*seconds: float) -> tuple[list[Block], dict[Block, float]]:
    blocks = [Block("t", index, ("t", "a")) for index in range(len(seconds))]
    return blocks, dict(zip(blocks, seconds, strict=True))


def test_placement_runs_the_longest_block_first_on_the_slot_that_frees_first() -> None:
    blocks, cost = _costs(3, 5, 3, 4, 3)
    wave = place(blocks, cost.__getitem__, 2)
    assert [(p.block.round, p.slot, p.start_s, p.end_s) for p in wave.placements] == [
        (1, 0, 0.0, 5.0),
        (3, 1, 0.0, 4.0),
        (0, 1, 4.0, 7.0),
        (2, 0, 5.0, 8.0),
        (4, 1, 7.0, 10.0),
    ]
    # longest-first is not optimal here (5+4 | 3+3+3 ends at 9): 10 % of the slots' time is idle
    assert (wave.makespan_s, wave.busy_s, wave.idle_share) == (10.0, 18.0, pytest.approx(0.1))


def test_one_slot_runs_the_wave_back_to_back_without_idle_time() -> None:
    blocks, cost = _costs(3, 5, 4)
    wave = place(blocks, cost.__getitem__, 1)
    assert (wave.makespan_s, wave.idle_share) == (12.0, 0.0)


def test_slots_without_a_block_count_as_idle() -> None:
    blocks, cost = _costs(4, 4)
    assert place(blocks, cost.__getitem__, 2).idle_share == 0.0
    assert place(blocks, cost.__getitem__, 8).idle_share == 0.75


def test_no_slot_is_refused() -> None:
    with pytest.raises(ValueError, match="slots must be at least 1, got 0"):
        place([], lambda b: 1.0, 0)
