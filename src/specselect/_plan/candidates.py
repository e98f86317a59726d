"""A `[[candidates]]` entry: one speculative configuration to compare with the target-only baseline."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from specselect._core.families import AssetKind, UnknownFamilyError, classify_family, normalize_family_name
from specselect._plan.overrides import EndpointConfig, TargetOverride
from specselect._plan.rules import (
    BASELINE_FAMILY,
    BASELINE_GROUP,
    TRACK_BASELINE_PATTERN,
    TRACK_SEPARATOR,
    EngineArgs,
    EnvTable,
    NameStr,
    check_model_ref,
    ref_revision,
    rule_error,
)
from specselect._plan.sections import PlanSection
from specselect._plan.sweep import MAX_SUB_CANDIDATES, SweepOrigin
from specselect.records.proposals import LENGTH_AXIS

__all__ = ["BLOCK_SUFFIX", "CONTROL_SUFFIX", "REFUSED_OPTION_KEYS", "Candidate", "block_of_error", "check_options"]

CONTROL_SUFFIX = ".aa"
"""An A/A control's name: its baseline's name and this suffix."""

BLOCK_SUFFIX = ".block"
"""A block baseline's name: its track baseline's name, this suffix and the block's number (2, 3, ...)."""

REFUSED_OPTION_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "tensor_parallel_size": "use draft_tensor_parallel_size",
        "model": "use proposer",
        "method": "use the candidate field method",
        "num_speculative_tokens": "use the candidate field num_speculative_tokens",
    }
)
"""Option keys that have their own candidate field or belong to the engine -> the fix."""

_TRACK_BASELINE_RE = re.compile(TRACK_BASELINE_PATTERN)
_OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_POSITIVE_INT_OPTIONS = ("prompt_lookup_min", "prompt_lookup_max", "draft_tensor_parallel_size")
_BOOL_OPTIONS = ("use_heterogeneous_vocab",)


