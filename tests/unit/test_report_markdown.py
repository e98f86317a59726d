"""report.md: the same decision table as the HTML (cell for cell), verdicts, admission matrix, identities;
every string escaped so that names cannot break the table or inject markup."""

from __future__ import annotations

import re
from pathlib import Path

from test_report_sample import build_run

from specselect._report.console import REPORT_DECISION_COLUMNS, report_decision_rows
from specselect._report.data import load_report_data
from specselect._report.markdown import md_table, md_text, render_markdown
from specselect._report.tables import TableSpec

HOSTILE = "<script>alert(1)</script>"


def md_cells(line: str) -> list[str]:
    """Split one Markdown table row on unescaped pipes and undo `md_text`'s escaping."""
    cells, cur, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if escaped:
            cur, escaped = cur + ch, False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return [c.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for c in cells]


def md_table_rows(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(md_cells(line))
    return [rows[0], *rows[2:]]


def test_md_text_escapes_markup_pipes_html_and_newlines() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("line1\nline2") == "line1 line2"
    assert md_text(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md_text("*bold* `code` [link](x)") == "\\*bold\\* \\`code\\` \\[link\\](x)"
    assert md_text("g0_target_only") == "g0_target_only"
    assert md_text("_x_") == "\\_x\\_"
    assert md_cells("| " + md_text("a|b\\c [1, 2]") + " | z |") == ["a|b\\c [1, 2]", "z"]


def test_md_table_shape() -> None:
    text = md_table(TableSpec(columns=("a", "b"), rows=(("1", ""), ("x|y", "2"))))
    assert text.splitlines() == ["| a | b |", "|---|---|", "| 1 |   |", "| x\\|y | 2 |"]


def test_decision_table_is_the_shared_decision_rows(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run", concurrencies=(1, 2))
    data = load_report_data(layout.root)
    assert data.evidence is not None
    text = render_markdown(data)
    rows = md_table_rows(text, "| group | scenario |")
    assert rows[0] == list(REPORT_DECISION_COLUMNS)
    assert rows[1:] == report_decision_rows(data.evidence, data.groups)
    assert text.index("## Decisions") < text.index("## Verdicts") < text.index("## Admission matrix")


def test_summary_has_recommendations_verdicts_admission_and_identities(tmp_path: Path) -> None:
    text = render_markdown(load_report_data(build_run(tmp_path / "run").root))
    assert text.startswith("# specselect report: sample\n")
    assert "- **copy-c1**: use g1_ngram (ngram): speedup" in text
    assert re.search(r"- \*\*g9_broken\*\* \(ngram, failed: server_start_failed\): not_evaluated for copy-c1", text)
    admission = md_table_rows(text, "| candidate | family | status | gate | reason | facts |")
    refused = next(r for r in admission if r[0] == "g3_eagle3")
    assert refused[1:5] == ["eagle", "asset_missing", "asset", "proposer_not_given"]
    assert refused[5] == "asset_kind=paired_checkpoint"
    for fact in ("plan hash: " + "c" * 64, "target snapshot: " + "a" * 64, "vllm 0.32.0+cpu", "Test CPU"):
        assert fact in text
    assert "```console\nspecselect run plan.toml --label sample\n```" in text
    assert "`report.html`" in text


def test_hostile_strings_cannot_inject_markup(tmp_path: Path) -> None:
    layout = build_run(tmp_path / "run", refused=HOSTILE, target_ref=f"x | {HOSTILE}")
    text = render_markdown(load_report_data(layout.root))
    assert HOSTILE not in text and "<script" not in text
    rows = md_table_rows(text, "| group | scenario |")
    assert all(len(r) == len(REPORT_DECISION_COLUMNS) for r in rows)
    assert HOSTILE in {r[0] for r in rows}
    assert "target x \\| &lt;script&gt;" in text


def test_unfinished_run_says_so(tmp_path: Path) -> None:
    text = render_markdown(load_report_data(build_run(tmp_path / "run", status="interrupted").root))
    assert "No evidence yet." in text and "> **Note:** the run is interrupted" in text
