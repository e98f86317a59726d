"""Admission of every candidate: gather the gate facts, apply the contract's gates, before any server starts.

A candidate is admitted against its own track's target. For kind "openai" the facts come from the endpoint
probe (see `specselect.engines.openai.facts`).

The sub-candidates of one sweep share one admission: gathering runs once, for the first of them, and its
facts are reused for its siblings (each result still names its own group). Only siblings that differ in an
option admission reads (`ADMISSION_OPTION_KEYS`) are gathered separately; the proposal length changes no gate
(the capacity estimate does not depend on it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specselect.admission.gather import (
    ADMISSION_OPTION_KEYS,
    DEFAULT_METHODS,
    EngineSettings,
    Gathered,
    gather_admission,
)
from specselect.artifacts.results import AdmissionFile
from specselect.core.admission import AdmissionResult, admit
from specselect.core.families import classify_family
from specselect.engines.openai.facts import endpoint_admission_input
from specselect.plan import Candidate, LoadedPlan
from specselect.runner.preflight import Preflight

__all__ = ["Admissions", "admit_candidates", "declared_method", "shared_admission_key"]


@dataclass(frozen=True)
class Admissions:
    """The saved document plus, per candidate, what gathering resolved (method, proposer)."""

    document: AdmissionFile
    gathered: dict[str, Gathered]

    def result(self, name: str) -> AdmissionResult | None:
        return next((r for r in self.document.results if r.candidate == name), None)


def declared_method(cand: Candidate) -> str:
    """The backend method a candidate names, or its family's default."""
    return (cand.method or DEFAULT_METHODS[classify_family(cand.family).family]).strip().lower()


def shared_admission_key(cand: Candidate) -> tuple[str, ...] | None:
    """Candidates with the same key have the same admission; None for a candidate outside any sweep."""
    if cand.sweep is None:
        return None
    read = sorted(key for key in cand.sweep.axes if key in ADMISSION_OPTION_KEYS)
    return (cand.sweep.parent, *(f"{key}={cand.options.get(key)!r}" for key in read))


def _gather_endpoint(cand: Candidate, pre: Preflight) -> Gathered:
    method = declared_method(cand)
    probe = pre.endpoints.get(cand.name)
    return Gathered(input=endpoint_admission_input(enabled=cand.enabled, method=method, probe=probe), method=method)


def _gather(loaded: LoadedPlan, pre: Preflight, cand: Candidate, *, home: Path | None) -> Gathered:
    plan = loaded.plan
    eng = plan.engine
    if eng.kind == "openai":
        return _gather_endpoint(cand, pre)
    track = plan.track_of(cand.name)
    settings = EngineSettings.from_engine_args(
        (*eng.args, *cand.engine_args),
        kind=eng.kind,
        dtype=track.target.dtype,
        tensor_parallel_size=eng.tensor_parallel_size,
        pipeline_parallel_size=eng.pipeline_parallel_size,
        data_parallel_size=eng.data_parallel_size,
        env={**eng.env, **cand.env},
    )
    return gather_admission(
        cand,
        pre.targets[track.name],
        pre.engine.caps,
        home=home,
        env=pre.engine.env,
        settings=settings,
        prepare=True,
        probe_error=pre.engine.probe_error,
    )


def admit_candidates(loaded: LoadedPlan, pre: Preflight, *, home: Path | None) -> Admissions:
    """Run the six gates for every candidate of the plan (baselines are not candidates)."""
    plan = loaded.plan
    results: list[AdmissionResult] = []
    gathered: dict[str, Gathered] = {}
    shared: dict[tuple[str, ...], Gathered] = {}
    for cand in plan.groups:
        if cand.is_baseline:
            continue
        key = shared_admission_key(cand)
        got = shared.get(key) if key is not None else None
        if got is None:
            got = _gather(loaded, pre, cand, home=home)
            if key is not None:
                shared[key] = got
        gathered[cand.name] = got
        results.append(admit(cand.name, cand.family, got.input))
    document = AdmissionFile(results=tuple(results), inputs={name: g.input for name, g in gathered.items()})
    return Admissions(document=document, gathered=gathered)
