"""The report's hand-off parts: the answer for the traffic mix, what to type for it, and a measured schedule next
to the static settings and speculation off -- in both report.md and report.html, from the result files only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report_sample import build_run

from specselect._artifacts.store import load_document
from specselect._common.fileio import atomic_write_model
from specselect._report.console import mix_closing_lines
from specselect._report.data import load_report_data
from specselect._report.html import render_html
from specselect._report.markdown import render_markdown
from specselect.errors import ResultsError
from specselect.records.evidence.mix import MixCellShare, MixEstimate, MixPolicy
from specselect.records.evidence.sweeps import (
    DerivedSchedule,
    ScheduleCell,
    ScheduleComparison,
    ScheduleLevel,
    ScheduleRow,
    SweepAnalysis,
)
from specselect.records.handoff import Handoff, HandoffMix, HandoffMixOption, HandoffSegment, HandoffSingle
from specselect.records.results import EvidenceFile
from specselect.records.server import ServeFlags

FLAGS = ServeFlags(
    engine_kind="vllm",
    engine_version="0.32.0+cpu",
    program=("python", "-m", "vllm.entrypoints.openai.api_server"),
    args=("--model", "/models/tiny", "--speculative-config", '{"method":"ngram","num_speculative_tokens":4}'),
    env={"VLLM_CPU_KVCACHE_SPACE": "2"},
    speculative={"method": "ngram", "num_speculative_tokens": 4},
    target_snapshot="s" * 8,
)


def _estimate(point: float, low: float, high: float) -> MixEstimate:
    cell = MixCellShare(
        workload="copy",
        concurrency=1,
        share=1.0,
        baseline_time_share=1.0,
        candidate_time_share=1.0,
        speedup=point,
        enabled=True,
    )
    return MixEstimate(point=point, low=low, high=high, level=0.95, cells=(cell,), policy=MixPolicy())


def _option() -> HandoffMixOption:
    segment = HandoffSegment(workload="copy", share=1.0, enabled=True, levels=(1,), why="accepted at every level")
    return HandoffMixOption(
        candidate="g1_ngram",
        family="ngram",
        everywhere=_estimate(1.55, 1.4, 1.7),
        on_segments=_estimate(1.55, 1.4, 1.7),
        segments=(segment,),
        concurrency_cutoff=None,
    )


def _with_mix(root: Path) -> None:
    path = root / "handoff.json"
    handoff = load_document(path, Handoff)
    single = HandoffSingle(
        candidate="g1_ngram",
        family="ngram",
        estimate=_estimate(1.55, 1.4, 1.7),
        faster_than_baseline=True,
        eligible=("g1_ngram",),
        rule="r",
    )
    mix = HandoffMix(
        workloads={"copy": 1.0},
        concurrency={1: 1.0},
        options=(_option(),),
        recommended="g1_ngram",
        recommendation="use g1_ngram (ngram) on every request: expected speedup of the mix 1.55x [1.40, 1.70] (95%), "
        "faster than the target-only baseline",
        serve=FLAGS,
        rule="r",
        single=single,
        routing_note="nothing to route: g1_ngram was accepted on every workload of the mix at every level",
    )
    atomic_write_model(path, handoff.model_copy(update={"mix": mix}))


def _with_older_mix(root: Path) -> None:
    """A hand-off as schema 2 wrote it: its one answer for the mix routes workloads."""
    path = root / "handoff.json"
    raw = json.loads(path.read_text())
    mix = {
        "workloads": {"copy": 1.0},
        "concurrency": {"1": 1.0},
        "options": [_option().model_dump(mode="json", exclude={"single_excluded"})],
        "recommended": "g1_ngram",
        "recommendation": "use g1_ngram (ngram) on copy (100% of requests) at concurrency 1: expected speedup of the "
        "mix 1.55x [1.40, 1.70] (95%)",
        "serve": FLAGS.model_dump(mode="json"),
        "serve_note": None,
        "rule": "r",
    }
    path.write_text(json.dumps({**raw, "schema_version": 2, "mix": mix}))


def _with_schedule(root: Path) -> None:
    path = root / "evidence.json"
    evidence = load_document(path, EvidenceFile)
    level = ScheduleLevel(concurrency=1, proposal_length=4, candidate="g1_ngram", why="pays")
    schedule = DerivedSchedule(sweep="g1", status="derived", levels=(level,), ranges=((1, None, 4),), reason="c1: k=4")
    cell = ScheduleCell(
        candidate="g1_ngram", proposal_length=4, speedup_point=1.6, speedup_low=1.5, speedup_high=1.7, decision="accept"
    )
    row = ScheduleRow(
        workload="copy", concurrency=1, schedule_length=4, static=cell, schedule=cell, verdict="no clear difference"
    )
    comparison = ScheduleComparison(
        sweep="g1", candidate="g1.schedule", schedule=schedule, rows=(row,), controllers={}, summary="s"
    )
    sweeps = (evidence.sweeps or SweepAnalysis()).model_copy(update={"schedules": (comparison,)})
    atomic_write_model(path, evidence.model_copy(update={"sweeps": sweeps}))


def test_the_mix_recommendation_and_what_to_type_are_in_both_reports(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    _with_mix(layout.root)
    data = load_report_data(layout.root)
    markdown = render_markdown(data)
    assert "**For your traffic mix**" in markdown
    assert "- One configuration: use g1_ngram (ngram) on every request: expected speedup of the mix 1.55x" in markdown
    assert "- Routed: nothing to route: g1_ngram was accepted on every workload" in markdown
    assert markdown.index("- One configuration:") < markdown.index("- Routed:")
    title = "**What to type: g1_ngram for the traffic mix (on every request)** (measured on vllm 0.32.0+cpu, target"
    assert title in markdown
    assert "VLLM_CPU_KVCACHE_SPACE=2 python -m vllm.entrypoints.openai.api_server --model /models/tiny" in markdown
    html = render_html(data)
    assert "<h3>For your traffic mix</h3>" in html and 'id="mix-table"' in html
    assert "What to type: g1_ngram for the traffic mix (on every request)" in html
    assert "1.55x [1.40, 1.70] (the single configuration)" in html


def test_a_handoff_written_before_schema_3_is_still_read_and_says_its_answer_routes(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    _with_older_mix(layout.root)
    handoff = load_document(layout.root / "handoff.json", Handoff)
    assert handoff.schema_version == 2 and handoff.mix is not None and handoff.mix.single is None
    (line,) = mix_closing_lines(handoff)
    assert line.startswith("traffic mix, routed: use g1_ngram (ngram) on copy (100% of requests)")
    assert line.endswith("gives the single configuration first)")
    markdown = render_markdown(load_report_data(layout.root))
    assert "- Routed: use g1_ngram (ngram) on copy (100% of requests) at concurrency 1" in markdown
    assert "**What to type: g1_ngram for the traffic mix (routed)**" in markdown


def test_a_handoff_of_a_schema_this_version_does_not_read_is_refused_naming_both(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    path = layout.root / "handoff.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 1}))
    with pytest.raises(ResultsError, match="reads schema_version 2 or 3"):
        load_document(path, Handoff)


def test_without_traffic_the_report_says_per_scenario_answers_are_all_there_is(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    path = layout.root / "handoff.json"
    handoff = load_document(path, Handoff)
    atomic_write_model(path, handoff.model_copy(update={"mix_note": "the plan has no [traffic] weights: ..."}))
    markdown = render_markdown(load_report_data(layout.root))
    assert "the plan has no \\[traffic\\] weights" in markdown


def test_a_measured_schedule_sits_next_to_the_static_setting_and_off(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    _with_schedule(layout.root)
    data = load_report_data(layout.root)
    markdown = render_markdown(data)
    assert "### Per-batch-size schedule vs static vs off: g1.schedule (batch 1+: k=4)" in markdown
    assert "| copy-c1 | 1.00x (baseline) | g1_ngram: k=4 1.60x \\[1.50, 1.70\\] accept |" in markdown
    assert "Per-batch-size schedule vs static vs off" in render_html(data)


def test_when_the_target_alone_is_the_answer_the_report_gives_its_line_to_type(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    path = layout.root / "handoff.json"
    handoff = load_document(path, Handoff)
    single = HandoffSingle(candidate=None, family=None, estimate=None, faster_than_baseline=False, rule="r")
    baseline = FLAGS.model_copy(update={"args": ("--model", "/models/tiny"), "speculative": None, "env": {}})
    mix = HandoffMix(
        workloads={"copy": 1.0},
        concurrency={1: 1.0},
        options=(),
        recommended=None,
        recommendation="keep the target-only baseline on every request: no candidate has comparable evidence",
        serve=baseline,
        rule="r",
        single=single,
    )
    atomic_write_model(path, handoff.model_copy(update={"mix": mix}))
    markdown = render_markdown(load_report_data(layout.root))
    assert "**What to type: the target-only baseline for the traffic mix (on every request)**" in markdown
    assert "python -m vllm.entrypoints.openai.api_server --model /models/tiny\n" in markdown
