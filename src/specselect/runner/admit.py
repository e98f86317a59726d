"""Admission of every candidate: gather the gate facts, apply the contract's gates, before any server starts.

A candidate is admitted against its own track's target. For kind "openai" the facts come from the endpoint
probe (see `specselect.engines.openai.facts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specselect.admission.gather import DEFAULT_METHODS, EngineSettings, Gathered, gather_admission
from specselect.artifacts.results import AdmissionFile
from specselect.core.admission import AdmissionResult, admit
from specselect.core.families import classify_family
from specselect.engines.openai.facts import endpoint_admission_input
from specselect.plan import Candidate, LoadedPlan
from specselect.runner.preflight import Preflight

__all__ = ["Admissions", "admit_candidates", "declared_method"]


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


def _gather_endpoint(cand: Candidate, pre: Preflight) -> Gathered:
    method = declared_method(cand)
    probe = pre.endpoints.get(cand.name)
    return Gathered(input=endpoint_admission_input(enabled=cand.enabled, method=method, probe=probe), method=method)


def admit_candidates(loaded: LoadedPlan, pre: Preflight, *, home: Path | None) -> Admissions:
    """Run the six gates for every candidate of the plan (baselines are not candidates)."""
    plan = loaded.plan
    eng = plan.engine
    results: list[AdmissionResult] = []
    gathered: dict[str, Gathered] = {}
    for cand in plan.groups:
        if cand.is_baseline:
            continue
        if eng.kind == "openai":
            got = _gather_endpoint(cand, pre)
        else:
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
            got = gather_admission(
                cand,
                pre.targets[track.name],
                pre.engine.caps,
                home=home,
                env=pre.engine.env,
                settings=settings,
                prepare=True,
                probe_error=pre.engine.probe_error,
            )
        gathered[cand.name] = got
        results.append(admit(cand.name, cand.family, got.input))
    document = AdmissionFile(results=tuple(results), inputs={name: g.input for name, g in gathered.items()})
    return Admissions(document=document, gathered=gathered)
