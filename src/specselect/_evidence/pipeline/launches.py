"""A side of a pair over every server launch of its group (launch j is the group's launch in round j).

A group measured in several rounds contributes every completed launch's run of a scenario: the records pooled
(launch j's passes continue after launch j - 1's, so (item, repeat) stays one request), latency quantiles over
all requests, the largest peak memory and the acceptance counts summed; `upto` restricts it to the rounds a
look saw. One launch is the special case: the same figures as before launches existed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from specselect._core.pairing import MemoryFigure
from specselect._evidence.pipeline.inputs import MeasuredGroup, MeasuredScenario, RecordSource
from specselect._evidence.samples import RequestSample, samples_from_records
from specselect._measure.metrics import stats_of
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import SpecTelemetry, pool_telemetry

__all__ = ["SideLaunches", "side_launches"]


@dataclass(frozen=True)
class SideLaunches:
    """One side of a pair in one scenario, over every launch that completed it."""

    runs: tuple[MeasuredScenario, ...]
    """The completed runs of the scenario, launch order."""
    records: Sequence[RequestRecord]
    samples: tuple[RequestSample, ...]

    @property
    def launches(self) -> tuple[int, ...]:
        return tuple(run.launch for run in self.runs)

    def upto(self, rounds: int, without: Collection[int] = ()) -> SideLaunches:
        """This side over its launches below `rounds` (launch j = round j) but those `without`: what a look at
        `rounds` saw, rounds left out (a busy host) aside."""

        def kept(launch: int) -> bool:
            return launch < rounds and launch not in without

        return SideLaunches(
            runs=tuple(run for run in self.runs if kept(run.launch)),
            records=[r for r in self.records if kept(r.launch)],
            samples=tuple(s for s in self.samples if kept(s.launch)),
        )

    @property
    def ttft_p95_ms(self) -> float | None:
        return stats_of(s.ttft_s * 1000.0 if s.ttft_s is not None else None for s in self.samples).p95

    @property
    def e2e_p95_ms(self) -> float | None:
        return stats_of(s.e2e_s * 1000.0 if s.e2e_s is not None else None for s in self.samples).p95

    @property
    def _peak_run(self) -> MeasuredScenario | None:
        # The launch with the largest peak: the deployment must fit the worst one.
        runs = [run for run in self.runs if run.peak_memory_mb is not None]
        return max(runs, key=lambda run: run.peak_memory_mb or 0.0) if runs else None

    @property
    def peak_memory_mb(self) -> float | None:
        """The largest peak of its launches."""
        peak = self._peak_run
        return peak.peak_memory_mb if peak is not None else None

    @property
    def peak_memory_figure(self) -> MemoryFigure | None:
        """What `peak_memory_mb` is, as the launch with that peak measured it."""
        peak = self._peak_run
        return peak.peak_memory_figure if peak is not None else None

    @property
    def telemetry(self) -> SpecTelemetry | None:
        return pool_telemetry([run.telemetry for run in self.runs if run.telemetry is not None])


def side_launches(
    group: MeasuredGroup, scenario: str, records: RecordSource, categories: Mapping[str, str | None]
) -> SideLaunches:
    """The side of `group` in `scenario`: its completed launches' runs, records and samples."""
    runs = tuple(run for run in group.scenario_runs(scenario) if run.status == "completed")
    done = {run.launch for run in runs}
    # Records of a launch whose run did not complete are not a measurement of the scenario.
    kept = [r for r in records.timed(group.group, scenario) if r.launch in done]
    return SideLaunches(runs=runs, records=kept, samples=tuple(samples_from_records(kept, categories)))
