"""`specselect report RESULTS_DIR`: writes both reports and prints the tables; a missing, foreign or
other-schema directory is exit 2 with one line naming the file and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report_sample import build_run

from specselect._artifacts.layout import RunLayout
from specselect._cli.main import main
from specselect.records.document import RESULTS_SCHEMA_VERSION


def test_report_writes_both_files_and_prints_the_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = build_run(tmp_path / "run")
    before = {p: p.read_bytes() for p in layout.root.rglob("*") if p.is_file()}
    assert main(["report", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert "Decisions (candidate vs g0_target_only)" in out and "g1_ngram: accept for copy-c1" in out
    assert f"wrote {layout.report_html}" in out and f"wrote {layout.report_md}" in out
    # Reading only: every result file is untouched; only the two reports are new.
    after = {p: p.read_bytes() for p in layout.root.rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p in before} == before
    assert sorted(p.name for p in after.keys() - before.keys()) == ["report.html", "report.md"]


def test_json_and_quiet_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = build_run(tmp_path / "run")
    assert main(["report", str(layout.root), "--json", "--out", str(tmp_path / "elsewhere")]) == 0
    paths = json.loads(capsys.readouterr().out)
    assert paths == {
        "html": str(tmp_path / "elsewhere" / "report.html"),
        "markdown": str(tmp_path / "elsewhere" / "report.md"),
        "notes": [],
    }
    assert main(["report", str(layout.root), "--quiet"]) == 0
    assert capsys.readouterr().out == "" and layout.report_html.exists()


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["report", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_missing_or_foreign_directories_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, str(tmp_path / "nope"))
    assert "results directory not found" in line and "nope" in line and "fix:" in line
    (tmp_path / "empty").mkdir()
    assert "no manifest.json" in _error(capsys, str(tmp_path / "empty"))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "manifest.json").write_text('{"name": "something else"}')
    line = _error(capsys, str(tmp_path / "foreign"))
    assert "not a specselect result file" in line and "manifest.json" in line


@pytest.mark.parametrize("document", ["manifest.json", "groups/g1_ngram.json", "evidence.json"])
def test_other_schema_versions_are_refused_naming_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str
) -> None:
    layout = build_run(tmp_path / "run")
    path = layout.root / document
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    doc["tool_version"] = "9.0.0"
    path.write_text(json.dumps(doc))
    line = _error(capsys, str(layout.root))
    assert str(path) in line
    assert "schema_version 99 (written by specselect 9.0.0)" in line
    assert f"reads schema_version {RESULTS_SCHEMA_VERSION}" in line
    assert "fix: read it with specselect 9.0.0, or re-run the plan with this version" in line
    assert not RunLayout(layout.root).report_html.exists()


def test_broken_json_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = build_run(tmp_path / "run")
    layout.evidence.write_text("{not json")
    line = _error(capsys, str(layout.root))
    assert "evidence.json" in line and "not a readable JSON result file" in line
