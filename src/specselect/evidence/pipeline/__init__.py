"""The evidence pipeline over a run's records held in memory: pair -> parity -> stats -> decide -> sweeps.

`build_evidence` pairs every candidate with its own track's baseline per scenario and decides;
`analyze_sweeps` then finds crossovers, proposal lengths, goodput and early stops across the entries.
"""

from specselect.evidence.pipeline.build import (
    EvidenceSettings,
    PairedRecords,
    build_evidence,
    decide_step,
    pair_step,
    parity_step,
    segments_step,
    stats_step,
)
from specselect.evidence.pipeline.inputs import (
    InMemoryRecords,
    MeasuredGroup,
    MeasuredScenario,
    RecordSource,
    ScenarioKey,
    group_track,
    parity_scenario,
    scenario_name,
)
from specselect.evidence.pipeline.result import (
    AA_AS_CANDIDATE_RULE,
    AA_DECISION_RULE,
    CONTAMINATION_RULE,
    MISSING_UNCONTAMINATED,
    PARITY_PASS_RULE,
    RULE,
    TRACK_RULE,
    Evidence,
    EvidencePolicy,
    ParityPassPolicy,
    ScenarioEvidence,
    ScenarioNoiseFloor,
)
from specselect.evidence.pipeline.sweeps import analyze_sweeps, sweep_point

__all__ = [
    "AA_AS_CANDIDATE_RULE",
    "AA_DECISION_RULE",
    "CONTAMINATION_RULE",
    "MISSING_UNCONTAMINATED",
    "PARITY_PASS_RULE",
    "RULE",
    "TRACK_RULE",
    "Evidence",
    "EvidencePolicy",
    "EvidenceSettings",
    "InMemoryRecords",
    "MeasuredGroup",
    "MeasuredScenario",
    "PairedRecords",
    "ParityPassPolicy",
    "RecordSource",
    "ScenarioEvidence",
    "ScenarioKey",
    "ScenarioNoiseFloor",
    "analyze_sweeps",
    "build_evidence",
    "decide_step",
    "group_track",
    "pair_step",
    "parity_scenario",
    "parity_step",
    "scenario_name",
    "segments_step",
    "stats_step",
    "sweep_point",
]
