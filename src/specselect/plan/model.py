"""The plan: one selection experiment, validated and frozen; its hash identifies it in every result."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, field_validator, model_validator

from specselect.plan.candidates import Candidate
from specselect.plan.rules import NAME_FIX, NAME_PATTERN, NameStr, rule_error
from specselect.plan.sections import (
    EngineConfig,
    PlanSection,
    RunConfig,
    SamplingConfig,
    TargetConfig,
    ThresholdsConfig,
)

__all__ = ["PLAN_SCHEMA_VERSION", "Plan", "canonical_json"]

PLAN_SCHEMA_VERSION = 1
_NAME_RE = re.compile(NAME_PATTERN)


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON: the same data always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check_workload_ref(name: str, ref: str) -> None:
    if len(name) > 100 or not _NAME_RE.match(name):
        raise rule_error(f"workload name {name[:60]!r} has invalid characters", NAME_FIX, field=name)
    if ref.startswith("builtin:"):
        if not _NAME_RE.match(ref[len("builtin:") :]):
            raise rule_error(
                f"{ref[:80]!r} is not a valid builtin workload name",
                'write builtin:NAME, e.g. "builtin:general"',
                field=name,
            )
    elif not ref.strip() or any(ord(ch) < 32 for ch in ref) or len(ref) > 4096:
        raise rule_error(
            "a workload must be builtin:NAME or a file path",
            'e.g. general = "builtin:general" or mine = "workloads/mine.jsonl"',
            field=name,
        )


class Plan(PlanSection):
    """A selection experiment: target, engine, protocol, workloads, policy and candidate groups."""

    schema_version: Literal[1] = Field(description="plan format version; this specselect reads 1")
    label: NameStr = Field(description="short name of the experiment, used in result paths")
    description: Annotated[str, Strict(), Field(max_length=10_000)] = ""
    target: TargetConfig
    engine: EngineConfig
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    workloads: Annotated[
        dict[Annotated[str, Strict()], Annotated[str, Strict()]], Field(min_length=1, max_length=100)
    ] = Field(description='name -> "builtin:NAME" or a file path (relative to the plan file)')
    thresholds: ThresholdsConfig = Field(default_factory=ThresholdsConfig)
    candidates: Annotated[tuple[Candidate, ...], Field(max_length=1000)] = ()

    @field_validator("schema_version", mode="before")
    @classmethod
    def _integer_version(cls, value: Any) -> Any:
        # Literal[1] alone would also take `true` and `1.0`.
        if type(value) is not int:
            raise rule_error(
                f"must be the integer {PLAN_SCHEMA_VERSION}",
                f"write schema_version = {PLAN_SCHEMA_VERSION}",
            )
        return value

    @field_validator("workloads")
    @classmethod
    def _workload_refs(cls, value: dict[str, str]) -> dict[str, str]:
        for name, ref in value.items():
            _check_workload_ref(name, ref)
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> Plan:
        first: dict[str, int] = {}
        for index, candidate in enumerate(self.candidates):
            if candidate.name in first:
                raise rule_error(
                    f"duplicate candidate name {candidate.name!r} (also candidates[{first[candidate.name]}])",
                    "give every candidate a unique name",
                    field=("candidates", index, "name"),
                )
            first[candidate.name] = index
        return self

    @property
    def baseline(self) -> Candidate:
        """The target-only baseline group: declared explicitly or added implicitly."""
        for candidate in self.candidates:
            if candidate.is_baseline:
                return candidate
        return Candidate.implicit_baseline()

    @property
    def groups(self) -> tuple[Candidate, ...]:
        """Every group to run: the baseline first, then the candidates in file order."""
        return (self.baseline, *(c for c in self.candidates if not c.is_baseline))

    def group(self, name: str) -> Candidate:
        """The group called `name`; KeyError if there is none."""
        for candidate in self.groups:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    @property
    def sampling_key(self) -> str:
        """Shortcut for `plan.sampling.sampling_key`."""
        return self.sampling.sampling_key

    def canonical_json(self) -> str:
        """The canonical JSON of the validated plan (defaults filled in, keys sorted)."""
        return canonical_json(self.model_dump(mode="json"))

    @property
    def plan_hash(self) -> str:
        """sha256 (hex) of the canonical JSON: stable across key order, formatting and spelled-out defaults."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()
