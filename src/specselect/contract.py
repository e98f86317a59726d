"""The four seed-compatible functions of the selection contract (section 7), over plain dicts.

Each one is a thin adapter over the typed core (`specselect._core`), so every rule has one implementation.
Dict inputs are checked at the boundary: a missing or NaN value counts as absent, anything of the wrong
type raises TypeError/ValueError with a one-line message naming the function, the key and the fix.
Numeric strings are not accepted.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from specselect._core.decision import Thresholds, decide
from specselect._core.families import classify_family, family_names
from specselect._core.gates import AdmissionInput, GateCheck, admit
from specselect._core.pairing import RATIO_FIELDS, PairEvidence, SideMetrics, build_pair_evidence, valid_ratio
from specselect._core.status import EvidenceStatus, RunStatus

__all__ = [
    "admit_speculative_candidate",
    "build_speculative_pair_evidence",
    "classify_speculative_strategy",
    "decide_speculative_candidate",
]

_SIDE_KEYS = tuple(name for name in SideMetrics.model_fields if name != "role")
_NUMERIC_SIDE_KEYS = frozenset({"throughput_tokens_per_s", "ttft_p95_ms", "e2e_p95_ms", "peak_memory_mb"})
_THRESHOLD_KEYS = tuple(Thresholds.model_fields)
_COMPARABLE_NUMBERS = (*RATIO_FIELDS, "candidate_peak_memory_mb")
_EVIDENCE_STATUSES = tuple(status.value for status in EvidenceStatus)
_RUN_STATUSES = tuple(status.value for status in RunStatus)


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: expected a dict, got {type(value).__name__}")
    return value


def _validation_message(where: str, exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()]
    return f"{where}: " + "; ".join(parts)


def classify_speculative_strategy(family: str) -> dict[str, Any]:
    """``{'family', 'asset_kind', 'dependency', 'telemetry'}`` of a family; ValueError when unknown."""
    spec = classify_family(family)
    return {
        "family": spec.family,
        "asset_kind": spec.asset_kind.value,
        "dependency": spec.dependency.value,
        "telemetry": tuple(spec.telemetry),
    }


def _flag(candidate: Mapping[str, Any], key: str) -> bool:
    value = candidate.get(key)
    if value is None or _is_nan(value):
        return False
    if not isinstance(value, bool):
        raise TypeError(f"admit_speculative_candidate: {key!r} must be True or False, got {type(value).__name__}")
    return value


def _gb(candidate: Mapping[str, Any], key: str) -> float | None:
    value = candidate.get(key)
    if value is None or _is_nan(value):
        return None
    if not _is_number(value):
        raise TypeError(f"admit_speculative_candidate: {key!r} must be a number of GB, got {type(value).__name__}")
    number = float(value)
    if number < 0:
        raise ValueError(f"admit_speculative_candidate: {key!r} is {number}; give a non-negative number of GB")
    return number


def admit_speculative_candidate(candidate: Mapping[str, Any]) -> dict[str, str]:
    """Section 2's gates over a dict: ``{'run_status', 'reason'}``.

    Keys: enabled, family, backend_supported, asset_ready, compatible (a missing boolean counts as False),
    estimated_memory_gb and memory_limit_gb (the memory gate applies only when both are given).
    """
    candidate = _mapping(candidate, "admit_speculative_candidate")
    family = candidate.get("family")
    if family is None:
        raise ValueError(
            f"admit_speculative_candidate: the candidate has no 'family'; give one of {', '.join(family_names())}"
        )

    def gate(key: str, failure: str) -> GateCheck:
        passed = _flag(candidate, key)
        return GateCheck(passed=passed, reason="ok" if passed else failure, facts={key: passed})

    estimated = _gb(candidate, "estimated_memory_gb")
    limit = _gb(candidate, "memory_limit_gb")
    memory_facts = {"estimated_memory_gb": estimated, "memory_limit_gb": limit}
    if estimated is not None and limit is not None and estimated > limit:
        capacity = GateCheck.fail("memory_over_budget", **memory_facts)
    else:
        capacity = GateCheck.ok(**memory_facts, applied=estimated is not None and limit is not None)
    inp = AdmissionInput(
        enabled=_flag(candidate, "enabled"),
        backend=gate("backend_supported", "backend_unsupported"),
        asset=gate("asset_ready", "asset_not_ready"),
        compatibility=gate("compatible", "incompatible_identities"),
        capacity=capacity,
    )
    name = candidate.get("name")
    result = admit(name if isinstance(name, str) else str(family), family, inp)
    return {"run_status": result.run_status.value, "reason": result.reason}


def _side(raw: object, role: str) -> SideMetrics:
    where = f"build_speculative_pair_evidence: {role}"
    side = _mapping(raw, where)
    given_role = side.get("role")
    if given_role is not None and not _is_nan(given_role) and given_role != role:
        raise ValueError(f"{where} has role {given_role!r}; pass the baseline first and the candidate second")
    fields: dict[str, Any] = {"role": role}
    for key in _SIDE_KEYS:
        value = side.get(key)
        if key not in _NUMERIC_SIDE_KEYS and _is_nan(value):
            value = None  # NaN is how tables spell "missing"
        if key in ("run_status", "execution_path") and isinstance(value, str):
            value = value.strip().lower().replace("-", "_")
        fields[key] = value
    try:
        return SideMetrics.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(_validation_message(where, exc)) from None


def build_speculative_pair_evidence(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """Section 4 over dicts: evidence_status, mismatches, missing_evidence, candidate_run_status and,
    when comparable, throughput_speedup, ttft_ratio, e2e_p95_ratio, candidate_peak_memory_mb, quality_ok."""
    evidence = build_pair_evidence(_side(baseline, "baseline"), _side(candidate, "candidate"))
    out: dict[str, Any] = {
        "evidence_status": evidence.evidence_status.value,
        "mismatches": list(evidence.mismatches),
        "missing_evidence": list(evidence.missing_evidence),
        "candidate_run_status": evidence.candidate_run_status.value if evidence.candidate_run_status else None,
    }
    if evidence.evidence_status is EvidenceStatus.COMPARABLE:
        for key in (*_COMPARABLE_NUMBERS, "quality_ok"):
            out[key] = getattr(evidence, key)
    return out


def _names(evidence: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = evidence.get(key)
    if value is None or _is_nan(value):
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise TypeError(f"decide_speculative_candidate: evidence[{key!r}] must be a list of names")
    return tuple(str(item) for item in value)


def _pair_evidence(raw: object) -> PairEvidence:
    where = "decide_speculative_candidate: evidence"
    evidence = _mapping(raw, where)
    status_text = evidence.get("evidence_status")
    if status_text not in _EVIDENCE_STATUSES:
        known = ", ".join(_EVIDENCE_STATUSES)
        raise ValueError(f"{where}['evidence_status'] is {status_text!r}; give one of {known}")
    status = EvidenceStatus(status_text)
    run_text = evidence.get("candidate_run_status", evidence.get("run_status"))
    # The run status is informational here; an unknown value is dropped rather than fatal.
    run_status = RunStatus(run_text) if run_text in _RUN_STATUSES else None
    common: dict[str, Any] = {
        "mismatches": _names(evidence, "mismatches"),
        "missing_evidence": _names(evidence, "missing_evidence"),
        "candidate_run_status": run_status,
    }
    if status is not EvidenceStatus.COMPARABLE:
        return PairEvidence(evidence_status=status, **common)
    numbers_in: dict[str, Any] = {key: evidence.get(key) for key in _COMPARABLE_NUMBERS}
    bad = [key for key, value in numbers_in.items() if not (_is_number(value) and valid_ratio(float(value)))]
    quality = evidence.get("quality_ok")
    if not isinstance(quality, bool):
        bad.append("quality_ok")
    if bad:
        # A "comparable" dict with unusable numbers cannot be trusted; decide it as incomplete.
        common["missing_evidence"] = (*common["missing_evidence"], *bad)
        return PairEvidence(evidence_status=EvidenceStatus.INCOMPLETE, **common)
    return PairEvidence(
        evidence_status=status,
        quality_ok=quality,
        **{key: float(value) for key, value in numbers_in.items()},
        **common,
    )


def _thresholds(raw: Mapping[str, Any] | None) -> Thresholds:
    where = "decide_speculative_candidate: thresholds"
    given = _mapping({} if raw is None else raw, where)
    unknown = sorted(str(key) for key in given if key not in _THRESHOLD_KEYS)
    if unknown:
        raise ValueError(f"{where} has unknown keys {', '.join(unknown)}; known keys: {', '.join(_THRESHOLD_KEYS)}")
    # None means "use the default" (for max_peak_memory_mb the default is "no limit").
    values = {key: value for key, value in given.items() if value is not None}
    try:
        return Thresholds.model_validate(values)
    except ValidationError as exc:
        raise ValueError(_validation_message(where, exc)) from None


def decide_speculative_candidate(
    evidence: Mapping[str, Any], thresholds: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Section 5 over dicts: ``{'decision', 'reason'}``; missing threshold keys take the defaults."""
    result = decide(_pair_evidence(evidence), _thresholds(thresholds))
    return {"decision": result.decision.value, "reason": result.reason}
