"""The plan: a TOML file describing one selection experiment, validated into frozen pydantic models.

Load one with `load_plan("my-plan.toml")` or `load_plan("builtin:cpu-smoke")`; bad input raises
`specselect.errors.PlanError` whose `problems` has one `FILE: field: message (fix: ...)` line per issue.
"""

from specselect.plan.candidates import REFUSED_OPTION_KEYS, Candidate
from specselect.plan.loader import (
    BUILTIN_PREFIX,
    MAX_PLAN_BYTES,
    LoadedPlan,
    builtin_plan_names,
    builtin_plan_text,
    load_plan,
    parse_plan_text,
)
from specselect.plan.model import PLAN_SCHEMA_VERSION, Plan, canonical_json
from specselect.plan.overrides import EndpointConfig, TargetOverride, effective_target
from specselect.plan.problems import PlanProblem
from specselect.plan.rules import BASELINE_FAMILY, BASELINE_GROUP, TRACK_SEPARATOR
from specselect.plan.sections import (
    MANAGED_ENVIRONMENTS,
    EngineConfig,
    RunConfig,
    SamplingConfig,
    TargetConfig,
    ThresholdsConfig,
)
from specselect.plan.tracks import Track

__all__ = [
    "BASELINE_FAMILY",
    "BASELINE_GROUP",
    "BUILTIN_PREFIX",
    "MANAGED_ENVIRONMENTS",
    "MAX_PLAN_BYTES",
    "PLAN_SCHEMA_VERSION",
    "REFUSED_OPTION_KEYS",
    "TRACK_SEPARATOR",
    "Candidate",
    "EndpointConfig",
    "EngineConfig",
    "LoadedPlan",
    "Plan",
    "PlanProblem",
    "RunConfig",
    "SamplingConfig",
    "TargetConfig",
    "TargetOverride",
    "ThresholdsConfig",
    "Track",
    "builtin_plan_names",
    "builtin_plan_text",
    "canonical_json",
    "effective_target",
    "load_plan",
    "parse_plan_text",
]
