"""Admission facts and audit findings of a plan measured on endpoints the user runs (kind "openai").

Gate 2 (backend) is the only one specselect can check: the endpoint answers `/v1/models` and lists the
served model. Assets and compatibility are the operator's declaration (specselect cannot see the server's
files); capacity is not evaluated (the server already runs, with memory it has already taken).
"""

from __future__ import annotations

from collections.abc import Mapping

from specselect._core.gates import AdmissionInput, FactValue, GateCheck
from specselect._engines.base import Finding
from specselect._plan import Plan
from specselect.records.endpoints import EndpointProbe

__all__ = ["endpoint_admission_input", "endpoint_findings"]


def _declared(what: str) -> GateCheck:
    return GateCheck.ok(declared_by_operator=True, evaluated=False, note=f"{what} cannot be seen on a remote server")


def endpoint_admission_input(*, enabled: bool, method: str, probe: EndpointProbe | None) -> AdmissionInput:
    """The five gate checks for one endpoint candidate (`probe` None: the endpoint was not probed)."""
    skipped = GateCheck.ok(evaluated=False, after_failed_gate="enabled")
    if not enabled:
        return AdmissionInput(enabled=False, backend=skipped, asset=skipped, compatibility=skipped, capacity=skipped)
    facts: dict[str, FactValue] = {"engine_kind": "openai", "method": method, "method_source": "declared"}
    if probe is None:
        backend = GateCheck.fail("endpoint_not_probed", **facts)
    else:
        facts.update(
            base_url=probe.base_url,
            model=probe.model,
            engine_version=probe.engine_version,
            metrics=probe.metrics,
            metrics_flavor=probe.flavor,
            target_snapshot=probe.target_snapshot,
        )
        if not probe.reachable:
            backend = GateCheck.fail("endpoint_unreachable", error=probe.error, **facts)
        elif not probe.model_listed:
            listed = ",".join(probe.model_ids[:20])
            backend = GateCheck.fail("model_not_served", served_models=listed, **facts)
        else:
            backend = GateCheck.ok(**facts)
    if not backend.passed:
        rest = GateCheck.ok(evaluated=False, after_failed_gate="backend")
        return AdmissionInput(enabled=True, backend=backend, asset=rest, compatibility=rest, capacity=rest)
    capacity = GateCheck.ok(evaluated=False, note="not evaluated: the server already runs with the memory it has taken")
    return AdmissionInput(
        enabled=True,
        backend=backend,
        asset=_declared("the proposer's files"),
        compatibility=_declared("proposer/target compatibility"),
        capacity=capacity,
    )


def _baseline_findings(plan: Plan, endpoints: Mapping[str, EndpointProbe]) -> list[Finding]:
    found: list[Finding] = []
    for track in plan.tracks:
        base = endpoints.get(track.name)
        if base is None or not base.usable:
            why = base.error if base else "not probed"
            found.append(("error", "baseline_endpoint_unusable", f"{track.name} (nothing can be compared): {why}"))
            continue
        for name in track.members:
            cand = endpoints.get(name)
            if cand is not None and cand.usable and cand.target_snapshot != base.target_snapshot:
                found.append(
                    (
                        "warning",
                        "target_identity_differs",
                        f"{name} reports {cand.target_snapshot}, its baseline {base.target_snapshot}: "
                        "their pairs will be incomparable",
                    )
                )
    return found


def endpoint_findings(plan: Plan, endpoints: Mapping[str, EndpointProbe]) -> list[Finding]:
    """Unusable baselines (errors), and targets that differ within a track, endpoints without /metrics and
    groups without a declared peak memory (warnings)."""
    found = _baseline_findings(plan, endpoints)
    silent = [name for name, p in endpoints.items() if p.usable and p.metrics != "exported"]
    if silent:
        found.append(
            (
                "warning",
                "metrics_not_exported",
                f"{', '.join(silent)}: no /metrics: acceptance stays null and other traffic cannot be detected",
            )
        )
    undeclared = [g.name for g in plan.groups if g.endpoint is not None and g.endpoint.peak_memory_mb is None]
    if undeclared:
        found.append(
            (
                "warning",
                "peak_memory_not_measured",
                f"{', '.join(undeclared)}: specselect cannot sample a server it did not start; declare "
                "endpoint.peak_memory_mb (recorded as declared) or the evidence stays incomplete",
            )
        )
    return found
