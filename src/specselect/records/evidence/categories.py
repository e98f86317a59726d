"""The evidence per workload category and its acceptance summary (computed by `evidence.categories`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate

__all__ = ["CATEGORIES_SCHEMA_VERSION", "UNCATEGORIZED", "AcceptanceSummary", "CategoryBreakdown", "CategoryEvidence"]


CATEGORIES_SCHEMA_VERSION = 1


UNCATEGORIZED = "uncategorized"


class AcceptanceSummary(BaseModel):
    """Acceptance over some requests, from their per-request speculative-decoding counters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_requests: int
    """Requests that carried counters."""
    num_spec_steps: int
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    acceptance_rate: float | None
    """Accepted / drafted tokens over all requests (token-weighted, like the server counters)."""
    mean_request_acceptance_rate: float | None
    """The unweighted mean of per-request rates, so long outputs do not dominate."""
    mean_acceptance_length: float | None
    """1 + accepted / speculative steps: tokens emitted per step, bonus token included."""
    source: str = "per_request_spec_metrics"


class CategoryEvidence(BaseModel):
    """One category's paired speedups and the candidate's acceptance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category: str
    n_pairs: int
    n_items: int
    throughput_speedup: RatioEstimate
    decode_speedup: RatioEstimate
    acceptance: AcceptanceSummary | None


class CategoryBreakdown(BaseModel):
    """Per-category evidence of one candidate in one scenario, categories in name order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = CATEGORIES_SCHEMA_VERSION
    categories: tuple[CategoryEvidence, ...]
    uncategorized_label: str = UNCATEGORIZED
    policy: BootstrapPolicy
