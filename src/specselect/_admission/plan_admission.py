"""Admission of every candidate of a plan, before any server starts.

The sub-candidates of one sweep share one admission: gathering runs once, for the first of them, and its
facts are reused for its siblings (each result still names its own group). Only siblings that differ in an
option admission reads (`ADMISSION_OPTION_KEYS`) are gathered separately; the proposal length changes no gate
(the capacity estimate does not depend on it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specselect._admission.gather import ADMISSION_OPTION_KEYS, Gathered
from specselect._core.gates import AdmissionInput, AdmissionResult, admit
from specselect._plan import Candidate, Plan

__all__ = ["Admissions", "admit_plan", "shared_admission_key"]


@dataclass(frozen=True)
class Admissions:
    """Every candidate's result plus what gathering resolved for it (method, proposer)."""

    results: tuple[AdmissionResult, ...]
    gathered: dict[str, Gathered]

    def result(self, name: str) -> AdmissionResult | None:
        """The admission result of candidate `name` (None for a baseline or an unknown name)."""
        return next((r for r in self.results if r.candidate == name), None)

    @property
    def inputs(self) -> dict[str, AdmissionInput]:
        """Candidate name -> the facts its gates were decided on."""
        return {name: g.input for name, g in self.gathered.items()}


def shared_admission_key(cand: Candidate) -> tuple[str, ...] | None:
    """Candidates with the same key have the same admission; None for a candidate outside any sweep."""
    if cand.sweep is None:
        return None
    read = sorted(key for key in cand.sweep.axes if key in ADMISSION_OPTION_KEYS)
    return (cand.sweep.parent, *(f"{key}={cand.options.get(key)!r}" for key in read))


def admit_plan(plan: Plan, gather: Callable[[Candidate], Gathered]) -> Admissions:
    """Run the six gates for every candidate of the plan (baselines and A/A controls are not candidates).

    `gather` is the plan's engine finding one candidate's facts (`Engine.admit` on the candidate's track).
    """
    results: list[AdmissionResult] = []
    gathered: dict[str, Gathered] = {}
    shared: dict[tuple[str, ...], Gathered] = {}
    for cand in plan.groups:
        if cand.runs_target_only:
            continue
        key = shared_admission_key(cand)
        got = shared.get(key) if key is not None else None
        if got is None:
            got = gather(cand)
            if key is not None:
                shared[key] = got
        gathered[cand.name] = got
        results.append(admit(cand.name, cand.family, got.input))
    return Admissions(results=tuple(results), gathered=gathered)
