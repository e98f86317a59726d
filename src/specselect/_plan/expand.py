"""Validate the `[[candidates]]` array: expand sweeps, check names, report problems at the declared entry.

A sweep turns one declared entry into several candidates, so pydantic sees other indexes than the user
wrote. Problems found in a sub-candidate are moved back to the declared entry (`candidates[i]`), a value
that came from the grid is reported at `sweep.KEY`, and a problem shared by every sibling is reported once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from specselect._plan.candidates import REFUSED_OPTION_KEYS, Candidate
from specselect._plan.rules import RULE_ERROR_TYPE, rule_error
from specselect._plan.sweep import SCHEDULE_OPTION, SweepError, declares_sweep, expand_entry
from specselect.records.proposals import LENGTH_AXIS

__all__ = ["declared_index", "validate_candidates"]

_KNOWN_ERROR_TYPES = frozenset(get_args(ErrorType))
_MAX_NAMED = 3

Loc = tuple[str | int, ...]


@dataclass
class _Entries:
    """The expanded array: raw entries, the declared index of each, and the sub-candidate names per entry."""

    items: list[Any] = field(default_factory=list)
    declared: list[int] = field(default_factory=list)
    siblings: dict[int, list[str]] = field(default_factory=dict)
    axes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    errors: list[SweepError] = field(default_factory=list)


def _name_of(item: Any) -> str | None:
    if isinstance(item, Candidate):
        return item.name
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) else None


def _expand(value: Sequence[Any], engine_kind: str | None) -> _Entries:
    out = _Entries()
    for index, entry in enumerate(value):
        if not declares_sweep(entry):
            out.items.append(entry)
            out.declared.append(index)
            continue
        expansion = expand_entry(entry, engine_kind=engine_kind, refused=REFUSED_OPTION_KEYS)
        out.errors += [SweepError((index, *problem.loc), problem.error) for problem in expansion.errors]
        if not expansion.entries:
            # Still validate the rest of the entry, so its other problems are reported too.
            out.items.append({k: v for k, v in entry.items() if k not in ("sweep", LENGTH_AXIS, SCHEDULE_OPTION)})
            out.declared.append(index)
            continue
        out.siblings[index] = [sub["name"] for sub in expansion.entries]
        out.axes[index] = tuple(expansion.entries[0]["sweep"]["axes"])
        for sub in expansion.entries:
            out.items.append(sub)
            out.declared.append(index)
    return out


def _collisions(value: Sequence[Any], entries: _Entries) -> list[SweepError]:
    """Every name claimed by two declared entries (a sweep claims its own name and its sub-candidates')."""
    claimed: dict[str, int] = {}
    errors: list[SweepError] = []
    reported: set[tuple[int, int]] = set()
    for index, entry in enumerate(value):
        own = _name_of(entry)
        names = ([own] if own is not None else []) + entries.siblings.get(index, [])
        for name in names:
            other = claimed.setdefault(name, index)
            if other == index or (index, other) in reported:
                continue
            reported.add((index, other))
            other_name = _name_of(value[other])
            if name == own and name == other_name:
                message = f"duplicate candidate name {name!r} (also candidates[{other}])"
                fix = "give every candidate a unique name"
            else:
                here = "" if name == own else " (a sub-candidate of this sweep)"
                there = f"candidates[{other}]" if name == other_name else f"the sweep of candidates[{other}]"
                message = f"duplicate candidate name {name!r}{here}: also from {there}"
                fix = "rename one of the two entries"
            errors.append(SweepError((index, "name"), rule_error(message, fix)))
    return errors


def _moved(loc: Loc, axes: tuple[str, ...]) -> Loc:
    """A grid value is written under `sweep`, not `options`: report it there."""
    if len(loc) >= 2 and loc[0] == "options" and loc[1] in axes and loc[1] != LENGTH_AXIS:
        return ("sweep", *loc[1:])
    return loc


def _some_of(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMED])
    return shown if len(names) <= _MAX_NAMED else f"{shown} and {len(names) - _MAX_NAMED} more"


