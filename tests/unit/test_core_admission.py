"""Admission gates: fixed order, first failure decides, stable reasons, facts of every gate evaluated."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specselect._core import (
    ADMISSION_STATUSES,
    GATE_ORDER,
    AdmissionInput,
    AdmissionResult,
    GateCheck,
    RunStatus,
    UnknownFamilyError,
    admit,
)

FAILURES = {
    "backend": (GateCheck.fail("requires_cuda", method="ngram_gpu", device="cpu"), RunStatus.UNSUPPORTED),
    "asset": (GateCheck.fail("proposer_not_found", path="/nope"), RunStatus.ASSET_MISSING),
    "compatibility": (GateCheck.fail("vocab_size_mismatch", target=49152, proposer=32000), RunStatus.INCOMPATIBLE),
    "capacity": (
        GateCheck.fail("memory_over_budget", estimated_mb=9000.0, budget_mb=8000.0),
        RunStatus.CAPACITY_BLOCKED,
    ),
}


def _input(failing: dict[str, GateCheck] | None = None, *, enabled: bool = True) -> AdmissionInput:
    gates = {gate: (failing or {}).get(gate, GateCheck.ok(gate_ran=gate)) for gate in GATE_ORDER}
    return AdmissionInput(enabled=enabled, **gates)


def test_all_gates_pass_is_runnable_and_carries_every_fact() -> None:
    result = admit("ngram-k4", "N-Gram", _input())
    assert result.run_status is RunStatus.RUNNABLE
    assert result.admitted
    assert (result.gate, result.reason, result.family, result.candidate) == ("none", "admitted", "ngram", "ngram-k4")
    assert result.facts == {
        "enabled.enabled": True,
        "backend.gate_ran": "backend",
        "asset.gate_ran": "asset",
        "compatibility.gate_ran": "compatibility",
        "capacity.gate_ran": "capacity",
    }


def test_disabled_is_skipped_before_anything_else() -> None:
    every_gate_fails = {gate: check for gate, (check, _) in FAILURES.items()}
    result = admit("off", "eagle3", _input(every_gate_fails, enabled=False))
    assert (result.run_status, result.gate, result.reason) == (RunStatus.SKIPPED, "enabled", "disabled")
    assert result.facts == {"enabled.enabled": False}
    assert not result.admitted


@pytest.mark.parametrize("gate", GATE_ORDER)
def test_each_gate_failing_alone(gate: str) -> None:
    check, status = FAILURES[gate]
    result = admit("c", "draft_model", _input({gate: check}))
    assert (result.run_status, result.gate, result.reason) == (status, gate, check.reason)
    # Facts of the deciding gate are there, namespaced; gates after it were not evaluated.
    for key, value in check.facts.items():
        assert result.facts[f"{gate}.{key}"] == value
    later = GATE_ORDER[GATE_ORDER.index(gate) + 1 :]
    assert not any(key.split(".")[0] in later for key in result.facts)
    earlier = GATE_ORDER[: GATE_ORDER.index(gate)]
    assert all(result.facts[f"{g}.gate_ran"] == g for g in earlier)


@pytest.mark.parametrize("first", range(len(GATE_ORDER)))
def test_earlier_gate_wins_over_every_later_one(first: int) -> None:
    failing: dict[str, GateCheck] = {gate: FAILURES[gate][0] for gate in GATE_ORDER[first:]}
    result = admit("c", "mtp", _input(failing))
    gate = GATE_ORDER[first]
    assert (result.gate, result.run_status) == (gate, FAILURES[gate][1])


def test_unsupported_is_not_a_performance_answer() -> None:
    result = admit("c", "ngram", _input({"backend": GateCheck.fail("method_not_in_backend")}))
    assert result.run_status is RunStatus.UNSUPPORTED
    assert result.run_status in ADMISSION_STATUSES


def test_unknown_family_raises_value_error() -> None:
    with pytest.raises(UnknownFamilyError, match="known families"):
        admit("c", "lookahed", _input())


@pytest.mark.parametrize("reason", ["Requires CUDA", "requires-cuda", "", "_x", "x__y", "ok!"])
def test_reasons_must_be_snake_case(reason: str) -> None:
    with pytest.raises(ValidationError, match="snake_case"):
        GateCheck(passed=False, reason=reason)


def test_a_failed_gate_needs_a_real_reason() -> None:
    with pytest.raises(ValidationError, match="reason other than 'ok'"):
        GateCheck(passed=False)
    assert GateCheck(passed=True).reason == "ok"


def test_strict_booleans() -> None:
    with pytest.raises(ValidationError):
        GateCheck(passed="yes")
    with pytest.raises(ValidationError):
        AdmissionInput(enabled=1, **{g: GateCheck.ok() for g in GATE_ORDER})


def test_values_are_frozen_and_results_independent() -> None:
    inp = _input()
    first = admit("c", "suffix", inp)
    with pytest.raises(ValidationError):
        first.reason = "other"  # type: ignore[misc]
    first.facts["enabled.enabled"] = "tampered"
    assert admit("c", "suffix", inp).facts["enabled.enabled"] is True
    assert inp.backend.facts == {"gate_ran": "backend"}


def test_result_rejects_non_admission_status() -> None:
    with pytest.raises(ValidationError, match="not an admission status"):
        AdmissionResult(candidate="c", family="ngram", run_status=RunStatus.COMPLETED, gate="none", reason="admitted")


def test_result_round_trips_through_json() -> None:
    result = admit("c", "eagle", _input({"asset": FAILURES["asset"][0]}))
    assert AdmissionResult.model_validate_json(result.model_dump_json()) == result
