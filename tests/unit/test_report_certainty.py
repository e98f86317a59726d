"""The report's "How sure" tables read the evidence of several launches: the A/A noise floor, each launch's
rate behind THE speedup, and the prediction next to what was measured."""

from __future__ import annotations

from pathlib import Path

from test_evidence_pipeline_launches import evidence

from specselect.artifacts.results import EvidenceFile, Manifest
from specselect.report.console import DECISION_COLUMNS, decision_rows
from specselect.report.data import ReportData
from specselect.report.evidence_tables import launches_spec, noise_floor_spec, prediction_spec


def _data(baseline: list[float], candidate: list[float]) -> ReportData:
    return ReportData(
        root=Path("results/x"),
        manifest=Manifest.model_construct(groups=()),
        preflight=None,
        admission=None,
        groups=(),
        evidence=EvidenceFile.of(evidence(baseline, candidate)),
        handoff=None,
    )


def test_the_aa_table_shows_the_band_an_accept_must_clear_and_whether_launches_agree() -> None:
    spec = noise_floor_spec(_data([1.0, 0.95, 0.95, 1.0], [0.8, 0.82, 0.8, 0.82]))
    assert spec is not None and len(spec.rows) == 1
    row = dict(zip(spec.columns, spec.rows[0], strict=True))
    assert row["contains 1.0"] == "yes" and row["launch outputs"] == "24/24 equal"
    assert row["verdict"] == "pass (aa_consistent)" and row["noise band"].endswith("1.169")
    assert row["as a candidate"] == "tune (below_min_speedup)"


def test_the_aa_table_says_when_the_rule_would_have_accepted_identical_servers() -> None:
    spec = noise_floor_spec(_data([1.0, 0.7, 1.0, 0.7], [0.8, 0.8, 0.8, 0.8]))
    assert spec is not None
    row = dict(zip(spec.columns, spec.rows[0], strict=True))
    assert row["verdict"] == "fail (aa_interval_excludes_one)" and row["as a candidate"].startswith("accept")


def test_the_launch_table_lists_each_launchs_rate_and_one_launch_has_no_row() -> None:
    spec = launches_spec(_data([1.0, 1.0], [0.8, 0.9]))
    assert spec is not None
    row = dict(zip(spec.columns, spec.rows[0], strict=True))
    assert row["speedup (all launches)"].startswith("1.18x [")
    assert len(row["candidate tok/s per launch"].split(" / ")) == 2
    assert launches_spec(_data([1.0], [0.8])) is None
    assert noise_floor_spec(_data([1.0], [0.8])) is None


def test_without_telemetry_per_position_there_is_no_prediction_row() -> None:
    # The constructed candidate reports totals only (no per-position acceptance): nothing to predict from.
    assert prediction_spec(_data([1.0, 1.0], [0.8, 0.8])) is None


def test_an_acceptance_rate_without_a_mean_length_is_shown_alone() -> None:
    file = EvidenceFile.of(evidence([1.0], [0.8]))  # telemetry: 20 of 30 drafted tokens accepted, no length
    (row,) = [dict(zip(DECISION_COLUMNS, r, strict=True)) for r in decision_rows(file, ())]
    assert row["acceptance"] == "0.67"


def test_the_decision_table_shows_the_latency_interval_that_held_an_accept_back() -> None:
    file = EvidenceFile.of(evidence([1.0, 1.0], [0.8, 0.8], candidate_ttft=[0.045, 0.054]))
    (row,) = [dict(zip(DECISION_COLUMNS, r, strict=True)) for r in decision_rows(file, ())]
    high = file.entries[0].decision.confidence.latency_intervals["max_ttft_regression_ratio"].high
    assert row["decision"] == "tune" and row["reason"] == "insufficient_latency_confidence"
    assert row["TTFT p95"].startswith("1.08x [") and row["TTFT p95"].endswith(f", {high:.2f}]")
