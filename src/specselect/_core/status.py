"""The contract's vocabulary: run status, evidence status and decision (three separate answers)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ADMISSION_STATUSES", "Decision", "EvidenceStatus", "RunStatus"]


class RunStatus(StrEnum):
    """Did it run? Admission decides the first six; a launched group ends `completed` or `failed`."""

    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"
    ASSET_MISSING = "asset_missing"
    INCOMPATIBLE = "incompatible"
    CAPACITY_BLOCKED = "capacity_blocked"
    RUNNABLE = "runnable"
    COMPLETED = "completed"
    FAILED = "failed"


ADMISSION_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.SKIPPED,
        RunStatus.UNSUPPORTED,
        RunStatus.ASSET_MISSING,
        RunStatus.INCOMPATIBLE,
        RunStatus.CAPACITY_BLOCKED,
        RunStatus.RUNNABLE,
    }
)


class EvidenceStatus(StrEnum):
    """Can the result be attributed and compared?"""

    NOT_EVALUATED = "not_evaluated"
    INCOMPARABLE = "incomparable"
    INCOMPLETE = "incomplete"
    COMPARABLE = "comparable"


class Decision(StrEnum):
    """Adopt it?"""

    ACCEPT = "accept"
    TUNE = "tune"
    REJECT = "reject"
    NOT_EVALUATED = "not_evaluated"
