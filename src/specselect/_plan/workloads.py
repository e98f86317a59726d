"""The plan's [workloads] table: each name is a whole workload or a seeded sample of one.

    [workloads]
    repetition = "builtin:repetition"                                  # every item, in file order
    general = { source = "builtin:alpacaeval", items = 8, seed = 0 }   # a seeded sample of 8

A string is `builtin:NAME` or a workload file path (relative to the plan file); a table samples `items` of
its `source` (`specselect._workloads.sample`). Plans that use only strings hash exactly as before tables
existed. A built-in must exist, and a sample of one may not ask for more items than it holds.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, Strict, ValidatorFunctionWrapHandler, WrapValidator

from specselect._plan.rules import NAME_FIX, NAME_PATTERN, rule_error
from specselect._workloads.builtin import (
    BUILTIN_PREFIX,
    builtin_item_count,
    builtin_workload_names,
    closest_builtin,
    known_builtin,
)
from specselect._workloads.sample import WorkloadSample

__all__ = ["WORKLOAD_FORMS", "WorkloadRef", "WorkloadsTable", "check_workloads", "workload_source"]

_NAME_RE = re.compile(NAME_PATTERN)
WORKLOAD_FORMS = (
    'general = "builtin:general", mine = "workloads/mine.jsonl" '
    'or code = { source = "builtin:humaneval", items = 24, seed = 0 }'
)
"""The three ways to write a workload, for messages."""


def _one_form(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # Validating the table directly (not through the union) reports its own fields, e.g. `workloads.code.items`,
    # instead of one error per union member.
    if isinstance(value, str | WorkloadSample):
        return value
    if isinstance(value, dict):
        return WorkloadSample.model_validate(value)
    raise rule_error(
        "a workload is a string (builtin:NAME or a file path) or a sample table", f"write {WORKLOAD_FORMS}"
    )


WorkloadRef = Annotated[Annotated[str, Strict()] | WorkloadSample, WrapValidator(_one_form)]
"""One workload of a plan: `builtin:NAME`, a file path, or a `WorkloadSample` table."""

WorkloadsTable = Annotated[dict[Annotated[str, Strict()], WorkloadRef], Field(min_length=1, max_length=100)]


def workload_source(ref: str | WorkloadSample) -> str:
    """What a workload is read from: the string itself, or the sample's `source`."""
    return ref.source if isinstance(ref, WorkloadSample) else ref


def _check_builtin(source: str, field: str | tuple[str, str]) -> str:
    bare = source[len(BUILTIN_PREFIX) :]
    if not _NAME_RE.match(bare):
        raise rule_error(
            f"{source[:80]!r} is not a valid builtin workload name",
            'write builtin:NAME, e.g. "builtin:general"',
            field=field,
        )
    name = known_builtin(bare)
    if name is None:
        close = closest_builtin(bare)
        hint = f"; did you mean '{BUILTIN_PREFIX}{close}'?" if close else ""
        known = ", ".join(BUILTIN_PREFIX + n for n in builtin_workload_names())
        raise rule_error(f"unknown built-in workload {source[:80]!r}{hint}", f"use one of: {known}", field=field)
    return name


def _check_ref(name: str, ref: str | WorkloadSample) -> None:
    if len(name) > 100 or not _NAME_RE.match(name):
        raise rule_error(f"workload name {name[:60]!r} has invalid characters", NAME_FIX, field=name)
    source = workload_source(ref)
    field: str | tuple[str, str] = (name, "source") if isinstance(ref, WorkloadSample) else name
    if not source.startswith(BUILTIN_PREFIX):
        if not source.strip() or any(ord(ch) < 32 for ch in source) or len(source) > 4096:
            raise rule_error("a workload must be builtin:NAME or a file path", f"e.g. {WORKLOAD_FORMS}", field=field)
        return
    builtin = _check_builtin(source, field)
    if isinstance(ref, WorkloadSample):
        count = builtin_item_count(builtin)
        if ref.items > count:
            raise rule_error(
                f"a sample of {ref.items} items was asked for, but {source} holds {count}",
                f"use items = {count} or fewer",
                field=(name, "items"),
            )


def check_workloads(value: dict[str, str | WorkloadSample]) -> dict[str, str | WorkloadSample]:
    """Validate every workload reference of a plan (names, built-ins that exist, sample sizes)."""
    for name, ref in value.items():
        _check_ref(name, ref)
    return value
