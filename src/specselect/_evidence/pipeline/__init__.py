"""The evidence pipeline over a run's records held in memory: pair -> parity -> rounds -> decide at each look ->
sweeps.

`build_evidence` pairs every candidate with its own track's baseline per scenario and decides at every look;
its `plan` says which candidates run the rounds up to the next look; `analyze_sweeps` then finds crossovers,
proposal lengths, goodput and early stops across the entries.
"""

from specselect._evidence.pipeline.build import EvidenceSettings, PairedRecords, build_evidence, pair_step, parity_step
from specselect._evidence.pipeline.inputs import (
    InMemoryRecords,
    MeasuredGroup,
    MeasuredScenario,
    RecordSource,
    ScenarioKey,
    group_track,
    parity_scenario,
    scenario_name,
)
from specselect._evidence.pipeline.rules import (
    CONTAMINATION_RULE,
    MISSING_UNCONTAMINATED,
    PARITY_PASS_RULE,
    RULE,
    TRACK_RULE,
)
from specselect._evidence.pipeline.sweeps import analyze_sweeps, sweep_point

__all__ = [
    "CONTAMINATION_RULE",
    "MISSING_UNCONTAMINATED",
    "PARITY_PASS_RULE",
    "RULE",
    "TRACK_RULE",
    "EvidenceSettings",
    "InMemoryRecords",
    "MeasuredGroup",
    "MeasuredScenario",
    "PairedRecords",
    "RecordSource",
    "ScenarioKey",
    "analyze_sweeps",
    "build_evidence",
    "group_track",
    "pair_step",
    "parity_scenario",
    "parity_step",
    "scenario_name",
    "sweep_point",
]
