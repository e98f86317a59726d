"""Sweeps: one `[[candidates]]` entry with several proposal lengths and/or an option grid.

    num_speculative_tokens = [1, 3, 5]          # one sub-candidate per length
    sweep = { prompt_lookup_max = [3, 5] }      # option -> values; the cartesian product of every key

    measure_schedule = true                     # and <name>.schedule: the per-batch-size schedule derived
                                                # from the lengths' measurements, measured on its own server

The plan expands such an entry into ordinary candidates (scalar length, scalar options) named
`<name>.k<N>` for the length and `.<key>-<value>` per grid key, keys in sorted order (so neither the names
nor the plan hash depend on how the table is written): `g1_ngram.k3.prompt_lookup_max-5`. Lengths vary
slowest, then the grid keys in sorted order. Each sub-candidate records its `SweepOrigin`; a dumped plan
holds the expanded entries and validates again unchanged (an entry whose `sweep` is an origin is not
expanded again). With `measure_schedule`, one more candidate `<name>.schedule` follows the sub-candidates: the
largest length, the same options, and `schedule_of = "<name>"`; the runner fills in its schedule once the
sub-candidates ran (see `specselect._evidence.sweeps.batch_schedule`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictInt, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from specselect._plan.rules import (
    BASELINE_FAMILY,
    BASELINE_GROUP,
    ENGINE_KINDS,
    TRACK_BASELINE_PATTERN,
    NameStr,
    rule_error,
)
from specselect.records.proposals import LENGTH_AXIS

__all__ = [
    "MAX_SUB_CANDIDATES",
    "SCHEDULE_OPTION",
    "SCHEDULE_SUFFIX",
    "SweepError",
    "SweepExpansion",
    "SweepOrigin",
    "SweepValue",
    "declares_sweep",
    "expand_entry",
    "is_origin",
    "sub_candidate_name",
]

SCHEDULE_OPTION = "measure_schedule"
"""The entry key that adds the derived per-batch-size schedule as its own candidate."""
SCHEDULE_SUFFIX = ".schedule"
"""The schedule candidate's name is its entry's name plus this."""
MAX_SUB_CANDIDATES = 64
"""At most this many sub-candidates from one entry: each one is a server start and a full measurement."""
_MAX_NAME_LENGTH = 100

SweepValue = StrictBool | StrictInt | Annotated[float, Strict()] | StrictStr
"""A swept value: a plain JSON scalar."""

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRACK_BASELINE_RE = re.compile(TRACK_BASELINE_PATTERN)
_LENGTH_RANGE = (1, 256)
_EXAMPLE_GRID = "sweep = { prompt_lookup_max = [3, 5] }"
_EXAMPLE_LENGTHS = f"{LENGTH_AXIS} = [1, 3, 5]"


def _name_part(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _NAME_UNSAFE.sub("-", value) or "empty"
    return str(value) if isinstance(value, int) else repr(value)


def sub_candidate_name(parent: str, axes: Sequence[str], values: Mapping[str, Any]) -> str:
    """`parent` plus `.k<N>` for the length axis and `.<key>-<value>` for every other axis, in `axes` order."""
    parts = [parent]
    for axis in axes:
        value = values[axis]
        parts.append(f"k{_name_part(value)}" if axis == LENGTH_AXIS else f"{axis}-{_name_part(value)}")
    return ".".join(parts)


class SweepOrigin(BaseModel):
    """Where a sub-candidate comes from: its declared entry and its point of the sweep."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    parent: NameStr = Field(description="the declared name of the swept [[candidates]] entry")
    values: dict[Annotated[str, Strict()], SweepValue] = Field(
        description="this sub-candidate's value of every swept key, plus its num_speculative_tokens"
    )
    axes: Annotated[tuple[Annotated[str, Strict()], ...], Field(min_length=1, max_length=32)] = Field(
        description="the swept keys, in naming order (num_speculative_tokens first when it is swept)"
    )

    @model_validator(mode="after")
    def _axes_have_values(self) -> SweepOrigin:
        if len(set(self.axes)) != len(self.axes):
            raise rule_error("an axis is listed twice", "list every swept key once", field="axes")
        missing = [axis for axis in self.axes if axis not in self.values]
        if missing:
            raise rule_error(f"no value for axis {missing[0]!r}", "give every axis a value", field="values")
        return self

    @property
    def length(self) -> int | None:
        """The sub-candidate's proposal length, if it has one."""
        value = self.values.get(LENGTH_AXIS)
        return value if type(value) is int else None

    @property
    def name(self) -> str:
        """The sub-candidate name this origin gives."""
        return sub_candidate_name(self.parent, self.axes, self.values)


@dataclass(frozen=True)
class SweepError:
    """A problem of a sweep declaration at `loc` below its `[[candidates]]` entry."""

    loc: tuple[str | int, ...]
    error: PydanticCustomError


