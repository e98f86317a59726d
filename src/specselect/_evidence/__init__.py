"""Evidence with confidence: pure statistics over measured requests (numpy only, no I/O, seeded).

- `samples`: per-request samples (with their launch) and their pairing by (item_id, repeat)
- `parity`: temperature-0 output parity, the baseline's own noise floor, near-tie classification
- `stats`: THE speedup statistic and paired cluster-bootstrap intervals of speedup and latency ratios
- `rounds`: the paired-round design, its one estimator, the looks and when a pair is settled
- `prediction`: predicted decode speedup from acceptance and a cost model of other measurements
- `categories`: the same per workload category
- `segments`: the same per input-length bucket (SPEED-Bench style): where in the range of prompt lengths it pays
- `sweep`: concurrency crossover, proposal-length choice, goodput under SLOs, sweep duration budget

The statistics are described in docs/statistics.md.
"""

from __future__ import annotations

from specselect._evidence.categories import acceptance_summary, category_breakdown
from specselect._evidence.parity import (
    baseline_consistency,
    classify_divergence,
    compare_outputs,
    compare_text,
    compare_tokens,
    quality_ok_from_verdict,
    scenario_parity,
)
from specselect._evidence.prediction import (
    AcceptanceTelemetry,
    SweepObservation,
    expected_tokens_iid,
    expected_tokens_per_step,
    fit_verify_cost,
    leave_one_out,
    measure_step_cost,
    per_position_rates_from_counts,
    predict_decode_speedup,
    predict_speedup,
    verify_cost_from_prefill,
)
from specselect._evidence.samples import (
    Pairing,
    RecordLike,
    RequestKey,
    RequestPair,
    RequestSample,
    pair_by_launch,
    pair_requests,
    sample_from_record,
    samples_from_records,
)
from specselect._evidence.segments import input_length_segments, speedup_outcome
from specselect._evidence.stats import paired_stats, speedup_statistic
from specselect._evidence.sweeps import (
    ScenarioLoad,
    SweepPoint,
    choose_length,
    clearly_losing,
    early_stop_reason,
    estimate_duration,
    find_crossover,
    goodput,
)

__all__ = [
    "AcceptanceTelemetry",
    "Pairing",
    "RecordLike",
    "RequestKey",
    "RequestPair",
    "RequestSample",
    "ScenarioLoad",
    "SweepObservation",
    "SweepPoint",
    "acceptance_summary",
    "baseline_consistency",
    "category_breakdown",
    "choose_length",
    "classify_divergence",
    "clearly_losing",
    "compare_outputs",
    "compare_text",
    "compare_tokens",
    "early_stop_reason",
    "estimate_duration",
    "expected_tokens_iid",
    "expected_tokens_per_step",
    "find_crossover",
    "fit_verify_cost",
    "goodput",
    "input_length_segments",
    "leave_one_out",
    "measure_step_cost",
    "pair_by_launch",
    "pair_requests",
    "paired_stats",
    "per_position_rates_from_counts",
    "predict_decode_speedup",
    "predict_speedup",
    "quality_ok_from_verdict",
    "sample_from_record",
    "samples_from_records",
    "scenario_parity",
    "speedup_outcome",
    "speedup_statistic",
    "verify_cost_from_prefill",
]
