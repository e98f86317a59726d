"""RESULTS.md is written only by the benchmark scripts: each replaces its own section between its markers and saves
the record of its run (no server, no timing)."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def common(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_common")


def document(common: ModuleType, *bodies: tuple[str, str]) -> str:
    return "\n".join(common.section_block(name, body) for name, body in bodies)


def test_replacing_one_section_keeps_every_other_byte(common: ModuleType) -> None:
    old = (
        "# legacy title\n\n"
        + common.section_block("bench_fidelity", "## 1. old fidelity\n\nA | B\n")
        + "\nhand text between\n\n"
        + common.section_block("bench_cpu_draft", "## 5. draft\n\ntrailing spaces   \n")
    )
    new = common.replace_section(old, "bench_fidelity", "## 1. new fidelity")
    before, after = (
        old.split(common.section_start("bench_fidelity"))[0],
        old.split(common.section_end("bench_fidelity"))[1],
    )
    assert new.startswith(before)
    assert new.endswith(after)
    assert "## 1. new fidelity\n" + common.section_end("bench_fidelity") + "\n" in new
    assert "old fidelity" not in new


def test_a_missing_section_is_appended_or_placed_before_the_sections_that_follow_it(common: ModuleType) -> None:
    only_fidelity = document(common, ("bench_fidelity", "one"))
    appended = common.replace_section(only_fidelity, "bench_engine_startup_decode", "four")
    assert appended == only_fidelity + "\n" + common.section_block("bench_engine_startup_decode", "four")
    placed = common.replace_section(appended, "bench_selection_cost", "three")
    assert common.section_names(placed) == ["bench_fidelity", "bench_selection_cost", "bench_engine_startup_decode"]
    assert common.replace_section("", "bench_fidelity", "one") == common.section_block("bench_fidelity", "one")


def test_markers_are_never_duplicated(common: ModuleType, tmp_path: Path) -> None:
    results_md = tmp_path / "RESULTS.md"
    for text in ("first", "second", "third"):
        common.write_section(results_md, "bench_fidelity", text)
    out = results_md.read_text()
    assert out.count(common.section_start("bench_fidelity")) == 1
    assert out.count(common.section_end("bench_fidelity")) == 1
    assert "third" in out and "second" not in out
    with pytest.raises(SystemExit, match="contains a section marker"):
        common.replace_section(out, "bench_selection_cost", common.section_end("bench_fidelity"))


def test_a_damaged_document_is_refused_with_the_file_and_the_fix(common: ModuleType, tmp_path: Path) -> None:
    twice = document(common, ("bench_fidelity", "a"), ("bench_fidelity", "b"))
    with pytest.raises(SystemExit, match=r"R\.md: section marker .* out of place.*fix: "):
        common.replace_section(twice, "bench_fidelity", "c", where="R.md")
    unclosed = common.section_start("bench_fidelity") + "\nbody\n"
    with pytest.raises(SystemExit, match="has no end marker"):
        common.section_names(unclosed)
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text(twice)
    with pytest.raises(SystemExit, match=str(results_md)):
        common.write_section(results_md, "bench_fidelity", "c")
    assert results_md.read_text() == twice


def test_the_committed_results_file_is_one_the_shared_writer_reads(common: ModuleType) -> None:
    # Section 5 was written by bench_cpu_draft.py before it used the shared writer: its markers are the shared form.
    text = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
    assert "bench_cpu_draft" in common.section_names(text, "benchmarks/RESULTS.md")


def test_composing_keeps_only_the_sections_in_document_order(common: ModuleType) -> None:
    draft = common.section_block("bench_cpu_draft", "## 5. draft")
    legacy = "# Benchmark results\n\nhand-typed 420 s\n\n" + draft + "\nmore hand text\n"
    text = common.replace_section(legacy, "bench_fidelity", "## 1. fidelity")
    text = common.replace_section(text, "run_all", "# Benchmark results")
    composed, dropped = common.compose_sections(text)
    assert common.section_names(composed) == ["run_all", "bench_fidelity", "bench_cpu_draft"]
    assert dropped == 3
    assert "hand" not in composed
    assert draft in composed
    assert common.compose_sections(composed) == (composed, 0)


def record(common: ModuleType, section: str, *checks: tuple[str, str, bool | None], **fields: object) -> object:
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC) + timedelta(minutes=10 * common.SECTIONS.index(section))
    values: dict[str, object] = {
        "section": section,
        "title": section,
        "command": f".venv/bin/python benchmarks/{section}.py",
        "started_at": start,
        "finished_at": start + timedelta(seconds=300),
        "machine": "AMD EPYC, 2 logical CPUs",
        "load_before": (0.4, 0.3, 0.2),
        "load_after": (1.9, 1.0, 0.5),
        "engine_version": "0.32.0+cpu",
        "model": "builtin:smollm2-135m",
        "model_snapshot": "b179c9523d0e6a0f" * 4,
        "configuration": ("**Workload:** w",),
        "targets": tuple(common.TargetCheck(target=t, result=r, met=m) for t, r, m in checks),
    }
    return common.SectionRecord(**{**values, **fields})


def test_a_record_of_another_schema_is_refused(common: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "bench_fidelity.json"
    path.write_text('{"schema_version": 99}')
    with pytest.raises(SystemExit, match=r"bench_fidelity.json: schema_version: 99, this script reads 1; fix: rerun"):
        common.load_record(path)


def test_a_section_states_the_command_and_the_configuration_of_its_run(
    common: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = common.Report()
    report.table("a table", ["metric", "value"], [["x", "1.5"]], ["A note generated from 1.5."])
    results_md = tmp_path / "RESULTS.md"
    common.publish(results_md, record(common, "bench_selection_cost"), report)
    out = results_md.read_text()
    assert "## 3. bench_selection_cost\n\n    .venv/bin/python benchmarks/bench_selection_cost.py\n" in out
    assert "- **Ran:** 2026-12-01 10:30:00 UTC to 10:35:00 UTC (300 s); 1-minute load average 0.40" in out
    assert "- **Workload:** w\n\n### a table\n\n| metric | value |" in out
    assert common.load_record(common.record_path(results_md, "bench_selection_cost")).wall_s == 300.0
    assert "### a table" in capsys.readouterr().out