@dataclass(frozen=True)
class SweepExpansion:
    """One declared entry: its sub-candidate entries (raw dicts), or the problems that prevent expanding it."""

    entries: tuple[dict[str, Any], ...]
    errors: tuple[SweepError, ...]


def is_origin(value: Any) -> bool:
    """True for the `sweep` value of an expanded sub-candidate (a `SweepOrigin`), False for a declared grid."""
    return isinstance(value, SweepOrigin) or (isinstance(value, dict) and isinstance(value.get("parent"), str))


def declares_sweep(entry: Any) -> bool:
    """True for a raw `[[candidates]]` table that asks to be expanded (a length list or an option grid)."""
    if not isinstance(entry, dict):
        return False
    return (
        isinstance(entry.get(LENGTH_AXIS), list)
        or ("sweep" in entry and not is_origin(entry["sweep"]))
        or SCHEDULE_OPTION in entry
    )


def _error(loc: tuple[str | int, ...], message: str, fix: str) -> SweepError:
    return SweepError(loc, rule_error(message, fix))


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, bool | int | str)


def _duplicate(values: Sequence[Any]) -> Any | None:
    seen: set[tuple[str, Any]] = set()
    for value in values:
        key = (type(value).__name__, value)
        if key in seen:
            return value
        seen.add(key)
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_lengths(lengths: list[Any]) -> list[SweepError]:
    loc: tuple[str | int, ...] = (LENGTH_AXIS,)
    low, high = _LENGTH_RANGE
    if not lengths:
        return [_error(loc, "the list of proposal lengths is empty", f"list at least one, e.g. {_EXAMPLE_LENGTHS}")]
    for index, value in enumerate(lengths):
        if type(value) is not int:
            message = f"proposal length {_shown(value)} is not an integer"
            return [_error((*loc, index), message, f"write whole numbers, e.g. {_EXAMPLE_LENGTHS}")]
        if not low <= value <= high:
            message = f"proposal length {value} is out of range"
            return [_error((*loc, index), message, f"use lengths from {low} to {high}, e.g. {_EXAMPLE_LENGTHS}")]
    twice = _duplicate(lengths)
    if twice is not None:
        return [_error(loc, f"proposal length {twice} is listed twice", f"remove the duplicate {twice}")]
    return []


def _refused_key_fix(key: str, refused: Mapping[str, str]) -> str | None:
    if key == LENGTH_AXIS:
        return f"use {LENGTH_AXIS} = [..] (a list) instead of sweeping it here"
    if key in refused:
        return refused[key]
    if not _OPTION_KEY_RE.match(key):
        return "use snake_case option names"
    return None


def _check_grid(grid: Any, options: Mapping[str, Any], refused: Mapping[str, str]) -> list[SweepError]:
    if not isinstance(grid, dict):
        return [_error(("sweep",), "sweep must be a table of option -> list of values", f"e.g. {_EXAMPLE_GRID}")]
    if not grid:
        return [_error(("sweep",), "sweep lists no option", f"e.g. {_EXAMPLE_GRID}, or remove sweep")]
    errors: list[SweepError] = []
    for key, values in grid.items():
        loc: tuple[str | int, ...] = ("sweep", key)
        fix = _refused_key_fix(key, refused)
        if fix is not None:
            errors.append(_error(loc, f"{key[:60]!r} cannot be swept as an option", fix))
        elif key in options:
            errors.append(
                _error(loc, f"{key} is both in options and in sweep", f"remove {key} from options (sweep sets it)")
            )
        elif not isinstance(values, list):
            errors.append(
                _error(loc, f"sweep.{key} must be a list of values", f"write {key} = [..], or move it to options")
            )
        elif not values:
            errors.append(_error(loc, f"sweep.{key} lists no value", f"list at least one, e.g. {key} = [3, 5]"))
        elif not all(_is_scalar(value) for value in values):
            errors.append(
                _error(loc, f"sweep.{key} values must be numbers, strings or booleans", "remove tables and arrays")
            )
        else:
            twice = _duplicate(values)
            if twice is not None:
                message = f"sweep.{key} lists {_shown(twice)} twice"
                errors.append(_error(loc, message, f"remove the duplicate {_shown(twice)}"))
    return errors


def _check_schedule(entry: dict[str, Any]) -> list[SweepError]:
    if SCHEDULE_OPTION not in entry:
        return []
    loc: tuple[str | int, ...] = (SCHEDULE_OPTION,)
    value = entry[SCHEDULE_OPTION]
    if type(value) is not bool:
        return [
            _error(loc, f"{SCHEDULE_OPTION} must be true or false (got {_shown(value)})", f"{SCHEDULE_OPTION} = true")
        ]
    if not value:
        return []
    if not isinstance(entry.get(LENGTH_AXIS), list):
        return [
            _error(
                loc,
                f"{SCHEDULE_OPTION} needs {LENGTH_AXIS} as a list: the lengths the schedule chooses from",
                f"write e.g. {_EXAMPLE_LENGTHS} (a single length [3] gives a cut-off schedule)",
            )
        ]
    if "sweep" in entry:
        return [
            _error(
                loc,
                f"{SCHEDULE_OPTION} derives one schedule over proposal lengths; an option grid would need one per "
                "combination",
                f"remove sweep = {{...}}, or put the grid in its own entry without {SCHEDULE_OPTION}",
            )
        ]
    return []


