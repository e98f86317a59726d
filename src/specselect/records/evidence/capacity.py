"""What a candidate's mechanism costs in KV cache against its baseline, and the plan's capacity gate."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CAPACITY_RULE", "CapacityCost", "CapacityPolicy"]

CAPACITY_RULE = (
    "each launch's KV-cache size is the engine's own report (vLLM: its start-up log and cache_config_info; SGLang: "
    "max_total_num_tokens); a candidate's cost is its baseline's tokens minus its own (loss share = that / the "
    "baseline's); concurrency at a request length = whole blocks per request into the blocks reserved (tokens / "
    "length without blocks); with [capacity] required_concurrency, a candidate holding fewer requests of "
    "request_tokens is rejected (kv_capacity_short); with max_kv_loss, one losing a larger share is rejected "
    "(kv_capacity_loss); a gated candidate whose capacity is unknown is not accepted (tune, kv_capacity_unknown)"
)


class CapacityPolicy(BaseModel):
    """The plan's capacity gate (`[capacity]`): what the deployment must hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    required_concurrency: Annotated[int, Field(ge=1)] | None = None
    request_tokens: Annotated[int, Field(gt=0)] | None = None
    """The request length (prompt + output tokens) concurrency is required and stated at."""
    max_kv_loss: Annotated[float, Field(gt=0, le=1)] | None = None
    """The largest share of the baseline's KV tokens a candidate may give up."""
    rule: str = CAPACITY_RULE

    @property
    def gates(self) -> bool:
        """True when the policy can refuse a candidate."""
        return self.required_concurrency is not None or self.max_kv_loss is not None


class CapacityCost(BaseModel):
    """One candidate's KV capacity against its baseline's, and the gate's verdict on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    baseline: str
    baseline_tokens: int | None = None
    candidate_tokens: int | None = None
    tokens_lost: int | None = None
    """Baseline tokens minus candidate tokens (negative: the candidate holds more)."""
    loss_share: float | None = None
    """tokens_lost / baseline_tokens."""
    request_tokens: int | None = None
    """The request length the concurrencies are stated at (the plan's, else the longest request served)."""
    baseline_concurrency: float | None = None
    candidate_concurrency: float | None = None
    preemptions: dict[str, int] = Field(default_factory=dict)
    """Scenario -> requests the candidate's engine preempted in it (every launch), where it preempted any."""
    baseline_preemptions: dict[str, int] = Field(default_factory=dict)
    """The same for the baseline."""
    peak_kv_usage: dict[str, float] = Field(default_factory=dict)
    """Scenario -> the candidate's highest KV-cache use seen (1.0 = full)."""
    passed: bool | None = None
    """The gate's verdict: None when no gate is set (or nothing to judge it by)."""
    reason: str | None = None
    """The gate's stable reason when it failed or could not judge (`kv_capacity_short`, ...)."""
    detail: str = ""
    """One line naming the numbers the verdict rests on."""
