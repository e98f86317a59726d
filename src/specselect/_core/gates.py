"""Admission: the contract's static gates, run before any server starts (section 2).

Gates run in a fixed order and the first failing one decides:
enabled -> backend -> asset -> compatibility -> capacity -> runnable.
The gatherers (``specselect._admission``) turn engine probes and model facts into one `GateCheck` per
gate; this module only applies the order, so the rule lives in one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from specselect._core.families import classify_family
from specselect._core.status import RunStatus

__all__ = [
    "ADMITTED_REASON",
    "DISABLED_REASON",
    "GATE_ORDER",
    "GATE_STATUS",
    "LOSSY_FACT",
    "LOSSY_REFUSED",
    "OK_REASON",
    "AdmissionInput",
    "AdmissionResult",
    "FactValue",
    "GateCheck",
    "GateName",
    "admit",
]

FactValue = str | int | float | bool | None
"""A fact is a plain JSON scalar, so results stay readable without specselect installed."""

GateName = Literal["enabled", "backend", "asset", "compatibility", "capacity", "none"]
"""The gate that decided a result; ``none`` when every gate passed (``runnable``)."""

OK_REASON = "ok"
DISABLED_REASON = "disabled"
ADMITTED_REASON = "admitted"
LOSSY_FACT = "lossy_verification"
"""Gate 4's fact naming a candidate's lossy verification setting (why its outputs are not the target's)."""
LOSSY_REFUSED = "lossy_verification_not_allowed"
"""Gate 4's reason for a lossy candidate whose plan did not opt in (`allow_lossy`)."""

GATE_ORDER: tuple[Literal["backend", "asset", "compatibility", "capacity"], ...] = (
    "backend",
    "asset",
    "compatibility",
    "capacity",
)
"""The checked gates after ``enabled``, in the contract's order."""

GATE_STATUS: Mapping[str, RunStatus] = MappingProxyType(
    {
        "enabled": RunStatus.SKIPPED,
        "backend": RunStatus.UNSUPPORTED,
        "asset": RunStatus.ASSET_MISSING,
        "compatibility": RunStatus.INCOMPATIBLE,
        "capacity": RunStatus.CAPACITY_BLOCKED,
        "none": RunStatus.RUNNABLE,
    }
)
"""The run status a gate assigns when it decides."""

_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def _check_snake(value: str) -> str:
    if not _SNAKE.fullmatch(value):
        raise ValueError(f"reason {value!r} must be stable snake_case, e.g. 'method_not_in_backend'")
    return value


class GateCheck(BaseModel):
    """The outcome of one gate: passed or not, a stable snake_case reason and the facts behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: StrictBool
    reason: str = OK_REASON
    facts: dict[str, FactValue] = Field(default_factory=dict)

    @field_validator("reason")
    @classmethod
    def _reason_is_snake(cls, value: str) -> str:
        return _check_snake(value)

    @model_validator(mode="after")
    def _failure_says_why(self) -> GateCheck:
        # A failed gate reported as "ok" would be unreadable in results; force a real reason.
        if not self.passed and self.reason == OK_REASON:
            raise ValueError("a failed gate needs a reason other than 'ok', e.g. 'requires_cuda'")
        return self

    @classmethod
    def ok(cls, **facts: FactValue) -> GateCheck:
        """A passing check with reason ``ok``."""
        return cls(passed=True, reason=OK_REASON, facts=facts)

    @classmethod
    def fail(cls, reason: str, **facts: FactValue) -> GateCheck:
        """A failing check with the given snake_case reason."""
        return cls(passed=False, reason=reason, facts=facts)


class AdmissionInput(BaseModel):
    """Everything admission needs for one candidate: the enabled flag and one check per gate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: StrictBool
    backend: GateCheck
    """Gate 2: backend interface and this family's method available (version, hardware)."""
    asset: GateCheck
    """Gate 3: native MTP structure or a resolvable matching proposer checkpoint."""
    compatibility: GateCheck
    """Gate 4: target / tokenizer / proposer identities compatible."""
    capacity: GateCheck
    """Gate 5: estimated peak memory within the device budget."""


class AdmissionResult(BaseModel):
    """The admission answer for one candidate, with the gate and facts that decided it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    family: str
    """Canonical family name (aliases resolved)."""
    run_status: RunStatus
    gate: GateName
    reason: str
    facts: dict[str, FactValue] = Field(default_factory=dict)
    """Facts of every gate evaluated, keyed ``<gate>.<fact>``."""
    lossy: str | None = None
    """Why the candidate's verification is not exact, so its outputs are not the target's (gate 4 found it, the
    plan opted in with `allow_lossy`); None: exact verification."""

    @field_validator("run_status")
    @classmethod
    def _admission_status(cls, value: RunStatus) -> RunStatus:
        if value not in GATE_STATUS.values():
            raise ValueError(f"run_status {value.value!r} is not an admission status")
        return value

    @field_validator("reason")
    @classmethod
    def _reason_is_snake(cls, value: str) -> str:
        return _check_snake(value)

    @property
    def admitted(self) -> bool:
        """True when the candidate may be launched (``runnable``)."""
        return self.run_status is RunStatus.RUNNABLE

    @property
    def detail(self) -> str | None:
        """The deciding gate's words for a person (its ``detail`` fact), when it gave any."""
        value = self.facts.get(f"{self.gate}.detail")
        return value if isinstance(value, str) else None

    @property
    def explained(self) -> str:
        """The reason, followed by the deciding gate's detail when there is one (an admitted lossy candidate: why
        it is lossy)."""
        if self.admitted and self.lossy is not None:
            return f"{self.reason} (lossy: {self.lossy})"
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


def admit(candidate: str, family: str, inp: AdmissionInput) -> AdmissionResult:
    """Apply the gates in the contract's order; the first failing gate decides.

    Raises `UnknownFamilyError` (a ValueError) for an unknown family.
    """
    canonical = classify_family(family).family
    facts: dict[str, FactValue] = {"enabled.enabled": inp.enabled}
    if not inp.enabled:
        return AdmissionResult(
            candidate=candidate,
            family=canonical,
            run_status=RunStatus.SKIPPED,
            gate="enabled",
            reason=DISABLED_REASON,
            facts=facts,
        )
    for gate in GATE_ORDER:
        check: GateCheck = getattr(inp, gate)
        facts.update({f"{gate}.{key}": value for key, value in check.facts.items()})
        if not check.passed:
            return AdmissionResult(
                candidate=candidate,
                family=canonical,
                run_status=GATE_STATUS[gate],
                gate=gate,
                reason=check.reason,
                facts=facts,
                lossy=_lossy(facts),
            )
    return AdmissionResult(
        candidate=candidate,
        family=canonical,
        run_status=RunStatus.RUNNABLE,
        gate="none",
        reason=ADMITTED_REASON,
        facts=facts,
        lossy=_lossy(facts),
    )


def _lossy(facts: dict[str, FactValue]) -> str | None:
    found = facts.get(f"compatibility.{LOSSY_FACT}")
    return found if isinstance(found, str) else None
