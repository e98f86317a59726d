"""The plan's [traffic] table: the deployment's mix, so the hand-off can give one answer for it.

    [traffic]
    workloads = { general = 0.7, repetition = 0.3 }   # share of the deployment's requests like each workload
    concurrency = { 1 = 0.8, 2 = 0.2 }                # share of requests that arrive at each concurrency level

Both tables are shares of requests and sum to 1. A measured workload the table leaves out has share 0. With one
concurrency level in [run] the profile may be left out (every request arrives at that level); with several it must
be given. Plans without [traffic] hash exactly as before it existed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Annotated

from pydantic import Field, Strict, field_validator

from specselect._plan.rules import NameStr, rule_error
from specselect._plan.sections import PlanSection

__all__ = ["TRAFFIC_EXAMPLE", "TrafficConfig", "check_traffic"]

TRAFFIC_EXAMPLE = "workloads = { general = 0.7, repetition = 0.3 }, concurrency = { 1 = 0.8, 2 = 0.2 }"
_SUM_TOLERANCE = 1e-6

Share = Annotated[float, Strict(), Field(ge=0, le=1)]


def _sums_to_one(shares: Iterable[float], what: str) -> None:
    total = math.fsum(shares)
    if abs(total - 1.0) > _SUM_TOLERANCE:
        raise rule_error(
            f"the {what} shares sum to {total:.6g}: they are shares of the deployment's requests",
            "make them sum to 1",
        )


class TrafficConfig(PlanSection):
    """What the deployment serves: each workload's and each concurrency level's share of its requests."""

    workloads: Annotated[dict[NameStr, Share], Field(min_length=1, max_length=100)] = Field(
        description="workload name -> share of the deployment's requests that look like it (the shares sum to 1)"
    )
    concurrency: Annotated[dict[Annotated[int, Field(gt=0, le=100_000)], Share], Field(min_length=1)] | None = Field(
        default=None,
        description="concurrency level -> share of requests that arrive at it (sum 1); may be left out when "
        "[run] has one level",
    )

    @field_validator("workloads")
    @classmethod
    def _workload_shares(cls, value: dict[str, float]) -> dict[str, float]:
        _sums_to_one(value.values(), "workload")
        return value

    @field_validator("concurrency")
    @classmethod
    def _level_shares(cls, value: dict[int, float] | None) -> dict[int, float] | None:
        if value is not None:
            _sums_to_one(value.values(), "concurrency")
        return value

    def profile(self, levels: Sequence[int]) -> dict[int, float]:
        """Level -> share of requests: the given profile, or every request at the one measured level."""
        if self.concurrency is not None:
            return dict(self.concurrency)
        return {levels[0]: 1.0} if len(levels) == 1 else {}

    def cells(self, levels: Sequence[int]) -> dict[tuple[str, int], float]:
        """(workload, level) -> share of requests, for the cells with a positive share."""
        profile = self.profile(levels)
        return {
            (workload, level): w * p
            for workload, w in self.workloads.items()
            for level, p in profile.items()
            if w * p > 0
        }


def check_traffic(traffic: TrafficConfig, workloads: Sequence[str], levels: Sequence[int]) -> None:
    """The mix names only measured workloads and levels, and gives a profile when [run] measures several."""
    for name in traffic.workloads:
        if name not in workloads:
            raise rule_error(
                f"traffic names workload {name!r}, which the plan does not measure",
                f"use one of [workloads]: {', '.join(workloads)}",
                field=("traffic", "workloads", name),
            )
    if traffic.concurrency is None:
        if len(levels) > 1:
            shown = ", ".join(str(level) for level in levels)
            raise rule_error(
                f"[run] measures concurrency {shown}: the mix needs the share of requests at each",
                "add concurrency = { " + ", ".join(f"{level} = ..." for level in levels) + " } (summing to 1)",
                field=("traffic", "concurrency"),
            )
        return
    for level in traffic.concurrency:
        if level not in levels:
            raise rule_error(
                f"traffic names concurrency {level}, which [run] does not measure",
                f"use the levels of [run] concurrency: {', '.join(str(x) for x in levels)}",
                field=("traffic", "concurrency", str(level)),
            )
