"""Output quality above temperature 0: the distribution test's policy, each statistic's result and the verdict
(computed by `evidence.sampled_parity`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SAMPLED_PARITY_SCHEMA_VERSION",
    "SampledParity",
    "SampledParityPolicy",
    "StatisticName",
    "StatisticResult",
    "Verdict",
]


SAMPLED_PARITY_SCHEMA_VERSION = 1


StatisticName = Literal["token_frequencies", "distinct_bigrams", "length", "target_logprob"]


Verdict = Literal["pass", "fail", "not_assessed"]


class SampledParityPolicy(BaseModel):
    """How the distribution test is run; written into every result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alpha: float = Field(default=0.05, gt=0, lt=1)
    """The family-wise false-alarm level over all statistics."""
    positions: int = Field(default=16, ge=1)
    min_count: int = Field(default=5, ge=1)
    permutations: int = Field(default=999, ge=99)
    seed: int = 0
    """Seeds the permutations, so the same samples always get the same verdict."""
    min_samples: int = Field(default=2, ge=2)
    """A prompt takes part when each side has at least this many outputs."""


class StatisticResult(BaseModel):
    """One statistic: observed value, raw and family-wise adjusted permutation p-values, and what it says."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StatisticName
    observed: float
    p_value: float
    adjusted_p_value: float
    direction: Literal["candidate_higher", "candidate_lower"] | None
    """For the signed statistics: which way the candidate's outputs differ (None for token frequencies)."""
    by_prompt: dict[str, float]
    """Each prompt's share of the observed value (signed statistics: its signed term)."""


class SampledParity(BaseModel):
    """The distribution test of one candidate against its baseline in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SAMPLED_PARITY_SCHEMA_VERSION
    verdict: Verdict
    reason: str | None = None
    """`distribution_mismatch` on a fail, why it could not be assessed otherwise."""
    policy: SampledParityPolicy
    method: str = (
        "label permutation within prompts; Westfall-Young single-step min-p over the statistics, family-wise level "
        "alpha"
    )
    prompts: tuple[str, ...] = ()
    samples_per_side: tuple[int, int] = (0, 0)
    """(baseline, candidate) outputs over the prompts that took part."""
    distinct_outputs: tuple[int, int] = (0, 0)
    """Distinct outputs per side, summed over prompts: near 1 per prompt means the test had little to compare."""
    statistics: tuple[StatisticResult, ...] = ()
