"""`[[candidates]]` rules, the baseline group and the canonical family."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._plan import Candidate, Plan, parse_plan_text
from specselect.errors import PlanError

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m"},
    "engine": {"python": "managed:vllm-cpu"},
    "workloads": {"general": "builtin:general"},
}


def load(*candidates: dict[str, Any]) -> Plan:
    text = tomli_w.dumps({**BASE, "candidates": list(candidates)})
    return parse_plan_text(text, source="p.toml", base_dir=Path(".")).plan


def problems(*candidates: dict[str, Any]) -> list[str]:
    with pytest.raises(PlanError) as info:
        load(*candidates)
    return [line.removeprefix("p.toml: ") for line in info.value.problems]


def c(name: str = "g1", family: str = "ngram", **extra: Any) -> dict[str, Any]:
    return {"name": name, "family": family, **extra}


KNOWN = "ngram, suffix, draft_model, mtp, eagle, dflash, dspark, medusa, mlp_speculator, uno, custom"
FAMILY_FIX = "(fix: set family to one of the known families (case, '-' and '_' do not matter))"

CASES: list[tuple[list[dict[str, Any]], str]] = [
    (
        [c(family="ngramm")],
        f"candidates[0].family: unknown proposer family 'ngramm'; did you mean 'ngram'? known families: {KNOWN} "
        + FAMILY_FIX,
    ),
    (
        [c(family="lookahead")],
        f"candidates[0].family: unknown proposer family 'lookahead'; known families: {KNOWN} {FAMILY_FIX}",
    ),
    (
        [{"name": "g1"}],
        f'candidates[0].family: missing required key (fix: add family = "ngram" (known: {KNOWN}))',
    ),
    ([{"family": "ngram"}], 'candidates[0].name: missing required key (fix: add name = "g1_ngram")'),
    (
        [c(name="g1 ngram")],
        "candidates[0].name: 'g1 ngram' may contain only letters, digits, '.', '_' and '-' "
        "(fix: use 1 to 100 letters, digits, '.', '_' or '-')",
    ),
    (
        [c(), c(family="suffix")],
        "candidates[1].name: duplicate candidate name 'g1' (also candidates[0]) "
        "(fix: give every candidate a unique name)",
    ),
    (
        [c(familly="ngram")],
        "candidates[0].familly: unknown key 'familly'; did you mean 'family'? (fix: rename it to family)",
    ),
    (
        [c(num_speculative_tokens=0)],
        "candidates[0].num_speculative_tokens: must be > 0 (got 0) "
        "(fix: use 1 to 256, e.g. num_speculative_tokens = 3)",
    ),
    (
        [c(options={"tensor_parallel_size": 2})],
        "candidates[0].options.tensor_parallel_size: 'tensor_parallel_size' cannot be set in options "
        "(fix: use draft_tensor_parallel_size)",
    ),
    ([c(options={"model": "x"})], "candidates[0].options.model: 'model' cannot be set in options (fix: use proposer)"),
    (
        [c(options={"method": "ngram"})],
        "candidates[0].options.method: 'method' cannot be set in options (fix: use the candidate field method)",
    ),
    (
        [c(options={"num_speculative_tokens": 3})],
        "candidates[0].options.num_speculative_tokens: 'num_speculative_tokens' cannot be set in options "
        "(fix: use the candidate field num_speculative_tokens)",
    ),
    (
        [c(options={"prompt_lookup_min": 5, "prompt_lookup_max": 2})],
        "candidates[0].options.prompt_lookup_min: prompt_lookup_min (5) is greater than prompt_lookup_max (2) "
        "(fix: make prompt_lookup_min <= prompt_lookup_max)",
    ),
    (
        [c(options={"prompt_lookup_max": 0})],
        "candidates[0].options.prompt_lookup_max: prompt_lookup_max must be an integer >= 1 (got 0) "
        "(fix: e.g. prompt_lookup_max = 2)",
    ),
    (
        [c(family="draft_model", options={"use_heterogeneous_vocab": "yes"})],
        "candidates[0].options.use_heterogeneous_vocab: use_heterogeneous_vocab must be true or false (got 'yes') "
        "(fix: e.g. use_heterogeneous_vocab = true)",
    ),
    (
        [c(min_engine_version="latest")],
        "candidates[0].min_engine_version: 'latest' is not a PEP 440 version (fix: write a version such as \"0.11.0\")",
    ),
    (
        [c(proposer="org/draft")],
        "candidates[0].proposer: family 'ngram' needs no proposer model (fix: remove proposer)",
    ),
    (
        [c(family="mtp", proposer="org/draft")],
        "candidates[0].proposer: family 'mtp' uses the target's own layers, not a proposer model "
        '(fix: remove proposer, or use family = "draft_model" for a separate model)',
    ),
    (
        [c(name="g0_target_only", family="eagle")],
        "candidates[0].name: g0_target_only is the reserved name of the target-only baseline "
        '(fix: rename this candidate, or set family = "target_only" to declare the baseline)',
    ),
    (
        [c(family="target-only")],
        "candidates[0].family: family 'target_only' is reserved for the baseline g0_target_only "
        "(fix: remove this entry (the baseline always runs), or name it g0_target_only)",
    ),
    (
        [{"name": "g0_target_only", "enabled": False}],
        "candidates[0].enabled: the baseline cannot be disabled: every candidate is compared with it "
        "(fix: remove enabled = false)",
    ),
    (
        [{"name": "g0_target_only", "num_speculative_tokens": 3}],
        "candidates[0].num_speculative_tokens: the baseline runs the target alone and takes no num_speculative_tokens "
        "(fix: remove num_speculative_tokens; settings shared by every group go in [engine])",
    ),
    (
        [c(engine_args=["--port=8000"])],
        "candidates[0].engine_args[0]: --port is set by the plan, not by engine arguments "
        "(fix: remove it and use [engine].port)",
    ),
    (
        [c(env={"A-B": "1"})],
        "candidates[0].env.A-B: 'A-B' is not a valid environment variable name "
        "(fix: use letters, digits and '_', not starting with a digit)",
    ),
]


@pytest.mark.parametrize(("candidates", "expected"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_candidate_rule_gives_exact_problem_line(candidates: list[dict[str, Any]], expected: str) -> None:
    assert problems(*candidates) == [expected]


def test_candidates_written_as_a_single_table_get_a_hint() -> None:
    text = tomli_w.dumps({**BASE, "candidates": {"name": "g1", "family": "ngram"}})
    with pytest.raises(PlanError) as info:
        parse_plan_text(text, source="p.toml", base_dir=Path("."))
    assert info.value.problems == [
        "p.toml: candidates: must be an array, got a table ({...}) "
        "(fix: write one [[candidates]] table (double brackets) per candidate)"
    ]


@pytest.mark.parametrize(
    ("written", "canonical"),
    [("N-Gram", "ngram"), ("EAGLE-3", "eagle"), ("eagle3", "eagle"), ("d_spark", "dspark"), ("Draft", "draft_model")],
)
def test_family_is_stored_in_canonical_form(written: str, canonical: str) -> None:
    assert load(c(family=written)).candidates[0].family == canonical


def test_implicit_baseline_comes_first() -> None:
    plan = load(c("g1", "ngram"), c("g2", "suffix"))
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1", "g2"]
    assert plan.baseline == Candidate.implicit_baseline()
    assert plan.baseline.family == "target_only"
    assert plan.baseline.is_baseline
    assert not plan.groups[1].is_baseline


@pytest.mark.parametrize("baseline", [{"name": "g0_target_only"}, {"name": "g0_target_only", "family": "Target-Only"}])
def test_explicit_baseline_is_moved_first(baseline: dict[str, Any]) -> None:
    plan = load(c("g1", "ngram"), baseline, c("g2", "suffix"))
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1", "g2"]
    assert plan.baseline.family == "target_only"
    assert plan.group("g2").family == "suffix"
    with pytest.raises(KeyError):
        plan.group("nope")


def test_full_candidate_round_trips_its_fields() -> None:
    plan = load(
        c(
            "g6",
            "draft_model",
            method="draft_model",
            enabled=False,
            num_speculative_tokens=3,
            proposer="builtin:smollm2-135m-draft4l",
            options={"draft_tensor_parallel_size": 1, "use_heterogeneous_vocab": True, "suffix_decoding_x": [1, 2]},
            min_engine_version="0.11.0rc1",
            engine_args=["--max-num-seqs", "4"],
            env={"VLLM_LOGGING_LEVEL": "DEBUG"},
        )
    )
    cand = plan.candidates[0]
    assert cand.model_dump() == {
        "name": "g6",
        "family": "draft_model",
        "method": "draft_model",
        "enabled": False,
        "num_speculative_tokens": 3,
        "proposer": "builtin:smollm2-135m-draft4l",
        "options": {"draft_tensor_parallel_size": 1, "use_heterogeneous_vocab": True, "suffix_decoding_x": [1, 2]},
        "min_engine_version": "0.11.0rc1",
        "engine_args": ("--max-num-seqs", "4"),
        "env": {"VLLM_LOGGING_LEVEL": "DEBUG"},
        "target": None,
        "endpoint": None,
    }


def test_candidates_are_frozen() -> None:
    cand = load(c()).candidates[0]
    with pytest.raises(ValueError, match="frozen"):
        cand.name = "other"  # type: ignore[misc]
