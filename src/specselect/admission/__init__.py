"""Admission gatherers: turn engine probes and model facts into the checks of the contract's gates."""

from specselect.admission.capacity import Capabilities, capacity_check
from specselect.admission.gather import (
    ADMISSION_OPTION_KEYS,
    Gathered,
    gather_admission,
    gather_admission_input,
    method_for,
)
from specselect.admission.settings import EngineSettings

__all__ = [
    "ADMISSION_OPTION_KEYS",
    "Capabilities",
    "EngineSettings",
    "Gathered",
    "capacity_check",
    "gather_admission",
    "gather_admission_input",
    "method_for",
]
