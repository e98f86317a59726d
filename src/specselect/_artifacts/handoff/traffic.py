"""What the hand-off's answer for a traffic mix reads: the traffic, the measured levels, the evidence and the
baseline's seconds per request, and each server configuration's cells (which candidate runs in which scenario)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from specselect._core.status import EvidenceStatus
from specselect._evidence.mix import CellSpeedup, MixCell, mix_speedup
from specselect._plan.traffic import TrafficConfig
from specselect.records.evidence.mix import MixEstimate, MixPolicy
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.results import EvidenceFile

__all__ = ["MixInputs", "Where", "every_request"]

Where = Callable[[str, int], bool]
"""(workload, level) -> whether the candidate serves that scenario's requests (else the baseline does)."""


def every_request(workload: str, level: int) -> bool:
    """Every scenario: one candidate on every request."""
    return True


class MixInputs:
    """What the mix reads: the traffic, the levels, the evidence and the baseline's seconds per request."""

    def __init__(
        self,
        traffic: TrafficConfig,
        levels: Sequence[int],
        evidence: EvidenceFile,
        baseline_seconds: Mapping[tuple[str, int], float],
        policy: MixPolicy,
    ) -> None:
        self.traffic = traffic
        self.levels = sorted(levels)
        self.cells = traffic.cells(self.levels)
        self.evidence = evidence
        self.baseline_seconds = baseline_seconds
        self.policy = policy

    @property
    def workloads(self) -> list[str]:
        """The workloads with a share of the requests, sorted."""
        return sorted({w for w, _ in self.cells})

    def entry(self, candidate: str, workload: str, level: int) -> ScenarioEvidence | None:
        """The candidate's comparable evidence in one cell, or None."""
        return next(
            (
                e
                for e in self.evidence.entries
                if (e.candidate, e.workload, e.concurrency) == (candidate, workload, level)
                and e.evidence.evidence_status == EvidenceStatus.COMPARABLE
            ),
            None,
        )

    def configuration(self, candidate: str | None, on: Where, workload: str | None = None) -> list[MixCell] | None:
        """The mix's cells with `candidate` where `on` says (None: the baseline everywhere), only `workload`'s when
        given; None when a cell lacks the baseline's time or the candidate's speedup where it runs."""
        cells: list[MixCell] = []
        for (name, level), share in self.cells.items():
            if workload is not None and name != workload:
                continue
            seconds = self.baseline_seconds.get((name, level))
            if seconds is None or seconds <= 0:
                return None
            speed: CellSpeedup | None = None
            if candidate is not None and on(name, level):
                entry = self.entry(candidate, name, level)
                # THE speedup over every launch of both sides (`ScenarioEvidence.speedup`), the decision's.
                speed = CellSpeedup.of_estimate(entry.speedup) if entry is not None and entry.speedup else None
                if speed is None:
                    return None
            cells.append(
                MixCell(
                    workload=name,
                    concurrency=level,
                    share=share,
                    baseline_seconds=seconds,
                    speedup=speed,
                    source=candidate or "",
                )
            )
        return cells

    def estimate(self, candidate: str, on: Where, workload: str | None = None) -> MixEstimate | None:
        """The mix speedup of `configuration(candidate, on, workload)`, or None."""
        cells = self.configuration(candidate, on, workload)
        return mix_speedup(cells, self.policy) if cells else None
