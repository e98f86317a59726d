"""The plan: a TOML file describing one selection experiment, validated into frozen pydantic models.

Load one with `load_plan("my-plan.toml")` or `load_plan("builtin:cpu-smoke")`; bad input raises
`specselect.errors.PlanError` whose `problems` has one `FILE: field: message (fix: ...)` line per issue.
A swept entry (a list of proposal lengths, an option grid) is expanded into ordinary candidates; see
`specselect._plan.sweep` and `Plan.sweeps`.
"""

from specselect._plan.candidates import REFUSED_OPTION_KEYS, Candidate
from specselect._plan.loader import (
    BUILTIN_PREFIX,
    MAX_PLAN_BYTES,
    LoadedPlan,
    ServedModel,
    builtin_plan_names,
    builtin_plan_text,
    load_plan,
    parse_plan_text,
)
from specselect._plan.model import PLAN_SCHEMA_VERSION, Plan
from specselect._plan.overrides import EndpointConfig, TargetOverride, effective_target
from specselect._plan.problems import PlanProblem
from specselect._plan.rules import BASELINE_FAMILY, BASELINE_GROUP, TRACK_SEPARATOR
from specselect._plan.sections import (
    MANAGED_ENVIRONMENTS,
    EngineConfig,
    RunConfig,
    SamplingConfig,
    TargetConfig,
    ThresholdsConfig,
)
from specselect._plan.sweep import MAX_SUB_CANDIDATES, SweepOrigin, SweepValue, sub_candidate_name
from specselect._plan.tracks import Track

__all__ = [
    "BASELINE_FAMILY",
    "BASELINE_GROUP",
    "BUILTIN_PREFIX",
    "MANAGED_ENVIRONMENTS",
    "MAX_PLAN_BYTES",
    "MAX_SUB_CANDIDATES",
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
    "ServedModel",
    "SweepOrigin",
    "SweepValue",
    "TargetConfig",
    "TargetOverride",
    "ThresholdsConfig",
    "Track",
    "builtin_plan_names",
    "builtin_plan_text",
    "effective_target",
    "load_plan",
    "parse_plan_text",
    "sub_candidate_name",
]
