"""Admission gatherers: turn engine probes and model facts into the checks of the contract's gates."""

from specselect.admission.gather import (
    EngineSettings,
    Gathered,
    capacity_check,
    gather_admission,
    gather_admission_input,
)

__all__ = ["EngineSettings", "Gathered", "capacity_check", "gather_admission", "gather_admission_input"]
