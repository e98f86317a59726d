"""What the evidence pipeline reads: the groups' scenario summaries and their raw records, held in memory.

The groups are read through read-only protocols (`MeasuredGroup`, `MeasuredScenario`), so the result documents
of `specselect._artifacts` fit without the evidence layer importing them; the records come from a
`RecordSource` the runner fills while it measures (and, on `--resume`, once from the kept files).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from specselect._core.pairing import MemoryFigure
from specselect._core.status import RunStatus
from specselect.records.capacity import DeviceLoad, KvLoad, LaunchCapacity
from specselect.records.endpoints import TrafficCheck
from specselect.records.host import HostLoad
from specselect.records.measurement import RequestRecord, ScenarioSummary
from specselect.records.responsecache import PassResponseCache
from specselect.records.telemetry import SpecTelemetry
from specselect.records.workloads import WorkloadIdentity

__all__ = [
    "BASELINE_GROUP",
    "InMemoryRecords",
    "MeasuredGroup",
    "MeasuredScenario",
    "RecordSource",
    "ScenarioKey",
    "group_track",
    "parity_scenario",
    "scenario_name",
]

BASELINE_GROUP = "g0_target_only"
"""The default track's baseline (results written before tracks existed belong to it)."""


def scenario_name(workload: str, concurrency: int, temperature: float = 0.0) -> str:
    """The scenario key used everywhere: `<workload>-c<concurrency>` (e.g. `repetition-c1`), and above
    temperature 0 `-t<temperature>` after it (e.g. `chat-c1-t0.7`)."""
    name = f"{workload}-c{concurrency}"
    return f"{name}-t{temperature:g}" if temperature > 0 else name


def parity_scenario(workload: str, temperature: float = 0.0) -> str:
    """The records' scenario name of a workload's parity pass at a temperature: `<workload>-c1.parity` (at 0),
    `<workload>-c1-t0.7.parity` (at 0.7)."""
    return f"{scenario_name(workload, 1, temperature)}.parity"


@dataclass(frozen=True)
class ScenarioKey:
    """A scenario of the plan: workload name x concurrency x temperature."""

    workload: str
    concurrency: int
    temperature: float = 0.0

    @property
    def name(self) -> str:
        return scenario_name(self.workload, self.concurrency, self.temperature)

    @property
    def parity_scenario(self) -> str:
        """Its workload's parity pass at its temperature."""
        return parity_scenario(self.workload, self.temperature)


class MeasuredScenario(Protocol):
    """One scenario of one group as it was measured (the fields of `records.group.ScenarioRun` read here)."""

    @property
    def scenario(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def status(self) -> Literal["completed", "failed", "skipped"]: ...
    @property
    def early_stop(self) -> str | None: ...
    @property
    def workload_identity(self) -> WorkloadIdentity: ...
    @property
    def summary(self) -> ScenarioSummary | None: ...
    @property
    def telemetry(self) -> SpecTelemetry | None: ...
    @property
    def peak_memory_mb(self) -> float | None: ...
    @property
    def peak_memory_figure(self) -> MemoryFigure | None: ...
    @property
    def traffic(self) -> TrafficCheck | None: ...
    @property
    def host_load(self) -> HostLoad | None: ...
    @property
    def launch(self) -> int: ...
    @property
    def device_load(self) -> DeviceLoad | None: ...
    @property
    def kv_load(self) -> KvLoad | None: ...
    @property
    def response_cache(self) -> PassResponseCache | None: ...


class MeasuredGroup(Protocol):
    """One group's result (the fields of `records.group.GroupResult` read here)."""

    @property
    def group(self) -> str: ...
    @property
    def role(self) -> Literal["baseline", "candidate", "control"]: ...
    @property
    def family(self) -> str: ...
    @property
    def track(self) -> str | None: ...
    @property
    def run_status(self) -> RunStatus: ...
    @property
    def execution_path(self) -> Literal["target_only", "speculative"]: ...
    @property
    def target_snapshot(self) -> str: ...
    @property
    def proposal_length(self) -> int | None: ...
    @property
    def capacity(self) -> LaunchCapacity | None:
        """The first launch's KV capacity."""
        ...

    @property
    def lossy(self) -> str | None:
        """Why the group's verification is not exact (`AdmissionResult.lossy`); None: exact."""
        ...

    @property
    def scenarios(self) -> Sequence[MeasuredScenario]:
        """The first launch's scenarios."""
        ...

    def scenario_runs(self, scenario: str) -> Sequence[MeasuredScenario]:
        """Every launch's run of `scenario`, launch order."""
        ...

    def all_scenario_runs(self) -> Sequence[MeasuredScenario]:
        """Every scenario run of every launch."""
        ...


def group_track(group: MeasuredGroup) -> str:
    """The track of a group: its baseline's name (results of older versions: the default track)."""
    return group.track or (group.group if group.role == "baseline" else BASELINE_GROUP)


class RecordSource(Protocol):
    """The raw records of a run, by group."""

    def timed(self, group: str, scenario: str) -> Sequence[RequestRecord]:
        """A scenario's records of every launch (warm-up included); empty when it was not measured."""
        ...

    def parity(self, group: str, scenario: str) -> Sequence[RequestRecord] | None:
        """The records of the group's parity pass `scenario` (`parity_scenario`), or None when it ran none."""
        ...


@dataclass
class InMemoryRecords:
    """A `RecordSource` over records held in memory: (group, scenario name) -> records."""

    records: dict[tuple[str, str], tuple[RequestRecord, ...]] = field(default_factory=dict)

    def put(self, group: str, scenario: str, records: Sequence[RequestRecord]) -> None:
        self.records[(group, scenario)] = tuple(records)

    def extend(self, group: str, scenario: str, records: Sequence[RequestRecord]) -> None:
        """Add a later launch's records of a scenario after the earlier launches' (each record knows its launch)."""
        self.records[(group, scenario)] = (*self.records.get((group, scenario), ()), *records)

    def timed(self, group: str, scenario: str) -> Sequence[RequestRecord]:
        return self.records.get((group, scenario), ())

    def parity(self, group: str, scenario: str) -> Sequence[RequestRecord] | None:
        return self.records.get((group, scenario))

    def __contains__(self, key: object) -> bool:
        return key in self.records

    @classmethod
    def of(cls, mapping: Mapping[tuple[str, str], Sequence[RequestRecord]]) -> InMemoryRecords:
        """Records given as a mapping (tests, tools)."""
        return cls({key: tuple(value) for key, value in mapping.items()})
