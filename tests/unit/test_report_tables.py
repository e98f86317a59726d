"""The shared cell sources of the report tables (HTML and Markdown render exactly these strings)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_report_sample import Cand, build_run

from specselect._core.gates import AdmissionResult
from specselect._core.status import RunStatus
from specselect._report.console import (
    DECISION_COLUMNS,
    REPORT_DECISION_COLUMNS,
    decision_rows,
    groups_table,
    report_decision_rows,
)
from specselect._report.data import load_report_data
from specselect._report.plots import build_plots, group_colours, proposal_length_of
from specselect._report.tables import (
    command_lines,
    deciding_facts,
    file_rows,
    fmt_fact,
    groups_spec,
    identity_sections,
    measurements_spec,
    recommendations,
    verdicts,
)
from specselect.records.group import GroupLaunch


def test_report_rows_are_decision_rows_plus_peak_memory(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    assert data.evidence is not None
    plain = decision_rows(data.evidence, data.groups)
    full = report_decision_rows(data.evidence, data.groups)
    assert REPORT_DECISION_COLUMNS[9] == "peak memory" and len(REPORT_DECISION_COLUMNS) == len(DECISION_COLUMNS) + 1
    assert [r[:9] + r[10:] for r in full] == plain
    memory = {r[0]: r[9] for r in full}
    assert memory == {"g1_ngram": "5,150 MiB", "g3_eagle3": "-", "g9_broken": "-"}


def test_deciding_facts_and_fact_formatting() -> None:
    refused = AdmissionResult(
        candidate="c",
        family="eagle",
        run_status=RunStatus.ASSET_MISSING,
        gate="asset",
        reason="proposer_not_given",
        facts={"backend.method": "eagle3", "asset.asset_kind": "paired_checkpoint", "asset.size": 0.1 + 0.2},
    )
    assert deciding_facts(refused) == [("asset.asset_kind", "paired_checkpoint"), ("asset.size", "0.3")]
    runnable = refused.model_copy(
        update={"run_status": RunStatus.RUNNABLE, "gate": "none", "facts": {"capacity.budget_mb": 100.0}}
    )
    assert deciding_facts(runnable) == [("capacity.budget_mb", "100")]
    assert [fmt_fact(v) for v in (None, True, 3, "x")] == ["-", "True", "3", "x"]


def test_groups_measurements_verdicts_and_recommendations(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    groups = {r[0]: r for r in groups_spec(data).rows}
    assert groups["g9_broken"][3:6] == (
        "failed",
        "server_start_failed",
        "the server exited during start-up; read the log",
    )
    assert groups["g1_ngram"][6:] == ("30.0 s", "1/1")
    measured = measurements_spec(data)
    assert measured is not None
    assert [(r[0], r[1], r[2], r[3]) for r in measured.rows] == [
        ("g0_target_only", "copy-c1", "completed", "6/6"),
        ("g1_ngram", "copy-c1", "completed", "6/6"),
    ]
    assert measured.rows[0][-1] == "not exported" and measured.rows[1][-1] == "0.54 (len 3.17)"
    lines = {v.candidate: v for v in verdicts(data)}
    assert lines["g1_ngram"].verdict == "accept for copy-c1" and lines["g3_eagle3"].run_status == "asset_missing"
    assert recommendations(data)[0][1].startswith("use g1_ngram (ngram): speedup ")


def test_identities_commands_and_files(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    sections = dict(identity_sections(data))
    assert list(sections) == ["Run", "Engine", "Models", "Workloads", "Measurement", "Policy", "Host"]
    assert ("plan hash", "c" * 64) in sections["Run"] and ("target parameters", "1,000") in sections["Models"]
    assert ("min throughput speedup", "1.10x") in sections["Policy"]
    commands = dict(command_lines(data))
    assert commands["specselect"] == "specselect run plan.toml --label sample"
    assert '--speculative-config \'{"method": "ngram"' in commands["g1_ngram"] and "g3_eagle3" not in commands
    files = dict(file_rows(data))
    assert len(files["records/g1_ngram/copy-c1.jsonl"]) == 64 and files["logs/g9_broken.log"] == "-"


def test_colours_and_sweep_detection(tmp_path: Path) -> None:
    sweep = (Cand("g1_ngram_k2", k=2, speed=1.2), Cand("g1_ngram", k=4, speed=1.6))
    data = load_report_data(build_run(tmp_path / "run", candidates=sweep).root)
    colours = group_colours(data)
    assert colours["g0_target_only"] == "#7A7A7A" and len(set(colours.values())) == len(colours)
    assert [proposal_length_of(data.group(n)) for n in ("g1_ngram_k2", "g1_ngram", "g3_eagle3")] == [2, 4, None]
    plots = build_plots(data)
    keys = [s.key for s in plots.sections]
    assert "plot-proposal-length" in keys and "plot-concurrency" not in keys
    assert keys[0] == "plot-speedup"


def test_baseline_name_with_one_or_several_tracks(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    assert data.baseline_name == "g0_target_only"
    extra = data.manifest.groups[0].model_copy(update={"name": "g0_target_only_big"})
    two = replace(data, manifest=data.manifest.model_copy(update={"groups": (*data.manifest.groups, extra)}))
    assert two.baseline_name == "the target-only baseline of its track"
    assert group_colours(two)["g0_target_only_big"] != group_colours(two)["g0_target_only"]


def test_the_console_counts_the_launch_a_sequential_round_added(tmp_path: Path) -> None:
    # Two launches planned, a third added by `[run] max_launches`: 3 of 3 started launches completed, not "3/2".
    g = load_report_data(build_run(tmp_path / "run").root).group("g1_ngram")
    assert g is not None
    later = tuple(
        GroupLaunch(index=j, run_status=RunStatus.COMPLETED, reason="measured", launch=g.launch, scenarios=g.scenarios)
        for j in (1, 2)
    )
    table = groups_table([g.model_copy(update={"relaunches": later, "launches_planned": 2})])
    assert list(table.columns[3].cells) == ["3/3"]
