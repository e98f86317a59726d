"""benchmarks/bench_rerun.py without a server: two runs of one plan compared decision by decision and point by
interval, the targets it reports (which can fail), and its section written through the shared writer."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_report_sample import build_run

from specselect._core.status import Decision
from specselect._report.data import ReportData, load_report_data
from specselect.records.evidence.rounds import RoundEstimate

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("bench_rerun")


def estimate(point: float, low: float, high: float, rerun: tuple[float, float]) -> RoundEstimate:
    return RoundEstimate.model_construct(
        point=point,
        low=low,
        high=high,
        rerun_low=rerun[0],
        rerun_high=rerun[1],
        level=0.95,
        baseline_values=(8.0, 9.8),
        candidate_values=(11.8, 10.7),
    )


def with_measured(data: ReportData, speedup: RoundEstimate, decision: str, reason: str) -> ReportData:
    """`data` whose g1_ngram entry carries this speedup and decision (the refused entries stay as built)."""
    assert data.evidence is not None
    first = data.evidence.entries[0]
    assert first.candidate == "g1_ngram"
    verdict = first.decision.model_copy(update={"decision": Decision(decision), "reason": reason})
    entries = (first.model_copy(update={"speedup": speedup, "decision": verdict}), *data.evidence.entries[1:])
    return dataclasses.replace(data, evidence=data.evidence.model_copy(update={"entries": entries}))


def two_runs(tmp_path: Path, second: RoundEstimate, decision: str) -> tuple[list[ReportData], list[Any]]:
    data = [load_report_data(build_run(tmp_path / name).root) for name in ("rerun-a", "rerun-b")]
    first = with_measured(data[0], estimate(1.28, 0.88, 1.86, (0.75, 2.17)), "tune", "insufficient_confidence")
    return [first, with_measured(data[1], second, decision, "x")], []


def test_runs_that_agree_meet_both_targets(bench: ModuleType, tmp_path: Path) -> None:
    data, _ = two_runs(tmp_path, estimate(1.20, 0.90, 1.60, (0.80, 1.80)), "tune")
    runs = [bench.TimedRun(tmp_path / "rerun-a", 389.0), bench.TimedRun(tmp_path / "rerun-b", 448.0)]
    report = bench.Report()
    targets = bench.tabulate(report, data, runs)
    text = report.markdown()
    assert "| g1_ngram  | copy-c1  | tune (insufficient_confidence) | tune (x)" in text
    assert "| yes  | 1.28x [0.88, 1.86] 95% | 1.20x [0.90, 1.60] 95% | yes / yes" in text
    assert "| g1_ngram  | copy-c1  | rerun-a | 8.0, 9.8        | 11.8, 10.7       |" in text
    assert "g3_eagle3" not in text.split("### rates")[0]  # refused in both: left out
    assert "Run times: rerun-a 389 s, rerun-b 448 s." in text
    assert [(t.result, t.met) for t in targets] == [
        ("3 of 3 the same, 1 of them measured", True),
        ("2 of 2 points", True),
        ("389 s and 448 s", True),
    ]


def test_a_point_outside_the_other_interval_and_a_changed_decision_miss_the_targets(
    bench: ModuleType, tmp_path: Path
) -> None:
    # The second run's 0.85 lies below the first's interval (0.88) but inside its rerun interval (0.75).
    data, _ = two_runs(tmp_path, estimate(0.85, 0.36, 1.97, (0.26, 2.80)), "reject")
    runs = [bench.TimedRun(tmp_path / "rerun-a", 389.0), bench.TimedRun(tmp_path / "rerun-b", 612.0)]
    report = bench.Report()
    targets = bench.tabulate(report, data, runs)
    assert "| NO   | 1.28x [0.88, 1.86] 95% | 0.85x [0.36, 1.97] 95% | yes / NO" in report.markdown()
    assert "| yes / yes " in report.markdown()  # the rerun intervals hold both points
    assert [(t.result, t.met) for t in targets] == [
        ("2 of 3 the same (differ: g1_ngram/copy-c1)", False),
        ("1 of 2 points", False),
        ("389 s and 612 s", False),
    ]


def test_runs_of_different_plans_are_refused(bench: ModuleType, tmp_path: Path) -> None:
    data, _ = two_runs(tmp_path, estimate(1.2, 0.9, 1.6, (0.8, 1.8)), "tune")
    assert data[1].evidence is not None
    fewer = data[1].evidence.model_copy(update={"entries": data[1].evidence.entries[:1]})
    with pytest.raises(SystemExit, match="different candidates or scenarios"):
        bench.tabulate(bench.Report(), [data[0], dataclasses.replace(data[1], evidence=fewer)], [])


def test_analyse_writes_section_6_and_its_record(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = importlib.import_module("_common")
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text(common.section_block("bench_cpu_draft", "## 5. draft"))
    roots = [str(build_run(tmp_path / name).root) for name in ("a", "b")]
    monkeypatch.setattr(sys, "argv", ["bench_rerun.py", "--analyse", *roots, "--write-results", str(results_md)])
    assert bench.main() == 0
    out = results_md.read_text()
    assert common.section_names(out) == ["bench_cpu_draft", "bench_rerun"]
    assert f"## 6. {bench.TITLE}\n" in out and "(tabulated with `--analyse`: the runs were created " in out
    assert out.count("**Plan:**") == 1 and "- **Plan:** `" in out
    saved = common.load_record(common.record_path(results_md, "bench_rerun"))
    # build_run's evidence has no replicated speedup: nothing is comparable, so the interval target is not met.
    assert [(t.result, t.met) for t in saved.targets][:2] == [
        ("3 of 3 the same, 0 of them measured", True),
        ("0 of 0 points", False),
    ]
