"""The plan's [cluster] table: where the groups run, here one at a time (`local`) or spread over a Ray cluster."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, Strict, field_validator, model_serializer, model_validator

from specselect._plan.rules import rule_error
from specselect._plan.sections import PlanSection

__all__ = ["CLUSTER_BACKENDS", "ClusterConfig"]

CLUSTER_BACKENDS = ("local", "ray")

_RESOURCE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,99}$")
_RAY_BUILTIN_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})
_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9.\[\]:-]{1,253}:[0-9]{1,5})$")

PerGroup = Annotated[float, Strict(), Field(gt=0, le=1_000_000)]


class ClusterConfig(PlanSection):
    """Where the groups run. `local` (the default) runs them here, one at a time. `ray` leases each block of
    launches (a track's baseline and candidates in one round) from a Ray cluster: the lease holds a node's
    devices and the engine runs as that node's child process, so a candidate is only ever compared with a
    baseline measured on the same node."""

    backend: Literal["local", "ray"] = Field(
        default="local", description="local: this machine, one group at a time; ray: blocks spread over a cluster"
    )
    address: Annotated[str, Strict()] | None = Field(
        default=None,
        description='the Ray cluster: "auto" (the cluster this machine is a node of), "HOST:PORT" (its GCS), '
        '"ray://HOST:PORT" (a Ray Client server) or "local" (a one-node cluster started here for the run; Ray '
        "listens on this machine's interfaces); unset: RAY_ADDRESS",
    )
    gpus_per_group: Annotated[int, Strict(), Field(ge=0, le=64)] = Field(
        default=0, description="GPUs one block's lease holds (its devices are the engine's CUDA_VISIBLE_DEVICES)"
    )
    cpus_per_group: PerGroup = Field(
        default=1.0, description="Ray CPUs one block's lease holds (a CPU engine: as many as it should use)"
    )
    resources_per_group: dict[str, PerGroup] = Field(
        default_factory=dict,
        description="custom Ray resources one block needs, e.g. { specselect_node = 1 } for one block per node "
        "whose raylet offers specselect_node = 1",
    )
    max_parallel_groups: Annotated[int, Strict(), Field(ge=1, le=10_000)] | None = Field(
        default=None, description="at most this many blocks at once; unset: as many as the cluster's resources hold"
    )
    baseline_outlier: Annotated[float, Strict(), Field(gt=1, le=100)] = Field(
        default=1.25,
        description="a node whose baseline rate is this factor above or below the median node's is flagged",
    )

    @model_serializer(mode="wrap")
    def _only_what_was_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        defaults = ClusterConfig()
        return {key: value for key, value in data.items() if value != getattr(defaults, key)}

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not _ADDRESS.match(value):
            raise rule_error(
                f"{value!r} is not a Ray address",
                'write "auto", "local", "HOST:PORT" or "ray://HOST:PORT" (no credentials: they come from the '
                "environment)",
            )
        return value

    @field_validator("resources_per_group")
    @classmethod
    def _resource_names(cls, value: dict[str, float]) -> dict[str, float]:
        for name in value:
            if name in _RAY_BUILTIN_RESOURCES:
                raise rule_error(
                    f"{name!r} is one of Ray's own resources",
                    "use gpus_per_group / cpus_per_group for GPUs and CPUs; resources_per_group is for custom ones",
                    field=name,
                )
            if not _RESOURCE_NAME.match(name):
                raise rule_error(
                    f"{name!r} is not a resource name",
                    "use letters, digits, '_', '.', ':' and '-', starting with a letter or '_'",
                    field=name,
                )
        return value

    @model_validator(mode="after")
    def _ray_settings_need_ray(self) -> ClusterConfig:
        if self.backend == "ray":
            return self
        set_fields = sorted(name for name in self.model_fields_set if name != "backend")
        if set_fields:
            raise rule_error(
                f'{", ".join(set_fields)} only apply with backend = "ray"',
                'set backend = "ray", or remove them',
                field=(set_fields[0],),
            )
        return self

    @property
    def is_local(self) -> bool:
        return self.backend == "local"