def _remap(errors: list[ErrorDetails], entries: _Entries) -> list[tuple[Loc, InitErrorDetails]]:
    """Handler errors (at expanded indexes) -> errors at declared indexes, one per distinct problem."""
    groups: dict[tuple[Any, ...], tuple[ErrorDetails, Loc, list[str]]] = {}
    for error in errors:
        loc: Loc = tuple(error["loc"])
        if not loc or not isinstance(loc[0], int) or loc[0] >= len(entries.items):
            groups.setdefault(("whole", len(groups)), (error, loc, []))
            continue
        index = entries.declared[loc[0]]
        rest = loc[1:]
        ctx = dict(error.get("ctx") or {})
        if error["type"] == RULE_ERROR_TYPE and "field" in ctx:
            sub = ctx["field"]
            rest = (*rest, *(sub if isinstance(sub, tuple) else (sub,)))
        rest = _moved(rest, entries.axes.get(index, ()))
        key = (index, rest, error["type"], error["msg"])
        name = _name_of(entries.items[loc[0]])
        if key not in groups:
            groups[key] = (error, (index, *rest), [])
        if index in entries.siblings and name is not None:
            groups[key][2].append(name)
    out: list[tuple[Loc, InitErrorDetails]] = []
    for key, (error, loc, names) in groups.items():
        index = key[0]
        partial = isinstance(index, int) and index in entries.siblings and len(names) < len(entries.siblings[index])
        out.append((loc, _rebuilt(error, loc, prefix=f"in {_some_of(names)}: " if partial else "")))
    return out


def _rebuilt(error: ErrorDetails, loc: Loc, *, prefix: str) -> InitErrorDetails:
    ctx = dict(error.get("ctx") or {})
    error_type = error["type"]
    if error_type == RULE_ERROR_TYPE:
        ctx.pop("field", None)
        ctx["message"] = prefix + str(ctx["message"])
        return InitErrorDetails(type=PydanticCustomError(error_type, "{message}", ctx), loc=loc, input=error["input"])
    if error_type in _KNOWN_ERROR_TYPES:
        details = InitErrorDetails(type=error_type, loc=loc, input=error["input"])
        if ctx:
            details["ctx"] = ctx
        return details
    return InitErrorDetails(type=PydanticCustomError(error_type, error["msg"]), loc=loc, input=error["input"])


def _own(problem: SweepError) -> tuple[Loc, InitErrorDetails]:
    ctx = dict(problem.error.context or {})
    sub = ctx.pop("field", None)
    loc = (*problem.loc, *(sub if isinstance(sub, tuple) else (() if sub is None else (sub,))))
    return loc, InitErrorDetails(type=PydanticCustomError(RULE_ERROR_TYPE, "{message}", ctx), loc=loc, input=None)


def validate_candidates(
    value: Any, handler: Callable[[Any], tuple[Candidate, ...]], *, engine_kind: str | None
) -> tuple[Candidate, ...]:
    """The wrap validator of `Plan.candidates` (see the module docstring)."""
    if not isinstance(value, list | tuple):
        return handler(value)
    entries = _expand(value, engine_kind)
    problems = [_own(problem) for problem in entries.errors + _collisions(value, entries)]
    try:
        result = handler(entries.items)
    except ValidationError as exc:
        problems += _remap(exc.errors(), entries)
    else:
        if not problems:
            return result
    problems.sort(key=lambda item: item[0][0] if item[0] and isinstance(item[0][0], int) else -1)
    raise ValidationError.from_exception_data("candidates", [details for _, details in problems])


def declared_index(candidates: Sequence[Candidate], index: int) -> int:
    """The `[[candidates]]` entry that candidate `index` of a validated plan was declared by."""
    declared = -1
    previous: str | None = None
    for cand in candidates[: index + 1]:
        # Sub-candidates, and the schedule candidate after them, come from their entry's declaration.
        entry = cand.sweep.parent if cand.sweep is not None else cand.schedule_of
        if entry is None or entry != previous:
            declared += 1
        previous = entry
    return declared
