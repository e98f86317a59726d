"""Admission: the facts of the contract's gates for every candidate, before any server starts.

The engine answers the backend gate and the capacity terms (`Engine.admit`); the asset, compatibility and
capacity gates themselves are the same for every engine and live here.
"""

from specselect._admission.capacity import CapacityTerms, capacity_check
from specselect._admission.gather import ADMISSION_OPTION_KEYS, Gathered, gather_admission
from specselect._admission.plan_admission import Admissions, admit_plan, shared_admission_key

__all__ = [
    "ADMISSION_OPTION_KEYS",
    "Admissions",
    "CapacityTerms",
    "Gathered",
    "admit_plan",
    "capacity_check",
    "gather_admission",
    "shared_admission_key",
]
