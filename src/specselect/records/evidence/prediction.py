"""The predicted decode speedup: the verify-cost model, the proposer's cost, the measured step cost and the
prediction (computed by `evidence.prediction`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MODEL",
    "PREDICTION_SCHEMA_VERSION",
    "ProposerCost",
    "RateKind",
    "SpeedupPrediction",
    "StepCost",
    "VerifyCostModel",
]


RateKind = Literal["cumulative", "conditional"]


class StepCost(BaseModel):
    """The candidate's OBSERVED cost of a step relative to one baseline decode token (a diagnostic, never an input)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate_step_s: float
    baseline_token_s: float
    relative_step_cost: float
    num_spec_steps: int
    plain_steps: int = 0
    """Target steps that carried no draft (retrieval proposers without a match)."""
    step_source: Literal["per_request_num_spec_steps", "num_drafts"]
    n_candidate_requests: int
    n_baseline_requests: int


PREDICTION_SCHEMA_VERSION = 2


MODEL = "predicted = T / (D * (c(k) + k * d) + P), P = T - D * E, E = 1 + sum_i P(first i accepted)"


_Finite = Annotated[float, Field(allow_inf_nan=False)]


class VerifyCostModel(BaseModel):
    """c(k) = intercept + slope * k: one target step verifying k + 1 tokens, in plain decode steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intercept: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    slope: _Finite
    source: Literal["calibration", "leave_one_out_sweep", "baseline_prefill"]
    fitted_from: tuple[str, ...] = ()
    """The measurements behind the fit (other sweep lengths, a calibration's name)."""
    n_points: int = Field(default=0, ge=0)
    form: Literal["anchored", "affine"] = "anchored"
    """anchored: intercept fixed at 1 (c(0) is a plain decode step); affine: intercept fitted too."""

    def cost(self, k: int) -> float:
        """c(k)."""
        return self.intercept + self.slope * k


class ProposerCost(BaseModel):
    """What proposing costs per drafted token, in baseline decode steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_token: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    source: Literal["assumed_free", "measured", "weights_ratio"]
    note: str = ""

    @classmethod
    def free(cls, family: str) -> ProposerCost:
        """n-gram / suffix lookups: assumed free next to a target forward pass (stated, not measured)."""
        return cls(per_token=0.0, source="assumed_free", note=f"{family}: a lookup, assumed free next to a step")

    @classmethod
    def weights_ratio(cls, proposer_bytes: int, target_bytes: int) -> ProposerCost:
        """A draft model's forward pass relative to the target's, as the ratio of their weight bytes: what a
        memory-bound decode step reads (a stated assumption; a compute-bound or overhead-bound step breaks it,
        and the prediction's error then shows it)."""
        return cls(
            per_token=proposer_bytes / target_bytes,
            source="weights_ratio",
            note=f"draft step assumed to cost its weights' share: {proposer_bytes} / {target_bytes} bytes",
        )

    @classmethod
    def measured(cls, draft_token_s: float, baseline_token_s: float) -> ProposerCost:
        """A draft model's own seconds per drafted token over the baseline's seconds per decode token."""
        return cls(
            per_token=draft_token_s / baseline_token_s,
            source="measured",
            note=f"draft step {draft_token_s:.4g} s / baseline decode token {baseline_token_s:.4g} s",
        )


class SpeedupPrediction(BaseModel):
    """Predicted vs measured decode speedup, what the prediction used and assumed; null fields are in `missing`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = PREDICTION_SCHEMA_VERSION
    rate_kind: RateKind
    per_position_rates: tuple[float, ...] | None
    expected_tokens_per_step: float | None
    """E: tokens per drafting step implied by the per-position acceptance rates."""
    tokens_per_target_step: float | None = None
    """E_all: E averaged with the plain (no-draft) steps; the speedup if every step cost one decode step."""
    num_speculative_tokens: int | None = None
    drafting_steps: int | None = None
    plain_steps: int | None = None
    verify_cost: VerifyCostModel | None = None
    proposer_cost: ProposerCost | None = None
    modelled_step_cost: float | None = None
    """c(k) + k * d: one drafting step in baseline decode steps, from the cost model (not the candidate's timing)."""
    baseline_token_s: float | None = None
    predicted_candidate_token_s: float | None = None
    """Predicted candidate decode seconds per token: baseline_token_s / predicted speedup."""
    step_cost: StepCost | None
    """Since schema 2: the candidate's OBSERVED step cost, a diagnostic beside the model's; never an input."""
    predicted_decode_speedup: float | None
    measured_decode_speedup: float | None
    gap: float | None
    """measured - predicted."""
    relative_gap: float | None
    """(measured - predicted) / predicted."""
    relative_error: float | None = None
    """(predicted - measured) / measured: the prediction's error as a share of what was measured."""
    inputs_used: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    model: str = MODEL
