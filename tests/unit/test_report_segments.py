"""The report's "where it pays" section: per candidate and scenario the pooled part, each input-length bucket
(too few items said instead of a number) and each category, with the buckets that disagree with the pooled
answer named, in both report.md and report.html, cell for cell."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from test_report_html import _Checker, _table
from test_report_markdown import md_table_rows
from test_report_sample import build_run

from specselect._evidence.categories import category_breakdown
from specselect._evidence.samples import RequestPair, RequestSample
from specselect._evidence.segments import input_length_segments
from specselect._report.data import ReportData, load_report_data
from specselect._report.html import render_html
from specselect._report.markdown import render_markdown
from specselect._report.segment_tables import SEGMENT_COLUMNS, segment_lines, segment_spec
from specselect.records.evidence.segments import SegmentPolicy
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.telemetry import RequestSpecMetrics

BOOT = BootstrapPolicy(n_resamples=300)
SPEC = RequestSpecMetrics(num_spec_steps=10, num_draft_tokens=40, num_accepted_draft_tokens=30)


def _pair(item: str, speedup: float, prompt_tokens: int, category: str) -> RequestPair:
    e2e = 2.0 + 0.03 * (sum(map(ord, item)) % 7)
    base = RequestSample(item_id=item, repeat=0, prompt_tokens=prompt_tokens, completion_tokens=64, e2e_s=e2e)
    cand = base.model_copy(update={"e2e_s": e2e / speedup, "spec": SPEC})
    return RequestPair(item_id=item, repeat=0, category=category, baseline=base, candidate=cand)


def _pairs() -> list[RequestPair]:
    """Short chat prompts lose, longer code prompts pay, and one very long prompt stands alone."""
    short = [_pair(f"chat{i}", 0.8, 40 + i, "chat") for i in range(4)]
    long = [_pair(f"code{i}", 1.5, 300 + i, "code") for i in range(4)]
    return [*short, *long, _pair("doc0", 2.0, 5000, "doc")]


def _with_segments(tmp_path: Path) -> ReportData:
    data = load_report_data(build_run(tmp_path / "run").root)
    assert data.evidence is not None
    pairs = _pairs()
    base, cand = [p.baseline for p in pairs], [p.candidate for p in pairs]
    segments = input_length_segments(base, cand, policy=SegmentPolicy(min_speedup=1.10), bootstrap=BOOT)
    breakdown = category_breakdown(pairs, policy=BOOT)
    entries = tuple(
        e.model_copy(update={"segments": segments, "categories": breakdown}) if e.candidate == "g1_ngram" else e
        for e in data.evidence.entries
    )
    return dataclasses.replace(data, evidence=data.evidence.model_copy(update={"entries": entries}))


def test_the_table_shows_each_bucket_and_category_and_too_few_items_instead_of_a_number(tmp_path: Path) -> None:
    spec = segment_spec(_with_segments(tmp_path))
    assert spec is not None and spec.columns == SEGMENT_COLUMNS
    rows = {row[2]: row for row in spec.rows}
    assert list(rows) == [
        "all inputs",
        "input 0-63 tokens",
        "input 256-511 tokens",
        "input 2048-8191 tokens",
        "category chat",
        "category code",
        "category doc",
    ]
    assert rows["all inputs"][0:2] == ("g1_ngram", "copy-c1") and rows["all inputs"][3] == "9 (9)"
    assert rows["input 0-63 tokens"][4].startswith("0.80x [") and rows["input 0-63 tokens"][6] == "loses"
    assert rows["input 256-511 tokens"][4].startswith("1.50x [") and rows["input 256-511 tokens"][6] == "pays"
    assert rows["input 256-511 tokens"][5] == "0.75 (len 4.00)"
    assert rows["input 2048-8191 tokens"][3:] == ("1 (1)", "too few items (1)", "-", "too_few_items")
    assert rows["category code"][4].startswith("1.50x [") and rows["category code"][6] == "-"
    assert rows["category doc"][3:] == ("1 (1)", "too few items (1)", "-", "-")


def test_a_line_per_scenario_says_where_it_pays_and_where_the_buckets_disagree(tmp_path: Path) -> None:
    lines = dict(segment_lines(_with_segments(tmp_path)))
    text = lines["g1_ngram on copy-c1"]
    assert text.startswith("all inputs ") and "(unclear)" in text
    assert "pays on 256-511 input tokens (1.50x [" in text
    assert "loses on 0-63 input tokens (0.80x [" in text
    assert "too few items in 2048-8191 (1)" in text
    assert text.endswith("the buckets 0-63, 256-511 disagree with the pooled answer")


def test_markdown_and_html_show_the_same_cells(tmp_path: Path) -> None:
    data = _with_segments(tmp_path)
    spec = segment_spec(data)
    assert spec is not None
    markdown = render_markdown(data)
    assert markdown.index("## Verdicts") < markdown.index("## Where it pays") < markdown.index("## Admission")
    assert md_table_rows(markdown, "| candidate | scenario | part |") == [list(spec.columns), *map(list, spec.rows)]
    page = render_html(data)
    assert _table(page, "segment-table") == [list(spec.columns), *map(list, spec.rows)]
    assert '<span class="pill loses">loses</span>' in page and '<a href="#segments">' in page
    checker = _Checker()
    checker.feed(page)
    assert checker.problems == [] and checker.stack == []


def test_a_run_without_segments_says_so(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    assert segment_spec(data) is None
    assert "## Where it pays" not in render_markdown(data)
    assert "No segments: no candidate was measured against its baseline" in render_html(data)
