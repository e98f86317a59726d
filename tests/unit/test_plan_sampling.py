"""`[sampling]` at temperature > 0: top-p, top-k, server-side defaults and the distribution test's size; plans
that do not use them keep their hash; several temperatures as a scenario dimension; the built-in cpu-sampled
plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._artifacts.handoff.build import sampling_note
from specselect._evidence.pipeline import parity_scenario, scenario_name
from specselect._plan import load_plan, parse_plan_text
from specselect._plan.loader import builtin_plan_text
from specselect._runner.conclusion import plan_scenarios
from specselect._runner.paritypass import distribution_test, parity_pass_enabled
from specselect._runner.preflight import distribution_test_cost
from specselect.errors import PlanError


def _with_sampling(lines: str) -> str:
    text = builtin_plan_text("cpu-aa")
    old = "[sampling]\ntemperature = 0.0\n"
    assert text.count(old) == 1
    return text.replace(old, "[sampling]\n" + lines)


def test_new_sampling_fields_at_their_defaults_keep_the_plan_hash() -> None:
    plain = parse_plan_text(builtin_plan_text("cpu-aa"), source="a.toml", base_dir=Path("."))
    spelled = parse_plan_text(
        _with_sampling("temperature = 0.0\ntop_p = 1.0\ntop_k = 0\nin_request = true\nparity_samples = 16\n"),
        source="b.toml",
        base_dir=Path("."),
    )
    assert spelled.plan_hash == plain.plan_hash
    assert "top_p" not in plain.plan.model_dump(mode="json")["sampling"]


def test_a_sampled_plan_states_its_settings_in_the_key_and_runs_the_distribution_test() -> None:
    loaded = parse_plan_text(
        _with_sampling("temperature = 0.7\ntop_p = 0.9\nin_request = false\n"), source="p.toml", base_dir=Path(".")
    )
    sampling = loaded.plan.sampling
    assert sampling.sampled and (sampling.parity_prompts, sampling.parity_samples) == (8, 16)
    assert sampling.sampling_key == "temperature=0.7;max_tokens=32;seed=0;top_p=0.9;in_request=False"
    assert not parity_pass_enabled(loaded)  # no exact-parity logprob pass above 0
    test = distribution_test(loaded)
    assert test is not None and test.alpha == pytest.approx(0.05)
    assert distribution_test(parse_plan_text(builtin_plan_text("cpu-aa"), source="a.toml", base_dir=Path("."))) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("top_p = 0.0", "sampling.top_p: must be > 0"),
        ("top_k = -1", "sampling.top_k: must be >= 0"),
        ("parity_samples = 1", "sampling.parity_samples: must be >= 2"),
    ],
)
def test_bad_sampling_values_name_the_field_and_the_fix(line: str, expected: str) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan_text(_with_sampling(f"temperature = 0.7\n{line}\n"), source="p.toml", base_dir=Path("."))
    (problem,) = info.value.problems
    assert expected in problem and "(fix: " in problem


def test_the_builtin_cpu_sampled_plan_measures_at_0_and_0_7_with_an_aa_control() -> None:
    plan = load_plan("builtin:cpu-sampled").plan
    assert (plan.sampling.temperatures, plan.sampling.top_p, plan.sampling.in_request) == ((0.0, 0.7), 1.0, True)
    assert plan.run.aa_control and plan.run.rounds == 2
    assert [c.family for c in plan.candidates] == ["ngram"]


def test_the_handoff_says_which_sampling_its_decisions_hold_for() -> None:
    greedy = sampling_note(load_plan("builtin:cpu-aa").plan.sampling)
    assert greedy.startswith("Measured at temperature 0 (greedy)")
    loaded = parse_plan_text(_with_sampling("temperature = 0.7\n"), source="p.toml", base_dir=Path("."))
    sampled = sampling_note(loaded.plan.sampling)
    assert sampled.startswith("Measured at temperature 0.7 (top-p 1, top-k off; sent in every request), where")
    assert "hold at that temperature only" in sampled
    both = sampling_note(load_plan("builtin:cpu-sampled").plan.sampling)
    assert both.startswith(
        "Measured at temperature 0 (greedy), where every output must equal the baseline's, and at temperature 0.7 "
        "(top-p 1, top-k off; sent in every request), where outputs were tested against the baseline's "
        "distribution: each scenario's decision holds at its own temperature only"
    )


def test_the_distribution_tests_cost_is_stated_before_the_run() -> None:
    plan = load_plan("builtin:cpu-sampled").plan
    assert distribution_test_cost(plan) == (
        "temperature 0.7 > 0: parity is a test on the output distribution: 16 samples per prompt and side "
        "(prompts: general 8, repetition 8), 256 untimed requests of up to 32 tokens per group in its first launch"
    )
    # A workload with fewer items than parity_prompts costs only its items.
    assert "(prompts: general 8, repetition 3), 176 untimed" in distribution_test_cost(
        plan, {"general": 800, "repetition": 3}
    )

    two = parse_plan_text(_with_sampling("temperature = [0.5, 1.0]\n"), source="p.toml", base_dir=Path("."))
    assert distribution_test_cost(two.plan).startswith(
        "temperature 0.5 and 1 > 0: parity is a test on the output distribution: 16 samples per prompt, side and "
        "temperature (prompts: "
    )


def test_several_temperatures_are_a_scenario_dimension_like_concurrency() -> None:
    loaded = parse_plan_text(_with_sampling("temperature = [0, 0.7]\n"), source="p.toml", base_dir=Path("."))
    sampling = loaded.plan.sampling
    assert (sampling.temperatures, sampling.greedy, sampling.sampled) == ((0.0, 0.7), True, True)
    names = ["general-c1", "general-c1-t0.7", "repetition-c1", "repetition-c1-t0.7"]
    assert [key.name for key in plan_scenarios(loaded)] == names
    # Exact parity's logprob pass for the scenarios at 0, the distribution test for those above.
    assert parity_pass_enabled(loaded) and distribution_test(loaded) is not None
    assert scenario_name("chat", 4, 0.7) == "chat-c4-t0.7" and parity_scenario("chat", 0.7) == "chat-c1-t0.7.parity"
    assert scenario_name("chat", 4, 0.0) == "chat-c4" and parity_scenario("chat") == "chat-c1.parity"


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ("temperature = [0.7, 0.0]", "sampling.temperature[1]: temperature 0.0 does not rise above 0.7"),
        ("temperature = [0.7, 0.7]", "sampling.temperature[1]: temperature 0.7 does not rise above 0.7"),
        ("temperature = []", "sampling.temperature"),
    ],
)
def test_a_bad_temperature_list_names_the_field_and_the_fix(lines: str, expected: str) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan_text(_with_sampling(f"{lines}\n"), source="p.toml", base_dir=Path("."))
    problem = info.value.problems[0]
    assert expected in problem and "(fix: " in problem


def test_a_traffic_mix_is_refused_with_several_temperatures() -> None:
    mix = "\n[traffic]\nworkloads = { general = 0.5, repetition = 0.5 }\nconcurrency = { 1 = 1.0 }\n"
    with pytest.raises(PlanError) as info:
        parse_plan_text(_with_sampling("temperature = [0, 0.7]\n") + mix, source="p.toml", base_dir=Path("."))
    (problem,) = info.value.problems
    assert problem.startswith(
        "p.toml: sampling.temperature: [traffic] weighs workloads and concurrency levels, not temperatures"
    )
    assert "(fix: list the deployment's one temperature, or run the plan once per temperature)" in problem
