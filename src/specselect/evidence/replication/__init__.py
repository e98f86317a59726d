"""Launch-level replication: THE speedup over several independent server launches per side (pure, seeded).

- `cells`: the (launch x item) table both sides are summed into
- `twostage`: the two-stage (launch, then item) bootstrap and its variance components
- `latency`: the TTFT and E2E quantile ratios over the same two-stage design
- `noise_floor`: the A/A noise floor (the baseline against itself) and the check of a candidate against it
"""

from __future__ import annotations

from specselect.evidence.replication.cells import CellTable, SideCells, build_cells
from specselect.evidence.replication.latency import (
    LATENCY_RATIOS,
    LatencyField,
    replicated_latency_ratios,
    replicated_quantile_ratio,
)
from specselect.evidence.replication.noise_floor import (
    AA_RULE,
    NOISE_FLOOR_SCHEMA_VERSION,
    AANoiseFloor,
    AAVerdict,
    LaunchAgreement,
    NoiseFloorCheck,
    aa_noise_floor,
    check_noise_floor,
    launch_agreement,
    pool_launch_outputs,
)
from specselect.evidence.replication.twostage import (
    REPLICATION_SCHEMA_VERSION,
    LaunchVarianceSource,
    ReplicatedEstimate,
    ReplicationPolicy,
    VarianceComponents,
    one_launch_per_side,
    replicated_speedup,
)

__all__ = [
    "AA_RULE",
    "LATENCY_RATIOS",
    "NOISE_FLOOR_SCHEMA_VERSION",
    "REPLICATION_SCHEMA_VERSION",
    "AANoiseFloor",
    "AAVerdict",
    "CellTable",
    "LatencyField",
    "LaunchAgreement",
    "LaunchVarianceSource",
    "NoiseFloorCheck",
    "ReplicatedEstimate",
    "ReplicationPolicy",
    "SideCells",
    "VarianceComponents",
    "aa_noise_floor",
    "build_cells",
    "check_noise_floor",
    "launch_agreement",
    "one_launch_per_side",
    "pool_launch_outputs",
    "replicated_latency_ratios",
    "replicated_quantile_ratio",
    "replicated_speedup",
]