def _schedule_entry(entry: dict[str, Any], name: str, lengths: list[Any]) -> dict[str, Any]:
    sub = {key: value for key, value in entry.items() if key not in (LENGTH_AXIS, "sweep", SCHEDULE_OPTION)}
    sub.update({"name": name + SCHEDULE_SUFFIX, LENGTH_AXIS: max(lengths), "schedule_of": name})
    return sub


def _attaches(engine_kind: str | None) -> bool:
    kind = ENGINE_KINDS.get(engine_kind) if engine_kind is not None else None
    return kind is not None and not kind.launches_servers


def _check_role(entry: dict[str, Any], where: tuple[str | int, ...], engine_kind: str | None) -> list[SweepError]:
    name = entry.get("name")
    baseline = entry.get("family") == BASELINE_FAMILY or (
        isinstance(name, str) and (name == BASELINE_GROUP or bool(_TRACK_BASELINE_RE.match(name)))
    )
    if baseline:
        return [_error(where, "a baseline runs the target alone and cannot be swept", "remove the list or sweep")]
    if _attaches(engine_kind) or "endpoint" in entry:
        return [
            _error(
                where,
                "kind = 'openai' measures servers you run: a sweep needs one server per configuration",
                "run one server per configuration and declare one [[candidates]] entry with its endpoint for each",
            )
        ]
    return []


def expand_entry(entry: dict[str, Any], *, engine_kind: str | None, refused: Mapping[str, str]) -> SweepExpansion:
    """Expand one raw entry that `declares_sweep`; `refused` are the option keys that cannot be set."""
    lengths = entry.get(LENGTH_AXIS)
    grid = entry.get("sweep") if "sweep" in entry else {}
    options = entry.get("options", {})
    where: tuple[str | int, ...] = (LENGTH_AXIS,) if isinstance(lengths, list) else ("sweep",)
    errors = _check_role(entry, where, engine_kind)
    if isinstance(lengths, list):
        errors += _check_lengths(lengths)
    if "sweep" in entry:
        errors += _check_grid(grid, options if isinstance(options, dict) else {}, refused)
    errors += _check_schedule(entry)
    name = entry.get("name")
    if not errors and not isinstance(lengths, list) and "sweep" not in entry:
        # `measure_schedule = false` on an entry that sweeps nothing: an ordinary candidate.
        return SweepExpansion(({k: v for k, v in entry.items() if k != SCHEDULE_OPTION},), ())
    if errors or not isinstance(name, str) or not isinstance(options, dict) or not isinstance(grid, dict):
        # An unusable name or options table is reported by the candidate's own validation.
        return SweepExpansion((), tuple(errors))
    keys = sorted(grid)
    axes = ([LENGTH_AXIS] if isinstance(lengths, list) else []) + keys
    length_values: list[Any] = lengths if isinstance(lengths, list) else [lengths]
    count = len(length_values) * math.prod(len(grid[key]) for key in keys)
    if count > MAX_SUB_CANDIDATES:
        return SweepExpansion(
            (),
            (
                _error(
                    where,
                    f"the sweep expands into {count} sub-candidates; at most {MAX_SUB_CANDIDATES}",
                    "sweep fewer values, or split it over several [[candidates]] entries",
                ),
            ),
        )
    out: list[dict[str, Any]] = []
    for length, *point in itertools.product(length_values, *(grid[key] for key in keys)):
        values: dict[str, Any] = {LENGTH_AXIS: length} if type(length) is int else {}
        values.update(zip(keys, point, strict=True))
        sub_name = sub_candidate_name(name, axes, values)
        if len(sub_name) > _MAX_NAME_LENGTH:
            message = f"sub-candidate name {sub_name[:40]!r}... is {len(sub_name)} characters long"
            fix = f"shorten the candidate name so every sub-candidate name has at most {_MAX_NAME_LENGTH}"
            return SweepExpansion((), (_error(("name",), message, fix),))
        sub = {key: value for key, value in entry.items() if key not in (LENGTH_AXIS, "sweep", SCHEDULE_OPTION)}
        if length is not None:
            sub[LENGTH_AXIS] = length
        sub["name"] = sub_name
        sub["options"] = {**options, **dict(zip(keys, point, strict=True))}
        sub["sweep"] = {"parent": name, "values": values, "axes": list(axes)}
        out.append(sub)
    if entry.get(SCHEDULE_OPTION) is True:
        out.append(_schedule_entry(entry, name, length_values))
    return SweepExpansion(tuple(out), ())
