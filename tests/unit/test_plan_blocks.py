"""`[run] candidates_per_block`: a track's candidates in blocks, each paired with its own launch of the baseline."""

from __future__ import annotations

from typing import Any

import pytest
from test_plan_tracks import BIG, c, load, problems


def _names(plan: Any) -> list[tuple[str, tuple[str, ...]]]:
    return [(t.name, t.members) for t in plan.tracks]


def test_candidates_fill_blocks_in_plan_order_each_block_with_its_own_baseline() -> None:
    plan = load(c("g1"), c("g2"), c("g3"), c("g4"), c("g5"), run={"candidates_per_block": 2}).plan
    assert _names(plan) == [
        ("g0_target_only", ("g1", "g2")),
        ("g0_target_only.block2", ("g3", "g4")),
        ("g0_target_only.block3", ("g5",)),
    ]
    assert [g.name for g in plan.groups] == [
        "g0_target_only",
        "g1",
        "g2",
        "g0_target_only.block2",
        "g3",
        "g4",
        "g0_target_only.block3",
        "g5",
    ]
    second = plan.group("g0_target_only.block2")
    assert second.is_baseline and not second.is_track_baseline and second.block_of == "g0_target_only"
    assert second.model_dump(exclude={"name", "block_of"}) == plan.baseline.model_dump(exclude={"name"})
    assert plan.track_of("g4").name == "g0_target_only.block2"


def test_a_track_on_another_target_splits_with_its_target() -> None:
    plan = load(c("g1"), c("g2", target=BIG), c("g3", target=BIG), run={"candidates_per_block": 1}).plan
    assert _names(plan) == [
        ("g0_target_only", ("g1",)),
        ("g0_target_only@Big-Model", ("g2",)),
        ("g0_target_only@Big-Model.block2", ("g3",)),
    ]
    block = plan.group("g0_target_only@Big-Model.block2")
    assert block.is_track_baseline and block.target is not None and block.target.model == "org/Big-Model"
    assert plan.tracks[2].target == plan.tracks[1].target


def test_a_swept_entry_stays_in_one_block_and_one_larger_than_a_block_gets_its_own() -> None:
    plan = load(
        c("g1"),
        c("sw", sweep={"prompt_lookup_max": [2, 3, 4]}),
        c("g2"),
        c("g3"),
        run={"candidates_per_block": 2},
    ).plan
    (first, swept, last) = plan.tracks
    assert first.members == ("g1",)
    assert len(swept.members) == 3 and all(plan.group(n).sweep is not None for n in swept.members)
    assert last.members == ("g2", "g3")


def test_the_aa_control_stays_in_the_first_block() -> None:
    plan = load(c("g1"), c("g2"), run={"candidates_per_block": 1, "aa_control": True}).plan
    assert _names(plan) == [
        ("g0_target_only", ("g0_target_only.aa",)),
        ("g0_target_only.block2", ("g1",)),
        ("g0_target_only.block3", ("g2",)),
    ]


def test_unset_or_large_enough_changes_nothing_and_setting_it_changes_the_plan_hash() -> None:
    plain = load(c("g1"), c("g2"))
    wide = load(c("g1"), c("g2"), run={"candidates_per_block": 2})
    assert _names(plain.plan) == _names(wide.plan) == [("g0_target_only", ("g1", "g2"))]
    assert "candidates_per_block" not in plain.plan.model_dump(mode="json")["run"]
    assert wide.plan_hash != plain.plan_hash


@pytest.mark.parametrize(
    ("candidates", "top", "expected"),
    [
        (
            [c("g1", block_of="g0_target_only")],
            {},
            "candidates[0].block_of: a block's baseline is written by specselect for [run] candidates_per_block "
            "(fix: remove block_of (set candidates_per_block in [run] to split the candidates into blocks))",
        ),
        (
            [c("g1"), c("g0_target_only.block2")],
            {"run": {"candidates_per_block": 1}},
            "candidates: g0_target_only.block2 is the name of the baseline of a block of g0_target_only "
            "(fix: rename that candidate)",
        ),
        (
            [c("g1")],
            {"run": {"candidates_per_block": 0}},
            "run.candidates_per_block: must be >= 1 (got 0) (fix: use a value >= 1)",
        ),
    ],
)
def test_block_rules_give_exact_problem_lines(
    candidates: list[dict[str, Any]], top: dict[str, Any], expected: str
) -> None:
    assert problems(*candidates, **top) == [f"p.toml: {expected}"]
