"""The run's closing lines name what the decisions rest on less than the plan measured, and what to do."""

from __future__ import annotations

from test_evidence_pipeline_rounds import evidence, settings

from specselect._report.trust import trust_lines
from specselect.records.results import EvidenceFile


def test_a_round_a_neighbour_crowded_is_named_with_what_to_do() -> None:
    file = EvidenceFile.of(evidence([1.0, 1.0, 1.0], [0.8, 1.3, 0.79], busy=[1]))
    (line,) = trust_lines(file, None)
    assert line.startswith("g1_ngram w-c1: decided on 2 rounds, left out round 2: candidate: host busy: 40.0%")
    assert line.endswith("measure again while nothing else runs on the machine (`specselect run PLAN --label NEW`)")


def test_a_pair_without_a_trusted_round_says_it_is_untrusted() -> None:
    file = EvidenceFile.of(evidence([1.0, 1.0], [0.8, 0.8], busy=[0, 1], policy=settings(looks=(2, 3))))
    (line,) = trust_lines(file, None)
    assert line.startswith("g1_ngram w-c1: no trusted round (candidate: host busy")
    assert "untrusted, measure again" in line


def test_rounds_left_out_for_the_time_budget_say_how_to_get_them() -> None:
    file = EvidenceFile.of(evidence([1.0, 1.0, 1.0], [0.8, 0.81, 0.79]))
    (line,) = trust_lines(file, "round 4 left out: 500 s spent and ~100 s expected")
    assert line.startswith("round 4 left out: 500 s spent") and "raise [run] sequential_budget_s" in line


def test_a_quiet_run_has_nothing_to_say() -> None:
    assert trust_lines(EvidenceFile.of(evidence([1.0, 1.0, 1.0], [0.8, 0.81, 0.79])), None) == []
    assert trust_lines(None, None) == []
