"""The report shows each launch's start-up in phases and the engine's start-up warnings that bear on the measurement."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from test_report_sample import build_run

from specselect._report.data import ReportData, load_report_data
from specselect._report.html import render_html
from specselect._report.markdown import render_markdown
from specselect._report.startup_tables import engine_warning_lines, startups_spec
from specselect.records.startup import EngineWarning, StartupSplit

SPLIT = StartupSplit(
    total_s=31.0,
    process_and_imports_s=19.5,
    weight_load_s=2.1,
    init_s=0.8,
    profile_and_kv_s=0.8,
    compile_and_graphs_s=0.0,
    ready_s=8.6,
    compile_cache="off",
)
WARNING = EngineWarning(
    topic="intel_openmp_speculative",
    message="Speculative decoding on CPU without Intel OpenMP in LD_PRELOAD will cause significant performance loss.",
)


def _with_startups(data: ReportData) -> ReportData:
    groups = []
    for g in data.groups:
        if g.launch is None:  # refused at admission: never launched
            groups.append(g)
            continue
        extra = {"engine_warnings": (WARNING,)} if g.role != "baseline" else {"preload": ("/usr/lib/libiomp5.so",)}
        groups.append(g.model_copy(update={"launch": g.launch.model_copy(update={"startup": SPLIT, **extra})}))
    return dataclasses.replace(data, groups=tuple(groups))


def test_every_split_launch_is_a_row_and_older_results_have_no_table(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    assert startups_spec(data) is None and engine_warning_lines(data) == []
    assert "## Start-ups" not in render_markdown(data)
    spec = startups_spec(_with_startups(data))
    assert spec is not None
    rows = {row[0]: row for row in spec.rows}
    assert rows["g0_target_only"][2:] == ("31.0", "19.5", "2.1", "0.8", "0.8", "0.0", "8.6", "off", "libiomp5.so")


def test_the_engines_warning_is_named_once_with_the_launches_that_logged_it(tmp_path: Path) -> None:
    data = _with_startups(load_report_data(build_run(tmp_path / "run").root))
    (line,) = engine_warning_lines(data)
    assert line.startswith("Speculative decoding on CPU without Intel OpenMP") and "g1_ngram 1" in line
    assert "without Intel OpenMP" in render_markdown(data)
    assert 'id="start-ups"' in render_html(data)
