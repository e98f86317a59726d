"""Admission facts of a candidate measured on an endpoint the user runs (kind "openai").

Gate 2 (backend) is the only one specselect can check: the endpoint answers `/v1/models` and lists the
served model. Assets and compatibility are the operator's declaration (specselect cannot see the server's
files); capacity is not evaluated (the server already runs, with memory it has already taken).
"""

from __future__ import annotations

from specselect.core.admission import AdmissionInput, FactValue, GateCheck
from specselect.engines.openai.probe import EndpointProbe

__all__ = ["endpoint_admission_input"]


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
