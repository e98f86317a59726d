"""Output parity at temperature 0: per request, the baseline's own consistency, each divergence and its class, the
scenario's verdict (computed by `evidence.parity`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "PARITY_SCHEMA_VERSION",
    "Attribution",
    "BaselineConsistency",
    "DivergenceClass",
    "ParityPolicy",
    "ParityVerdict",
    "RequestDivergence",
    "RequestParity",
    "ScenarioParity",
]


PARITY_SCHEMA_VERSION = 1


DivergenceClass = Literal["near_tie", "real_difference"]


Attribution = Literal["baseline_noise", "near_tie", "unexplained"]


class ParityVerdict(StrEnum):
    """The scenario's quality verdict at temperature 0."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    NOT_ASSESSED = "not_assessed"


class RequestParity(BaseModel):
    """One output compared with another; a strict prefix diverges at the shorter length."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    equal: bool
    first_divergence: int | None
    """Index of the first differing token (or character, see `unit`); None when equal."""
    unit: Literal["token", "character"]
    lcp_tokens: int | None
    """Length of the common prefix in tokens; None for a character-level comparison."""
    lcp_chars: int | None = None
    base_len: int
    cand_len: int
    note: str | None = None


class ParityPolicy(BaseModel):
    """How mismatches are judged; written into every parity result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    near_tie_threshold_nats: float = Field(default=0.1, ge=0)
    """A divergence where the target's top-2 logprobs differ by less than this is a near tie (numerics)."""
    near_tie_is_numerics: bool = True
    """Near-tie divergences make the verdict `inconclusive` rather than `fail`."""


class BaselineConsistency(BaseModel):
    """The baseline compared with itself across repeats of the same item: the noise floor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_items_checked: int
    """Items with at least two comparable repeats."""
    n_items_inconsistent: int
    noise_floor: float | None
    """Share of checked items whose repeats disagree; None when no item has two repeats."""
    inconsistent_items: tuple[str, ...] = ()


class RequestDivergence(BaseModel):
    """One mismatching request and how it was judged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    repeat: int
    parity: RequestParity
    baseline_consistent: bool | None
    """Whether the baseline agreed with itself on this item; None without a second baseline repeat."""
    classification: DivergenceClass | None = None
    logprob_gap_nats: float | None = None
    logprob_source: Literal["baseline", "candidate"] | None = None
    """Whose logprob pass gave the gap (the baseline's when both ran)."""
    attribution: Attribution


class ScenarioParity(BaseModel):
    """Parity of a candidate's outputs with the baseline's over one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = PARITY_SCHEMA_VERSION
    verdict: ParityVerdict
    quality_ok: bool | None
    reason: str
    n_compared: int
    n_equal: int
    match_share: float | None
    n_baseline_only: int
    n_candidate_only: int
    n_not_comparable: int
    """Keys present on both sides that could not be compared (a failed request, tokens vs text)."""
    unit: Literal["token", "character", "mixed"] | None
    min_first_divergence: int | None
    median_first_divergence: float | None
    divergences: tuple[RequestDivergence, ...]
    baseline_consistency: BaselineConsistency
    policy: ParityPolicy
