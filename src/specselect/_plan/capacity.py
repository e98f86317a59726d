"""`[capacity]`: what the deployment's KV cache must hold, so a mechanism that takes too much of it is refused."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

from specselect._plan.sections import PlanSection

__all__ = ["CapacityConfig"]


class CapacityConfig(PlanSection):
    """The deployment's KV-capacity needs; unset fields gate nothing (the cost is stated either way)."""

    required_concurrency: Annotated[int, Strict(), Field(ge=1, le=1_000_000)] | None = Field(
        default=None,
        description="requests of request_tokens the server must hold at once; a candidate whose KV cache holds "
        "fewer is rejected (kv_capacity_short)",
    )
    request_tokens: Annotated[int, Strict(), Field(ge=1, le=10_000_000)] | None = Field(
        default=None,
        description="the deployment's request length (prompt + output tokens) concurrency is required at; "
        "default: [target] max_model_len",
    )
    max_kv_loss: Annotated[float, Strict(), Field(gt=0, le=1)] | None = Field(
        default=None,
        description="the largest share of the baseline's KV-cache tokens a candidate may give up (0.2 = 20 %); "
        "a candidate losing more is rejected (kv_capacity_loss)",
    )
