"""The evidence per input-length bucket: the policy, each segment's estimate and outcome (computed by
`evidence.segments`)."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from specselect.records.evidence.categories import AcceptanceSummary
from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate

__all__ = [
    "INPUT_LENGTH_EDGES",
    "SEGMENTS_SCHEMA_VERSION",
    "SEGMENT_RULE",
    "InputLengthSegments",
    "Segment",
    "SegmentOutcome",
    "SegmentPolicy",
]


SEGMENTS_SCHEMA_VERSION = 1


INPUT_LENGTH_EDGES: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 8192, 16384, 32768)
"""Bucket boundaries in prompt tokens: halving below 1k, SPEED-Bench's Throughput lengths from 1k up."""


SEGMENT_RULE = (
    "input-length buckets after SPEED-Bench's Throughput split (fixed input lengths of ~1k, 2k, 8k, 16k and 32k "
    "tokens): an item, with its requests of every launch and repeat on both sides, falls into the bucket "
    "[low, high) that holds its prompt's token count as the engine reported it for the baseline (chat template "
    "included; the smallest when its requests differ; the candidate's count when the baseline has none; items "
    "with neither are left out and their pairs counted); below 1,024 tokens, where SPEED-Bench has no bucket but "
    "most chat and code prompts lie, the buckets halve down to 64; per bucket THE speedup with the scenario's "
    "estimator on the bucket's samples of both sides (the paired-round estimate with the bucket's own round "
    "variance; in one round the items' variance alone) and the candidate's acceptance from its per-request "
    "counters; a "
    "bucket with fewer than min_items distinct paired items reports its counts only (too_few_items); outcome: "
    "pays when the "
    "interval's low end is at least min_throughput_speedup, faster when it is above 1.0 but below that minimum, "
    "loses when the high end is below 1.0, else unclear (no_estimate without an interval); a bucket whose pays or "
    "loses differs from the pooled scenario's outcome disagrees with it; a diagnostic of where the speed comes "
    "from, not a decision (that stays per scenario)"
)


SegmentOutcome = Literal["pays", "faster", "unclear", "loses", "no_estimate", "too_few_items"]
"""What a speedup interval says about one part of a scenario (see `speedup_outcome`)."""


class SegmentPolicy(BaseModel):
    """How pairs are bucketed and judged; written into every result that used it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dimension: Literal["input_tokens"] = "input_tokens"
    edges: tuple[int, ...] = INPUT_LENGTH_EDGES
    """Strictly increasing boundaries in tokens: buckets [0, e1), [e1, e2), ..., [e_last, no bound)."""
    min_items: int = Field(default=3, ge=2)
    """Fewer distinct items than this in a bucket -> counts only (the runner uses the bootstrap's min_clusters)."""
    min_speedup: float = Field(gt=0)
    """A bucket pays when its interval's low end reaches this (the plan's min_throughput_speedup)."""
    rule: str = SEGMENT_RULE

    @field_validator("edges")
    @classmethod
    def _increasing(cls, edges: tuple[int, ...]) -> tuple[int, ...]:
        if not edges or edges[0] <= 0 or any(b <= a for a, b in pairwise(edges)):
            raise ValueError("edges must be positive and strictly increasing")
        return edges


class Segment(BaseModel):
    """One part of a scenario's pairs (a bucket, or all of them) with its evidence and outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str
    """`128-255` (tokens, both ends included), `32768+`, or `all` for the pooled scenario."""
    low_tokens: int
    high_tokens: int | None
    """Exclusive upper bound; None: no bound."""
    n_pairs: int
    n_items: int
    throughput_speedup: RatioEstimate | None
    """None when the bucket has too few items (see `outcome`)."""
    decode_speedup: RatioEstimate | None
    acceptance: AcceptanceSummary | None
    """From the candidate's per-request counters; None without counters or with too few items."""
    outcome: SegmentOutcome
    note: str | None = None
    """Why there is no number (too few items) or no interval."""


class InputLengthSegments(BaseModel):
    """One candidate in one scenario, split by input length: the pooled part, the non-empty buckets in length
    order, and which buckets disagree with the pooled outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SEGMENTS_SCHEMA_VERSION
    pooled: Segment
    segments: tuple[Segment, ...]
    disagreeing: tuple[str, ...]
    """Labels of buckets whose outcome is pays or loses and differs from the pooled outcome."""
    n_without_length: int
    """Pairs left out because neither side reported a prompt token count for their item."""
    policy: SegmentPolicy
    bootstrap: BootstrapPolicy
    level: float | None = None
    """The buckets' interval level (the deciding look's)."""

    @property
    def paying(self) -> tuple[str, ...]:
        """Labels of the buckets where the candidate pays."""
        return tuple(s.label for s in self.segments if s.outcome == "pays")

    @property
    def losing(self) -> tuple[str, ...]:
        """Labels of the buckets where the candidate loses."""
        return tuple(s.label for s in self.segments if s.outcome == "loses")
