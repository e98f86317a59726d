"""The report's "How sure" tables read the evidence of paired rounds: each round's ratio and rates behind THE
speedup with the interval's real level and variance, the A/A controls, and the prediction next to what was
measured; the decision table labels every interval with its level."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_evidence_pipeline_rounds import _two, evidence, settings

from specselect._report.console import DECISION_COLUMNS, control_lines, decision_rows, estimand_lines
from specselect._report.data import ReportData
from specselect._report.evidence_tables import controls_spec, prediction_spec, rounds_spec
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.rounds import estimand_statement
from specselect.records.results import EvidenceFile, Manifest


def _data(found: Evidence) -> ReportData:
    return ReportData(
        root=Path("results/x"),
        manifest=Manifest.model_construct(groups=()),
        preflight=None,
        admission=None,
        groups=(),
        evidence=EvidenceFile.of(found),
        handoff=None,
    )


def test_the_rounds_table_lists_each_rounds_ratio_and_rates_and_the_intervals_level() -> None:
    spec = rounds_spec(_data(evidence([1.0, 1.0, 1.0], [0.8, 0.9, 0.8], busy=[2])))
    assert spec is not None
    row = dict(zip(spec.columns, spec.rows[0], strict=True))
    assert row["speedup (interval, level)"].startswith("1.18x [") and row["speedup (interval, level)"].endswith("] 95%")
    assert row["ratio per round"] == "1.25 / 1.11"
    assert len(row["candidate tok/s per round"].split(" / ")) == 2
    assert row["variance"] == "pair, df 1.0"
    assert row["rounds left out"].startswith("round 3: candidate: host busy")


def test_one_round_has_no_rounds_row_and_no_controls_no_control_table() -> None:
    data = _data(evidence([1.0], [0.8]))
    spec = rounds_spec(data)
    assert spec is not None and dict(zip(spec.columns, spec.rows[0], strict=True))["variance"] == "items_only, df 3.0"
    assert controls_spec(data) is None


def test_the_control_table_says_whether_identical_servers_held_1_and_stayed_unaccepted() -> None:
    found = _two({"g0_target_only.aa": [1.0, 1.02, 0.99], "g1_ngram": [0.8, 0.82, 0.79]}, [1.0, 1.0, 1.0], settings())
    spec = controls_spec(_data(found))
    assert spec is not None
    row = dict(zip(spec.columns, spec.rows[0], strict=True))
    assert row["contains 1.0"] == "yes" and row["outputs"] == "24/24 equal"
    assert row["decision"] == "tune (below_min_speedup)"


def test_without_telemetry_per_position_there_is_no_prediction_row() -> None:
    # The constructed candidate reports totals only (no per-position acceptance): nothing to predict from.
    assert prediction_spec(_data(evidence([1.0, 1.0], [0.8, 0.8]))) is None


def test_an_acceptance_rate_without_a_mean_length_is_shown_alone() -> None:
    file = EvidenceFile.of(evidence([1.0], [0.8]))  # telemetry: 20 of 30 drafted tokens accepted, no length
    (row,) = [dict(zip(DECISION_COLUMNS, r, strict=True)) for r in decision_rows(file, ())]
    assert row["acceptance"] == "0.67"


def test_the_decision_table_labels_the_interval_with_its_level_and_shows_the_latency_mean() -> None:
    policy = settings(looks=(3, 4), latency_gate="shown_within")
    file = EvidenceFile.of(evidence([1.0] * 3, [0.8, 0.81, 0.79], candidate_ttft=[0.045, 0.054, 0.05], policy=policy))
    (row,) = [dict(zip(DECISION_COLUMNS, r, strict=True)) for r in decision_rows(file, ())]
    assert row["decision"] == "tune" and row["reason"] == "insufficient_latency_confidence"
    assert row["speedup (interval, level)"].endswith("] 96.25%")
    ttft = file.entries[0].decision.confidence.latency_intervals["max_ttft_regression_ratio"]
    assert row["TTFT p95; mean"] == f"1.08x; mean {ttft.point:.2f}x [{ttft.low:.2f}, {ttft.high:.2f}]"


def test_the_closing_lines_say_whether_each_aa_control_held_1_and_stayed_unaccepted() -> None:
    found = _two({"g0_target_only.aa": [1.0, 1.02, 0.99], "g1_ngram": [0.8, 0.82, 0.79]}, [1.0, 1.0, 1.0], settings())
    (line,) = control_lines(EvidenceFile.of(found))
    assert line.startswith("A/A control g0_target_only.aa w-c1: 1.00x [")
    assert line.endswith("] 95%, holds 1.0; tune (below_min_speedup)")


def test_the_closing_lines_say_what_the_decisions_are_about_and_under_traffic_the_prompts_each_needs() -> None:
    traffic = replace(settings(), estimand="traffic")
    lines = estimand_lines(EvidenceFile.of(evidence([1.0, 1.0, 1.0], [0.8, 0.9, 0.8], policy=traffic)))
    assert lines[0] == estimand_statement("traffic")
    (pair,) = lines[1:]
    assert pair.startswith("g1_ngram w-c1: 4 prompts")
    frozen = estimand_lines(EvidenceFile.of(evidence([1.0, 1.0, 1.0], [0.8, 0.9, 0.8])))
    assert frozen == [estimand_statement("frozen_prompts")]