def _check_option_value(key: str, value: Any, depth: int = 0) -> None:
    # Option values go into the engine's JSON config: refuse TOML dates/times, which have no JSON form.
    if isinstance(value, dt.date | dt.time):
        raise rule_error(
            f"a date/time value is not a valid option value ({value})", "use a string or number", field=key
        )
    if depth > 8:
        raise rule_error("option value is nested too deeply", "flatten it", field=key)
    if isinstance(value, list):
        for item in value:
            _check_option_value(key, item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _check_option_value(key, item, depth + 1)


def block_of_error(field: str | tuple[str | int, ...] = "block_of") -> PydanticCustomError:
    """A plan that declares a block's baseline itself."""
    return rule_error(
        "a block's baseline is written by specselect for [run] candidates_per_block",
        "remove block_of (set candidates_per_block in [run] to split the candidates into blocks)",
        field=field,
    )


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate a candidate's method options (the extra keys of the engine's speculative config)."""
    for key, value in options.items():
        if key in REFUSED_OPTION_KEYS:
            raise rule_error(f"{key!r} cannot be set in options", REFUSED_OPTION_KEYS[key], field=key)
        if not _OPTION_KEY_RE.match(key):
            raise rule_error(f"{key[:60]!r} is not a valid option name", "use snake_case option names", field=key)
        _check_option_value(key, value)
        if key in _POSITIVE_INT_OPTIONS and isinstance(value, list):
            raise rule_error(
                f"{key} must be one integer (got a list)",
                f"to try several values, move it to sweep = {{ {key} = [..] }}",
                field=key,
            )
        if key in _POSITIVE_INT_OPTIONS and (type(value) is not int or value < 1):
            raise rule_error(f"{key} must be an integer >= 1 (got {value!r:.40})", f"e.g. {key} = 2", field=key)
        if key in _BOOL_OPTIONS and type(value) is not bool:
            raise rule_error(f"{key} must be true or false (got {value!r:.40})", f"e.g. {key} = true", field=key)
    low, high = options.get("prompt_lookup_min"), options.get("prompt_lookup_max")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise rule_error(
            f"prompt_lookup_min ({low}) is greater than prompt_lookup_max ({high})",
            "make prompt_lookup_min <= prompt_lookup_max",
            field="prompt_lookup_min",
        )
    return options


_BASELINE_FORBIDDEN = (
    "schedule_of",
    "method",
    "num_speculative_tokens",
    "proposer",
    "options",
    "min_engine_version",
    "engine_args",
    "env",
    "sweep",
)

_LENGTH_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "integer", "exclusiveMinimum": 0, "maximum": 256},
        {
            "type": "array",
            "items": {"type": "integer", "exclusiveMinimum": 0, "maximum": 256},
            "minItems": 1,
            "maxItems": MAX_SUB_CANDIDATES,
            "uniqueItems": True,
        },
        {"type": "null"},
    ]
}
_SCALAR_SCHEMA: dict[str, Any] = {"type": ["integer", "number", "string", "boolean"]}
_SWEEP_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "description": "option grid: option -> list of values (one sub-candidate per combination)",
            "additionalProperties": {"type": "array", "items": _SCALAR_SCHEMA, "minItems": 1},
            "minProperties": 1,
        },
        {
            "type": "object",
            "description": "the origin of an expanded sub-candidate (written by specselect)",
            "properties": {
                "parent": {"type": "string"},
                "values": {"type": "object", "additionalProperties": _SCALAR_SCHEMA},
                "axes": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["parent", "values", "axes"],
            "additionalProperties": False,
        },
        {"type": "null"},
    ]
}


class Candidate(PlanSection):
    """One group of the experiment; `g0_target_only` (family `target_only`) is the baseline."""

    name: NameStr
    family: Annotated[str, Strict()] = Field(
        description="proposer family (ngram, suffix, draft_model, mtp, eagle, dflash, dspark, ...); "
        "stored in canonical form"
    )
    method: Annotated[str, Strict(), Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")] | None = Field(
        default=None, description="backend method; omitted = the engine's default for the family"
    )
    enabled: Annotated[bool, Strict()] = True
    num_speculative_tokens: Annotated[
        Annotated[int, Strict(), Field(gt=0, le=256)] | None, WithJsonSchema(_LENGTH_SCHEMA)
    ] = Field(default=None, description="tokens proposed per step; a list sweeps several (one sub-candidate each)")
    proposer: Annotated[str, Strict()] | None = Field(
        default=None,
        description="model reference of the draft/EAGLE/... checkpoint: builtin:NAME, a hub id 'org/name' or "
        "'org/name@REVISION', or a directory",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="extra keys of the engine's speculative config, e.g. prompt_lookup_max"
    )
    min_engine_version: Annotated[str, Strict(), Field(max_length=100)] | None = Field(
        default=None, description="PEP 440 version; older engines mark the candidate unsupported"
    )
    engine_args: EngineArgs = Field(default=(), description="extra engine args, this group")
    env: EnvTable = Field(default_factory=dict)
    target: TargetOverride | None = Field(
        default=None, description="run this group on another target (its own track, with its own baseline)"
    )
    endpoint: EndpointConfig | None = Field(
        default=None, description='kind = "openai": the running server this group measures'
    )
    allow_lossy: Annotated[bool, Strict()] = Field(
        default=False,
        description="measure this candidate although its verification trades exactness for speed (vLLM's "
        "rejection_sample_method 'synthetic', SGLang's accept thresholds below 1): its outputs are then not the "
        "target's, it is marked lossy, and its decision rests on the distribution test at temperature > 0",
    )
    sweep: Annotated[SweepOrigin | None, WithJsonSchema(_SWEEP_SCHEMA)] = Field(
        default=None,
        description="in a plan file: an option grid to sweep, e.g. { prompt_lookup_max = [3, 5] }; "
        "after expansion: where this sub-candidate comes from",
    )
    schedule_of: NameStr | None = Field(
        default=None,
        description="written by specselect for measure_schedule = true: this candidate runs the per-batch-size "
        "schedule derived from the sub-candidates of entry NAME, filled in once they have run",
    )

    control_of: NameStr | None = Field(
        default=None,
        description="written by specselect for [run] aa_control = true: this group runs the baseline NAME's own "
        "configuration next to it in every round and is judged as if it were a candidate (an A/A control)",
    )
    block_of: NameStr | None = Field(
        default=None,
        description="written by specselect for [run] candidates_per_block: this group is the baseline NAME's "
        "configuration launched again for another block of that track's candidates, which are paired with it",
    )

    @model_serializer(mode="wrap")
    def _omit_no_sweep(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Plans without sweeps or schedules keep the dump, and so the plan hash, they had before those existed.
        data: dict[str, Any] = handler(self)
        for name in ("sweep", "schedule_of", "control_of", "block_of"):
            if getattr(self, name) is None:
                data.pop(name, None)
        if not self.allow_lossy:
            data.pop("allow_lossy", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _baseline_family_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and "family" not in data and isinstance(data.get("name"), str):
            name = data["name"]
            if name == BASELINE_GROUP or _TRACK_BASELINE_RE.match(name):
                return {**data, "family": BASELINE_FAMILY}
        return data

    @field_validator("name", mode="wrap")
    @classmethod
    def _track_baseline_name(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # `@` is refused in every other name, so a track baseline can never collide with a candidate.
        if isinstance(value, str) and _TRACK_BASELINE_RE.match(value):
            return value
        return handler(value)

    @field_validator("family")
    @classmethod
    def _canonical_family(cls, value: str) -> str:
        if normalize_family_name(value) == normalize_family_name(BASELINE_FAMILY):
            return BASELINE_FAMILY
        try:
            return classify_family(value).family
        except UnknownFamilyError as exc:
            fix = "set family to one of the known families (case, '-' and '_' do not matter)"
            raise rule_error(str(exc), fix) from None

    @field_validator("proposer")
    @classmethod
    def _proposer_ref(cls, value: str | None) -> str | None:
        return None if value is None else check_model_ref(value, what="proposer")

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_options(value)

    @model_validator(mode="after")
    def _one_proposer_revision(self) -> Candidate:
        pinned = ref_revision(self.proposer)
        if pinned is not None and "revision" in self.options:
            raise rule_error(
                f"the proposer's revision is given twice: @{pinned} in proposer and options.revision",
                'remove options.revision (proposer = "org/name@REVISION" pins it)',
                field="options",
            )
        return self

    @field_validator("min_engine_version")
    @classmethod
    def _pep440(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            Version(value)
        except InvalidVersion:
            raise rule_error(f"{value[:60]!r} is not a PEP 440 version", 'write a version such as "0.11.0"') from None
        return value

    @model_validator(mode="after")
    def _written_block_baseline(self) -> Candidate:
        # Before `_roles`: a declared block_of would otherwise read as a misnamed baseline.
        if self.block_of is not None and not self.name.startswith(f"{self.block_of}{BLOCK_SUFFIX}"):
            raise block_of_error()
        return self

    @model_validator(mode="after")
    def _roles(self) -> Candidate:
        if self.is_baseline:
            if self.family != BASELINE_FAMILY:
                raise rule_error(
                    f"{self.name} is the reserved name of the target-only baseline",
                    f'rename this candidate, or set family = "{BASELINE_FAMILY}" to declare the baseline',
                    field="name",
                )
            if not self.enabled:
                raise rule_error(
                    "the baseline cannot be disabled: every candidate is compared with it",
                    "remove enabled = false",
                    field="enabled",
                )
            for name in _BASELINE_FORBIDDEN:
                if getattr(self, name):
                    raise rule_error(
                        f"the baseline runs the target alone and takes no {name}",
                        f"remove {name}; settings shared by every group go in [engine]",
                        field=name,
                    )
            if self.is_track_baseline and self.target is None:
                raise rule_error(
                    f"{self.name} is the baseline of another target's track and needs that target",
                    "add target = { model = ... } (the target its candidates run on)",
                    field="target",
                )
            if not self.is_track_baseline and self.target is not None:
                raise rule_error(
                    f"{BASELINE_GROUP} runs the plan's [target]",
                    f"remove target, or name this baseline {BASELINE_GROUP}{TRACK_SEPARATOR}NAME for another track",
                    field="target",
                )
            return self
        if self.control_of is not None:
            return self._control_role()
        if self.family == BASELINE_FAMILY:
            raise rule_error(
                f"family {BASELINE_FAMILY!r} is reserved for the baseline {BASELINE_GROUP}",
                f"remove this entry (the baseline always runs), or name it {BASELINE_GROUP}",
                field="family",
            )
        asset_kind = classify_family(self.family).asset_kind
        if self.proposer is not None and asset_kind is AssetKind.NONE:
            raise rule_error(f"family {self.family!r} needs no proposer model", "remove proposer", field="proposer")
        if self.proposer is not None and asset_kind is AssetKind.TARGET_NATIVE:
            raise rule_error(
                f"family {self.family!r} uses the target's own layers, not a proposer model",
                'remove proposer, or use family = "draft_model" for a separate model',
                field="proposer",
            )
        return self

    def _control_role(self) -> Candidate:
        if self.family != BASELINE_FAMILY or self.name != f"{self.control_of}{CONTROL_SUFFIX}":
            raise rule_error(
                "an A/A control is written by specselect for [run] aa_control = true",
                "remove control_of and set aa_control = true in [run]",
                field="control_of",
            )
        for name in _BASELINE_FORBIDDEN:
            if getattr(self, name):
                raise rule_error(
                    f"an A/A control runs its baseline's configuration and takes no {name}",
                    f"remove {name}",
                    field=name,
                )
        return self

    @model_validator(mode="after")
    def _sweep_origin(self) -> Candidate:
        origin = self.sweep
        if origin is None or self.is_baseline:
            return self
        for key, value in origin.values.items():
            actual = self.num_speculative_tokens if key == LENGTH_AXIS else self.options.get(key)
            if type(actual) is not type(value) or actual != value:
                raise rule_error(
                    f"sweep.values.{key} ({value!r:.40}) does not match the candidate's {key} ({actual!r:.40})",
                    "declare the sweep in the plan and let specselect expand it",
                    field="sweep",
                )
        if self.name != origin.name:
            raise rule_error(
                f"a sub-candidate of {origin.parent} with these values is named {origin.name!r}",
                "declare the sweep in the plan and let specselect expand it",
                field="name",
            )
        return self

    def option_location(self, key: str) -> str:
        """Where the plan file sets option `key` of this candidate: a swept key in its declared entry's
        `sweep` grid, any other in that entry's `options` (sub-candidates and schedules are written by specselect)."""
        entry = self.sweep.parent if self.sweep is not None else self.schedule_of or self.name
        table = "sweep" if self.sweep is not None and key in self.sweep.axes else "options"
        return f"candidates.{entry}.{table}.{key}"

    @property
    def is_baseline(self) -> bool:
        """True for a target-only baseline group (the default one, a track's, or a block's)."""
        return self.name == BASELINE_GROUP or self.is_track_baseline or self.block_of is not None

    @property
    def is_track_baseline(self) -> bool:
        """True for the baseline of another target's track (`g0_target_only@NAME`)."""
        return self.name.startswith(BASELINE_GROUP + TRACK_SEPARATOR)

    @property
    def is_control(self) -> bool:
        """True for an A/A control (`[run] aa_control`): the baseline's configuration judged as a candidate."""
        return self.control_of is not None

    @property
    def runs_target_only(self) -> bool:
        """True for a group that serves the target alone: a baseline or an A/A control."""
        return self.is_baseline or self.is_control

    @classmethod
    def control(cls, baseline: Candidate) -> Candidate:
        """The A/A control of `baseline`: its configuration under its own name, `<baseline>.aa`."""
        return cls(
            name=f"{baseline.name}{CONTROL_SUFFIX}",
            family=BASELINE_FAMILY,
            control_of=baseline.name,
            target=baseline.target,
        )

    def for_block(self, number: int) -> Candidate:
        """This baseline launched again for block `number` (2, 3, ...) of its track: `<baseline>.block<number>`,
        the same configuration under its own name (`[run] candidates_per_block`)."""
        return self.model_copy(update={"name": f"{self.name}{BLOCK_SUFFIX}{number}", "block_of": self.name})

    @classmethod
    def implicit_baseline(cls) -> Candidate:
        """The baseline group a plan gets when it does not declare one."""
        return cls(name=BASELINE_GROUP, family=BASELINE_FAMILY)
