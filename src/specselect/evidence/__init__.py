"""Evidence with confidence: pure statistics over measured requests (numpy only, no I/O, seeded).

- `samples`: per-request samples and their pairing by (item_id, repeat)
- `parity`: temperature-0 output parity, the baseline's own noise floor, near-tie classification
- `stats`: paired cluster-bootstrap intervals of speedup and latency ratios
- `prediction`: predicted decode speedup from acceptance and the measured step cost
- `categories`: the same per workload category
"""

from __future__ import annotations

from specselect.evidence.categories import (
    AcceptanceSummary,
    CategoryBreakdown,
    CategoryEvidence,
    acceptance_summary,
    category_breakdown,
)
from specselect.evidence.parity import (
    BaselineConsistency,
    ParityPolicy,
    ParityVerdict,
    RequestDivergence,
    RequestParity,
    ScenarioParity,
    baseline_consistency,
    classify_divergence,
    compare_outputs,
    compare_text,
    compare_tokens,
    quality_ok_from_verdict,
    scenario_parity,
)
from specselect.evidence.prediction import (
    SpeedupPrediction,
    StepCost,
    expected_tokens_iid,
    expected_tokens_per_step,
    measure_step_cost,
    per_position_rates_from_counts,
    predict_speedup,
)
from specselect.evidence.samples import (
    Pairing,
    RecordLike,
    RequestKey,
    RequestPair,
    RequestSample,
    RequestSpecMetrics,
    outputs_from_records,
    pair_requests,
    sample_from_record,
    samples_from_records,
    spec_metrics_from_raw,
)
from specselect.evidence.stats import BootstrapPolicy, PairedStats, PairRatio, RatioEstimate, paired_stats

__all__ = [
    "AcceptanceSummary",
    "BaselineConsistency",
    "BootstrapPolicy",
    "CategoryBreakdown",
    "CategoryEvidence",
    "PairRatio",
    "PairedStats",
    "Pairing",
    "ParityPolicy",
    "ParityVerdict",
    "RatioEstimate",
    "RecordLike",
    "RequestDivergence",
    "RequestKey",
    "RequestPair",
    "RequestParity",
    "RequestSample",
    "RequestSpecMetrics",
    "ScenarioParity",
    "SpeedupPrediction",
    "StepCost",
    "acceptance_summary",
    "baseline_consistency",
    "category_breakdown",
    "classify_divergence",
    "compare_outputs",
    "compare_text",
    "compare_tokens",
    "expected_tokens_iid",
    "expected_tokens_per_step",
    "measure_step_cost",
    "outputs_from_records",
    "pair_requests",
    "paired_stats",
    "per_position_rates_from_counts",
    "predict_speedup",
    "quality_ok_from_verdict",
    "sample_from_record",
    "samples_from_records",
    "scenario_parity",
    "spec_metrics_from_raw",
]
