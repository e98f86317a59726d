"""report.html from a small complete run: section order, escaping, missing data, sweeps, self-containment."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from test_report_sample import Cand, build_run

from specselect._report.console import REPORT_DECISION_COLUMNS, report_decision_rows
from specselect._report.data import load_report_data
from specselect._report.html import CSP, render_html
from specselect._report.write import write_reports

HOSTILE = "<script>alert(1)</script>"
_VOID = {"meta", "link", "br", "wbr", "img", "hr", "input", "col", "area", "base", "source"}


class _Checker(HTMLParser):
    """Balanced tags (outside SVG, where `<rect/>` style self-closing is normal) and the visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        return

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _render(tmp_path: Path, **kw: object) -> str:
    layout = build_run(tmp_path / "run", **kw)  # type: ignore[arg-type]
    html_path, _ = write_reports(layout.root)
    return html_path.read_text(encoding="utf-8")


class _Rows(HTMLParser):
    """The rows of one table (text of each cell; a nested table counts as its cell's text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.depth += 1
        elif self.depth == 1 and tag == "tr":
            self.rows.append([])
        elif self.depth == 1 and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.depth -= 1
        elif self.depth == 1 and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _table(page: str, table_id: str) -> list[list[str]]:
    parser = _Rows()
    start = page.index(f'<table id="{table_id}"')
    parser.feed(page[start : page.index("</table></div>", start)])  # nested fact tables end in </details>
    return parser.rows


def test_page_is_well_formed_self_contained_and_starts_with_the_decision_table(tmp_path: Path) -> None:
    page = _render(tmp_path)
    checker = _Checker()
    checker.feed(page)
    assert checker.problems == [] and checker.stack == []
    assert page.startswith("<!DOCTYPE html>") and f'content="{CSP}"' in page.replace("&#x27;", "'")
    assert "<script" not in page and not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    sections = re.findall(r'<section id="([^"]+)"', page)
    assert sections[:6] == ["decisions", "verdicts", "segments", "sweeps", "certainty", "admission"]
    assert sections[-3:] == ["environment", "commands", "files"]
    assert page.find("<table") == page.find('<table id="decision-table"')
    assert page.count('<div class="tbl">') == page.count("<table") - page.count('<table class="facts">')
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)  # every chart is well-formed XML


def test_decision_table_cells_are_the_shared_decision_rows(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run")
    data = load_report_data(layout.root)
    assert data.evidence is not None
    page = render_html(data)
    rows = _table(page, "decision-table")
    assert rows[0] == list(REPORT_DECISION_COLUMNS)
    assert rows[1:] == report_decision_rows(data.evidence, data.groups)
    ngram = next(r for r in rows if r[0] == "g1_ngram")
    assert ngram[2:5] == ["completed", "comparable", "accept"] and ngram[9].endswith("MiB")
    refused = next(r for r in rows if r[0] == "g3_eagle3")
    assert refused[2:5] == ["asset_missing", "not_evaluated", "not_evaluated"]
    assert next(r for r in rows if r[0] == "g9_broken")[2] == "failed"


def test_every_user_string_is_escaped(tmp_path: Path) -> None:
    page = _render(tmp_path, refused=HOSTILE, target_ref=f"model {HOSTILE}")
    assert HOSTILE not in page and "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;" in page  # the failed group's log tail
    checker = _Checker()
    checker.feed(page)
    assert checker.problems == [] and HOSTILE in "".join(checker.text)


def test_admission_matrix_shows_gate_reason_and_facts(tmp_path: Path) -> None:
    page = _render(tmp_path)
    rows = _table(page, "admission-table")
    assert rows[0][:6] == ["candidate", "family", "status", "gate", "reason", "facts"]
    refused = next(r for r in rows if r[0] == "g3_eagle3")
    assert refused[2:5] == ["asset_missing", "asset", "proposer_not_given"]
    assert "asset.asset_kind=paired_checkpoint" in refused[5]
    admitted = next(r for r in rows if r[0] == "g1_ngram")
    assert admitted[2:4] == ["runnable", "none"] and "capacity.estimated_memory_mb=5200" in admitted[5]


def test_plots_have_titles_units_legends_and_skip_candidates_without_data(tmp_path: Path) -> None:
    page = _render(tmp_path)
    figures = dict(re.findall(r'<figure id="([^"]+)">(.*?)</figure>', page, flags=re.S))
    assert {"fig-speedup", "fig-ttft-copy-c1", "fig-tpot-copy-c1", "fig-e2e-copy-c1"} <= figures.keys()
    assert {"fig-acceptance-copy-c1", "fig-prediction"} <= figures.keys()
    assert "speedup (x baseline output tok/s)" in figures["fig-speedup"]
    assert "accept threshold (1.10x)" in figures["fig-speedup"]
    assert "time to first token (ms)" in figures["fig-ttft-copy-c1"]
    assert "g0_target_only" in figures["fig-ttft-copy-c1"] and "g1_ngram" in figures["fig-ttft-copy-c1"]
    for svg in figures.values():
        assert 'role="img"' in svg and "<title>" in svg
        assert "g3_eagle3" not in svg and "g9_broken" not in svg
    assert "g3_eagle3: not plotted, asset_missing (proposer_not_given)" in page
    assert "g9_broken: not plotted, failed (server_start_failed)" in page
    assert "fig-concurrency" not in page and "fig-proposal-length" not in page


def test_sweeps_plot_speedup_against_concurrency_and_proposal_length(tmp_path: Path) -> None:
    page = _render(tmp_path / "c", concurrencies=(1, 2, 4))
    assert 'id="fig-concurrency-copy"' in page and "concurrency (requests in flight)" in page
    sweep = (Cand("g1_ngram_k2", k=2, speed=1.3), Cand("g1_ngram", k=4, speed=1.6))
    page = _render(tmp_path / "k", candidates=sweep)
    figure = page.split('id="fig-proposal-length-copy-c1"', 1)[1].split("</figure>", 1)[0]
    assert "proposal length (num_speculative_tokens)" in figure and "g1_ngram (prompt_lookup_max=4)" in figure


def test_environment_and_commands(tmp_path: Path) -> None:
    page = _render(tmp_path)
    for text in ("c" * 64, "a" * 64, "0.32.0+cpu", "Test CPU", "/envs/vllm/bin/python", "sampling.max_tokens"):
        assert text in page
    assert "specselect run plan.toml --label sample" in page
    assert "--speculative-config" in page and "&#x27;{&quot;method&quot;: &quot;ngram&quot;" in page
    assert 'href="groups/g1_ngram.json"' in page and 'href="logs/g9_broken.log"' in page


def test_unfinished_run_and_missing_records_are_noted_not_fatal(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "running", status="running")
    (layout.root / "records" / "g1_ngram" / "copy-c1.jsonl").unlink()
    page = render_html(load_report_data(layout.root))
    assert "No evidence yet" in page and "the run is running" in page
    assert "specselect run plan.toml --label sample --resume" in page
    assert "latency plot of g1_ngram / copy-c1 omitted" in page
    assert 'id="fig-ttft-copy-c1"' in page  # the baseline's distribution is still shown


def test_reports_written_elsewhere_link_back_to_the_results(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "results" / "sample")
    html_path, md_path = write_reports(layout.root, tmp_path / "out")
    assert html_path == tmp_path / "out" / "report.html" and md_path.exists()
    assert 'href="../results/sample/groups/g1_ngram.json"' in html_path.read_text()
    assert not (layout.root / "report.html").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html", "report.md"]
