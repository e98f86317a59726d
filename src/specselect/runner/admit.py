"""Admission of every candidate: gather the gate facts, apply the contract's gates, before any server starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specselect.admission.gather import EngineSettings, Gathered, gather_admission
from specselect.artifacts.results import AdmissionFile
from specselect.core.admission import AdmissionResult, admit
from specselect.plan import LoadedPlan
from specselect.runner.preflight import Preflight

__all__ = ["Admissions", "admit_candidates"]


@dataclass(frozen=True)
class Admissions:
    """The saved document plus, per candidate, what gathering resolved (method, proposer)."""

    document: AdmissionFile
    gathered: dict[str, Gathered]

    def result(self, name: str) -> AdmissionResult | None:
        return next((r for r in self.document.results if r.candidate == name), None)


def admit_candidates(loaded: LoadedPlan, pre: Preflight, *, home: Path | None) -> Admissions:
    """Run the six gates for every candidate of the plan (the baseline is not a candidate)."""
    plan = loaded.plan
    eng = plan.engine
    results: list[AdmissionResult] = []
    gathered: dict[str, Gathered] = {}
    for cand in plan.groups:
        if cand.is_baseline:
            continue
        settings = EngineSettings.from_engine_args(
            (*eng.args, *cand.engine_args),
            kind=eng.kind,
            dtype=plan.target.dtype,
            tensor_parallel_size=eng.tensor_parallel_size,
            pipeline_parallel_size=eng.pipeline_parallel_size,
            env={**eng.env, **cand.env},
        )
        got = gather_admission(
            cand,
            pre.target,
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
