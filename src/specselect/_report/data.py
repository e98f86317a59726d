"""Everything a report shows, read from one results directory (never re-measured).

The manifest is required; the other documents are read when present (an interrupted run has no evidence yet),
and a missing optional file becomes a note shown in the report. A document from another schema version or
another tool refuses the whole directory with a `ResultsError` naming the file and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import RunDocuments, load_records, load_run
from specselect._measure.metrics import e2e_ms, tpot_ms, ttft_ms
from specselect._report.trust import capacity_lines, trust_lines
from specselect.errors import ResultsError
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.group import GroupResult

__all__ = ["LatencySamples", "ReportData", "load_report_data"]


@dataclass(frozen=True)
class LatencySamples:
    """Per-request latencies (ms) of the measured, successful requests of one group in one scenario."""

    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    n_failed: int = 0


@dataclass(frozen=True)
class ReportData(RunDocuments):
    """The documents of one run, in plan order (`notes`: what could not be read, shown in the report), plus
    latencies from the raw records."""

    latencies: Mapping[tuple[str, str], LatencySamples] = field(default_factory=dict)
    """(group, scenario) -> latencies; absent when the group did not measure that scenario."""

    @property
    def baseline(self) -> GroupResult | None:
        """The (first) target-only baseline group, when its result exists."""
        return next((g for g in self.groups if g.role == "baseline"), None)

    @property
    def baseline_name(self) -> str:
        """What candidates are compared with: the baseline group, or each track's own baseline."""
        names = [g.name for g in self.manifest.groups if g.role == "baseline"]
        if len(names) == 1:
            return names[0]
        return "the target-only baseline of its track" if names else "the baseline"

    def group(self, name: str) -> GroupResult | None:
        """A group's result by name."""
        return next((g for g in self.groups if g.group == name), None)

    @property
    def scenarios(self) -> tuple[str, ...]:
        """Scenario names in the order they were evaluated (evidence first, then what groups measured)."""
        names: dict[str, None] = {}
        if self.evidence is not None:
            names.update(dict.fromkeys(e.scenario for e in self.evidence.entries))
        for g in self.groups:
            names.update(dict.fromkeys(s.scenario for s in g.scenarios))
        return tuple(names)

    def entries(self, scenario: str | None = None) -> tuple[ScenarioEvidence, ...]:
        """Evidence entries, optionally of one scenario."""
        if self.evidence is None:
            return ()
        return tuple(e for e in self.evidence.entries if scenario is None or e.scenario == scenario)


def _latencies(layout: RunLayout, group: GroupResult, notes: list[str]) -> dict[tuple[str, str], LatencySamples]:
    out: dict[tuple[str, str], LatencySamples] = {}
    for scen in group.scenarios:
        if scen.records_path is None:
            continue
        try:
            records = load_records(layout, group.group, scen.scenario)
        except ResultsError as exc:
            notes.append(f"latency plot of {group.group} / {scen.scenario} omitted: {exc.one_line()}")
            continue
        measured = [r for r in records if not r.warmup]
        ok = [r for r in measured if r.ok]
        out[(group.group, scen.scenario)] = LatencySamples(
            ttft_ms=tuple(v for r in ok if (v := ttft_ms(r)) is not None),
            tpot_ms=tuple(v for r in ok if (v := tpot_ms(r)) is not None),
            e2e_ms=tuple(v for r in ok if (v := e2e_ms(r)) is not None),
            n_failed=len(measured) - len(ok),
        )
    return out


def load_report_data(results_dir: Path) -> ReportData:
    """Read a run's result documents; ResultsError for a missing, foreign or other-version directory."""
    run = load_run(results_dir)
    layout = RunLayout(run.root)
    notes = list(run.notes)
    latencies: dict[tuple[str, str], LatencySamples] = {}
    for group in run.groups:
        latencies.update(_latencies(layout, group, notes))
    notes.extend(trust_lines(run.evidence, run.manifest.sequential_stop))
    notes.extend(capacity_lines(run.evidence))
    return ReportData(**{**vars(run), "notes": tuple(notes)}, latencies=latencies)
