"""A side of a pair over every server launch of its group, and the baseline's A/A noise floor from its launches.

A group measured in several launches contributes every completed launch's run of a scenario: the records pooled
(launch j's passes continue after launch j - 1's, so (item, repeat) stays one request), THE speedup with the
launch-to-launch variation (`evidence.replication`), latency quantiles over all requests, the largest peak memory
and the acceptance counts summed. One launch is the special case: the same figures as before launches existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specselect.core.pairing import MemoryFigure
from specselect.engines.acceptance import SpecTelemetry, pool_telemetry
from specselect.evidence.parity import Output, has_token_ids, outputs_for_parity
from specselect.evidence.pipeline.inputs import MeasuredGroup, MeasuredScenario, RecordSource
from specselect.evidence.replication import AANoiseFloor, aa_noise_floor
from specselect.evidence.samples import RequestKey, RequestSample, samples_from_records
from specselect.evidence.stats import BootstrapPolicy
from specselect.measure.metrics import stats_of
from specselect.measure.types import RequestRecord

__all__ = ["SideLaunches", "aa_halves", "baseline_noise_floor", "side_launches"]


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


def _rebased(samples: Sequence[RequestSample], repeats_per_launch: int) -> list[RequestSample]:
    # Launch j measured passes j * R .. j * R + R - 1; the A/A pairs each launch's pass r with the first launch's.
    return [s.model_copy(update={"repeat": s.repeat - s.launch * repeats_per_launch}) for s in samples]


def _launch_outputs(side: SideLaunches, repeats_per_launch: int) -> list[dict[RequestKey, Output]]:
    tokens = has_token_ids(side.records)
    per_launch: list[dict[RequestKey, Output]] = []
    for launch in side.launches:
        outputs = outputs_for_parity([r for r in side.records if r.launch == launch], tokens=tokens)
        per_launch.append(
            {(item, repeat - launch * repeats_per_launch): out for (item, repeat), out in outputs.items()}
        )
    return per_launch


def aa_halves(launches: Sequence[int]) -> tuple[set[int], set[int]]:
    """The baseline's launches split for the A/A comparison: its 1st, 3rd, ... against its 2nd, 4th, ...

    Alternate launches sit at the same mean position in a mirrored schedule (the baseline runs first, last,
    first, ...), so a drift over the run does not look like a difference between identical servers. An odd last
    launch (a sequential round's) has no partner at its position and is left out: kept, it would stand beside the
    first launch against one launch, and the interval's launch stage would rest on one degree of freedom (a band
    of 0.19-5.22 for 1.09x on this host, 2026-12-03, where two launches gave 0.9-1.1).
    """
    paired = launches[: len(launches) // 2 * 2]
    return set(paired[0::2]), set(paired[1::2])


def baseline_noise_floor(
    baseline: SideLaunches, *, repeats_per_launch: int, policy: BootstrapPolicy
) -> AANoiseFloor | None:
    """The baseline against itself: its alternate launches against each other (THE speedup, `aa_halves`) and
    every launch's outputs against the first's; None with fewer than two completed launches. With four launches
    each half has two and the interval counts the launch variance of both."""
    if len(baseline.launches) < 2:
        return None
    samples = _rebased(baseline.samples, repeats_per_launch)
    first_half, second_half = aa_halves(baseline.launches)
    first = [s for s in samples if s.launch in first_half]
    second = [s for s in samples if s.launch in second_half]
    return aa_noise_floor(first, second, outputs=_launch_outputs(baseline, repeats_per_launch), policy=policy)
