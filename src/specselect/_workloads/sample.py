"""Seeded samples of a workload: the same seed and size give the same items in the same order on any machine.

The rule: rank every item by `sha256("<seed>:<id>")` (hex digest, ties cannot happen as ids are unique) and
take the first N. It depends only on the seed and the item ids, never on Python's `random` (whose algorithms
may change between versions), the file order or the platform. A larger N extends a smaller one: the sample
of 8 is the first 8 items of the sample of 16 with the same seed. A different seed gives another ranking.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from specselect._workloads.canonical import content_sha256
from specselect.errors import WorkloadError
from specselect.records.workloads import Workload, WorkloadItem, WorkloadSelection

__all__ = [
    "MAX_SAMPLE_ITEMS",
    "MAX_SEED",
    "WorkloadSample",
    "sample_items",
    "sample_rank",
    "sample_workload",
    "select_all",
]

MAX_SAMPLE_ITEMS = 100_000
"""As many items as a workload file may hold."""
MAX_SEED = 2**63 - 1


class WorkloadSample(BaseModel):
    """A seeded sample of a workload, written in a plan as `name = { source = ..., items = N, seed = S }`."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    source: Annotated[str, Strict()] = Field(
        description='what to sample from: "builtin:NAME" or a workload file path (relative to the plan file)'
    )
    items: Annotated[int, Strict(), Field(ge=1, le=MAX_SAMPLE_ITEMS)] = Field(
        description="how many items to take; at most as many as the source holds"
    )
    seed: Annotated[int, Strict(), Field(ge=0, le=MAX_SEED)] = Field(
        default=0,
        description="seed of the sample: items ranked by sha256('<seed>:<id>'), the first `items` taken in that order",
    )


def sample_rank(seed: int, item_id: str) -> str:
    """The key items are sorted by: hex sha256 of `"<seed>:<id>"` (UTF-8)."""
    return hashlib.sha256(f"{seed}:{item_id}".encode()).hexdigest()


def sample_items(items: Sequence[WorkloadItem], count: int, seed: int, *, label: str) -> tuple[WorkloadItem, ...]:
    """The `count` items of `items` with the lowest `sample_rank(seed, id)`, in that order.

    `label` names the source in the error raised when it holds fewer than `count` items.
    """
    if count > len(items):
        raise WorkloadError(
            f"a sample of {count} items was asked for, but it holds {len(items)}",
            location=label,
            fix=f"ask for at most items = {len(items)}",
        )
    ranked = sorted(items, key=lambda item: sample_rank(seed, item.id))
    return tuple(ranked[:count])


def select_all(sha256: str, count: int) -> WorkloadSelection:
    """The selection of a workload measured whole: every item, in file order."""
    return WorkloadSelection(rule="all", items=count, population=count, population_sha256=sha256)


def sample_workload(workload: Workload, count: int, seed: int) -> Workload:
    """`workload` cut to its seeded sample: the identity hashes the sample and records what it was drawn from."""
    items = sample_items(workload.items, count, seed, label=workload.identity.source)
    selection = WorkloadSelection(
        rule="seeded_sample",
        items=count,
        population=len(workload.items),
        population_sha256=workload.identity.sha256,
        seed=seed,
    )
    identity = workload.identity.model_copy(
        update={"sha256": content_sha256(items), "item_count": count, "selection": selection}
    )
    return Workload(identity=identity, items=items)
