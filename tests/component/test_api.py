"""The Python API (`specselect.api`, re-exported by `specselect`) end to end: a plan run, probed and checked against
local stub endpoints (kind "openai": stand-in servers in the unit tier, since the engine is not what is under test
here), its results read back and turned into the DataFrame a notebook filters. The CLI on the real engine:
tests/e2e; the runner's own behaviour: tests/unit/test_runner_*.py, tests/component/test_runner_*.py."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import specselect
from specselect import api
from specselect._engines.openai.engine import AttachedServer, OpenAIEndpointEngine
from specselect._plan import builtin_plan_text
from specselect._runner.progress import SilentProgress
from specselect.errors import ConfigError, MissingDependencyError, PlanError, ResultsError, UsageError
from specselect.records.server import SanityResult

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer

PLAN = """
schema_version = 1
label = "api"
[target]
model = "stub-model"
[engine]
kind = "openai"
[sampling]
max_tokens = 8
[run]
repeats = 1
warmup_requests = 1
[thresholds]
# The stubs' latency ratios move with the host's scheduling: the API is under test, not the latency gates.
max_ttft_regression_ratio = 10.0
max_e2e_p95_regression_ratio = 10.0
[workloads]
general = "builtin:general"
repetition = "builtin:repetition"
[[candidates]]
name = "g0_target_only"
endpoint = { base_url = "BASE", model = "stub-model", peak_memory_mb = 900.0 }
[[candidates]]
name = "g1_ngram"
family = "ngram"
endpoint = { base_url = "FAST/v1", model = "stub-model", peak_memory_mb = 900.0 }
[[candidates]]
name = "g2_draft"
family = "draft_model"
endpoint = { base_url = "SHORT/v1", model = "stub-model", peak_memory_mb = 900.0 }
"""

CANDIDATES_X_SCENARIOS = [
    ("g1_ngram", "general-c1"),
    ("g1_ngram", "repetition-c1"),
    ("g2_draft", "general-c1"),
    ("g2_draft", "repetition-c1"),
]


class Stages(SilentProgress):
    """Remembers the stages the runner reported."""

    def __init__(self) -> None:
        self.stages: list[str] = []

    def stage(self, text: str) -> None:
        self.stages.append(text)


@dataclasses.dataclass(frozen=True)
class Session:
    """What one notebook session did through the API while the stub endpoints ran."""

    plan: Path
    outcome: api.RunOutcome
    stages: list[str]
    probed: api.RunOutcome
    checked: api.CheckOutcome
    checked_changed: api.CheckOutcome
    dry_run_quiet: str
    dry_run_progress: str


def _captured(call: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        call()
    return out.getvalue()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """g1_ngram streams the baseline's outputs twice as fast; g2_draft streams as fast but stops two tokens early on
    every item, so its outputs differ from the baseline's. One run for the module (each takes a few seconds)."""
    tmp = tmp_path_factory.mktemp("api")
    home = tmp / "home"

    # The stub streams only; the real engine's non-streaming sanity request is covered by the integration tests.
    def sanity(self: OpenAIEndpointEngine, server: AttachedServer) -> SanityResult:
        return SanityResult(model_ids=(server.served_model,), api="chat", reply_text="hi", seconds=0.0)

    base = StubBehavior(ttft_s=0.01, chunk_delay_s=0.004, output_tokens=8)
    fast = StubBehavior(ttft_s=0.01, chunk_delay_s=0.002, tokens_per_chunk=2, output_tokens=8, spec_metrics=True)
    short = StubBehavior(ttft_s=0.01, chunk_delay_s=0.002, tokens_per_chunk=2, output_tokens=6, spec_metrics=True)
    with pytest.MonkeyPatch.context() as mp, StubServer(base) as b, StubServer(fast) as f, StubServer(short) as s:
        mp.setattr(OpenAIEndpointEngine, "sanity", sanity)
        text = PLAN.replace("BASE", b.base_url).replace("SHORT", s.base_url)
        plan, changed = tmp / "plan.toml", tmp / "changed.toml"
        plan.write_text(text.replace("FAST", f.base_url))
        # The setup measured now: g1_ngram's endpoint serves g2_draft's outputs (and g2_draft is gone).
        changed.write_text(text.split('[[candidates]]\nname = "g2_draft"')[0].replace("FAST", s.base_url))
        stages = Stages()
        outcome = specselect.run(plan, results_dir=tmp / "res", progress=stages, home=home)
        root = outcome.layout.root
        yield Session(
            plan=plan,
            outcome=outcome,
            stages=stages.stages,
            probed=specselect.probe(plan, results_dir=tmp / "probed", home=home),
            checked=specselect.check(root, candidate="g1_ngram", rounds=1, home=home),
            checked_changed=specselect.check(
                root, plan=changed, candidate="g1_ngram", rounds=1, out_dir=tmp / "changed-check", home=home
            ),
            dry_run_quiet=_captured(lambda: specselect.run(plan, results_dir=tmp / "dry", dry_run=True, home=home)),
            dry_run_progress=_captured(
                lambda: specselect.run(plan, results_dir=tmp / "dry", dry_run=True, progress=True, home=home)
            ),
        )


def _expected_row(entry: dict[str, Any]) -> dict[str, Any]:
    """A DataFrame row's values as `evidence.json` states them."""
    interval = entry["decision"]["confidence"]["interval"]
    return {
        "candidate": entry["candidate"],
        "family": entry["family"],
        "workload": entry["workload"],
        "concurrency": entry["concurrency"],
        "temperature": entry["temperature"],
        "scenario": entry["scenario"],
        "evidence_status": entry["evidence"]["evidence_status"],
        "decision": entry["decision"]["decision"],
        "reason": entry["decision"]["reason"],
        "confidence": entry["decision"]["confidence"]["status"],
        "speedup": entry["evidence"]["throughput_speedup"],
        "ci_low": interval["low"],
        "ci_high": interval["high"],
        "ci_level": interval["level"],
        "acceptance_rate": entry["telemetry"]["acceptance_rate"],
        "parity": entry["parity"]["verdict"],
    }


# -- run, load_results, to_pandas ------------------------------------------------------------------------


def test_a_run_reads_back_as_one_row_per_candidate_and_scenario_with_the_values_of_evidence_json(
    session: Session,
) -> None:
    root = session.outcome.layout.root
    results = specselect.load_results(root)
    evidence = json.loads((root / "evidence.json").read_text())
    frame = results.to_pandas()

    assert list(frame.columns) == list(api.RESULT_COLUMNS)
    assert list(zip(frame["candidate"], frame["scenario"], strict=True)) == CANDIDATES_X_SCENARIOS
    assert frame[list(_expected_row(evidence["entries"][0]))].to_dict("records") == [
        _expected_row(entry) for entry in evidence["entries"]
    ]
    # Every row has a decision and its speedup inside the interval the decision used.
    assert set(frame["decision"]) <= {"accept", "tune", "reject", "not_evaluated"}
    assert ((frame["ci_low"] <= frame["speedup"]) & (frame["speedup"] <= frame["ci_high"])).all()
    assert list(frame["run_status"]) == ["completed"] * 4
    # The diverging candidate is rejected on quality wherever it ran, whatever its speed.
    rejected = frame[frame["candidate"] == "g2_draft"]
    assert list(zip(rejected["decision"], rejected["reason"], rejected["parity"], strict=True)) == [
        ("reject", "quality_failed", "fail"),
        ("reject", "quality_failed", "fail"),
    ]
    assert list(frame[frame["candidate"] == "g1_ngram"]["parity"]) == ["pass", "pass"]


def test_filtering_the_frame_to_accepted_rows_keeps_exactly_what_the_evidence_accepted(session: Session) -> None:
    root = session.outcome.layout.root
    frame = specselect.load_results(root).to_pandas()
    evidence = json.loads((root / "evidence.json").read_text())
    accepted = frame[frame["decision"] == "accept"]
    assert list(zip(accepted["candidate"], accepted["scenario"], strict=True)) == [
        (e["candidate"], e["scenario"]) for e in evidence["entries"] if e["decision"]["decision"] == "accept"
    ]
    assert "g2_draft" not in set(accepted["candidate"])


def test_results_carry_the_runs_documents_and_rows_without_pandas(session: Session) -> None:
    out = session.outcome
    results = specselect.load_results(out.layout.root)
    assert (results.root, results.label, results.plan_hash, results.complete) == (
        out.layout.root,
        "api",
        out.loaded.plan_hash,
        True,
    )
    assert results.notes == ()
    assert results.admission is not None
    assert [(r.candidate, r.run_status.value) for r in results.admission.results] == [
        ("g1_ngram", "runnable"),
        ("g2_draft", "runnable"),
    ]
    assert [(g.group, g.run_status.value) for g in results.groups] == [
        ("g0_target_only", "completed"),
        ("g1_ngram", "completed"),
        ("g2_draft", "completed"),
    ]
    assert results.evidence == out.evidence and results.handoff == out.handoff
    assert dict(results.verdicts) == out.evidence.verdicts  # type: ignore[union-attr]
    assert results.verdicts["g2_draft"] == "reject for general-c1, reject for repetition-c1"
    assert [(e.candidate, e.scenario) for e in results.entries] == CANDIDATES_X_SCENARIOS
    rows = results.rows()
    assert [list(row) for row in rows] == [list(api.RESULT_COLUMNS)] * 4
    assert rows == specselect.to_pandas(results).to_dict("records")


def test_results_are_read_only(session: Session) -> None:
    results = specselect.load_results(session.outcome.layout.root)
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.evidence = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        results.verdicts["g1_ngram"] = "accept"  # type: ignore[index]
    with pytest.raises(ValueError, match="frozen"):
        results.manifest.label = "other"  # type: ignore[misc]
    assert isinstance(results.groups, tuple) and isinstance(results.entries, tuple)


def test_results_load_from_the_hand_off_or_evidence_file_as_from_their_directory(session: Session) -> None:
    root = session.outcome.layout.root
    whole = specselect.load_results(root)
    for name in ("handoff.json", "evidence.json"):
        assert specselect.load_results(root / name) == whole


def test_a_run_writes_the_reports_and_records_the_equivalent_command(session: Session) -> None:
    out = session.outcome
    assert out.layout.report_html.is_file() and out.layout.report_md.is_file()
    assert out.manifest is not None and out.manifest.command == (
        "specselect",
        "run",
        str(session.plan),
        "--results-dir",
        str(out.layout.root.parent),
    )
    assert [s for s in session.stages if not s.startswith("group ")] == ["preflight", "admission", "evidence"]


def test_progress_is_silent_unless_asked_for(session: Session) -> None:
    assert session.dry_run_quiet == ""
    assert "== admission" in session.dry_run_progress


# -- load_plan, probe, check -----------------------------------------------------------------------------


def test_load_plan_validates_as_the_validate_command_does(tmp_path: Path) -> None:
    loaded = specselect.load_plan("builtin:cpu-smoke")
    assert (loaded.source, loaded.plan.label) == ("builtin:cpu-smoke", "cpu-smoke")
    path = tmp_path / "p.toml"
    path.write_text(builtin_plan_text("cpu-smoke").replace("concurrency = [1]", "concurrency = [0]"))
    with pytest.raises(PlanError) as bad:
        specselect.load_plan(path)
    assert str(bad.value) == f"{path}: plan does not validate (1 problem)"
    assert bad.value.problems[0].startswith(f"{path}: run.concurrency[0]: must be > 0 (got 0) (fix: ")
    # Valid as a plan, wrong for its engine: the check `validate` adds on top of the plan's schema.
    path.write_text(builtin_plan_text("cpu-smoke").replace("prompt_lookup_max = 5 }", "prompt_lookup_mx = 5 }", 1))
    with pytest.raises(ConfigError) as wrong:
        specselect.load_plan(path)
    assert str(wrong.value) == f"{path}: the plan is not valid for its engine"
    assert "did you mean 'prompt_lookup_max'?" in wrong.value.problems[0]


def test_probe_admits_every_candidate_and_writes_no_results(session: Session) -> None:
    probed = session.probed
    assert [(r.candidate, r.run_status.value) for r in probed.admission.results] == [
        ("g1_ngram", "runnable"),
        ("g2_draft", "runnable"),
    ]
    assert set(probed.preflight.endpoints) == {"g0_target_only", "g1_ngram", "g2_draft"}
    assert (probed.groups, probed.evidence, probed.handoff) == ([], None, None)
    assert not probed.layout.root.exists()


def _checked_scenarios(session: Session) -> list[str]:
    """Where the hand-off recommends g1_ngram (a check measures a candidate where it was recommended), else
    everywhere it was compared: its decisions rest on the stubs' timing on a shared host."""
    handoff = specselect.load_results(session.outcome.layout.root).handoff
    assert handoff is not None
    recommended = [s.scenario for s in handoff.scenarios if s.recommended == "g1_ngram"]
    return recommended or ["general-c1", "repetition-c1"]


def test_check_of_an_unchanged_configuration_is_ok(session: Session) -> None:
    checked = session.checked
    report = checked.report
    root = session.outcome.layout.root
    assert checked.path == root.parent / "api-check" / "check.json" and checked.path.is_file()
    assert (report.candidate, report.handoff) == ("g1_ngram", str(root / "handoff.json"))
    assert report.problems == (), [p.line() for p in report.problems]
    assert report.ok
    # One round: the speedup is shown, not judged; parity is.
    assert [(s.scenario, s.speedup_judged, s.parity) for s in report.scenarios] == [
        (scenario, False, "pass") for scenario in _checked_scenarios(session)
    ]


def test_check_returns_what_changed_instead_of_raising(session: Session) -> None:
    report = session.checked_changed.report
    assert session.checked_changed.path == session.outcome.layout.root.parent.parent / "changed-check" / "check.json"
    assert report.ok is False
    assert [(p.kind, p.scenario, p.message) for p in report.problems] == [
        ("parity", scenario, "fail now, pass recorded (8 of 8 outputs differ)")
        for scenario in _checked_scenarios(session)
    ]


# -- refusals --------------------------------------------------------------------------------------------


def test_a_missing_results_directory_is_a_one_line_results_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError) as missing:
        specselect.load_results(tmp_path / "nope")
    assert str(missing.value) == (
        f"{tmp_path / 'nope'}: results directory not found (fix: give results/<label> of a `specselect run` "
        "(see the labels under results/))"
    )
    with pytest.raises(ResultsError) as foreign:
        specselect.load_results(tmp_path)
    assert str(foreign.value) == (
        f"{tmp_path}: no manifest.json: not a specselect results directory "
        "(fix: give results/<label> of a `specselect run`)"
    )


def _copy(session: Session, tmp_path: Path) -> Path:
    return Path(shutil.copytree(session.outcome.layout.root, tmp_path / "api"))


def test_check_refuses_repeats_and_rounds_out_of_range_before_measuring_anything(session: Session) -> None:
    root = session.outcome.layout.root
    with pytest.raises(UsageError) as repeats:
        specselect.check(root, repeats=0)
    assert str(repeats.value) == "--repeats: 0 repeats (fix: give 1 to 100 repeats)"
    with pytest.raises(UsageError) as rounds:
        specselect.check(root, rounds=51)
    assert str(rounds.value) == "--rounds: 51 rounds (fix: give 1 to 50 rounds)"


def test_a_corrupt_document_is_a_one_line_results_error_naming_it(session: Session, tmp_path: Path) -> None:
    root = _copy(session, tmp_path)
    (root / "evidence.json").write_text("{")
    with pytest.raises(ResultsError) as corrupt:
        specselect.load_results(root)
    assert str(corrupt.value) == (
        f"{root / 'evidence.json'}: not a readable JSON result file "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )


def test_another_schema_version_is_refused_as_verify_and_report_refuse_it(session: Session, tmp_path: Path) -> None:
    root = _copy(session, tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1, "tool_version": "0.0.9"}))
    with pytest.raises(ResultsError) as old:
        specselect.load_results(root)
    version = specselect.__version__
    assert str(old.value) == (
        f"{root / 'manifest.json'}: result schema_version 1 (written by specselect 0.0.9); this specselect "
        f"{version} reads schema_version 2 (fix: read it with specselect 0.0.9, or re-run the plan with this version)"
    )


def test_a_run_that_did_not_finish_has_no_rows_and_a_note_on_how_to_finish_it(session: Session, tmp_path: Path) -> None:
    root = _copy(session, tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    results = specselect.load_results(root)
    assert (results.complete, results.evidence, results.handoff, dict(results.verdicts)) == (False, None, None, {})
    assert results.notes == (
        "the run is interrupted: no evidence or decisions yet (finish it with "
        f"`specselect run {session.plan} --label api --resume`)",
    )
    frame = results.to_pandas()
    assert (list(frame.columns), len(frame)) == (list(api.RESULT_COLUMNS), 0)


def test_to_pandas_without_pandas_names_the_extra_to_install(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    results = specselect.load_results(session.outcome.layout.root)
    monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` meets when it is not installed
    with pytest.raises(MissingDependencyError) as missing:
        results.to_pandas()
    assert (
        str(missing.value) == "to_pandas needs pandas, which is not installed (fix: pip install 'specselect[pandas]')"
    )


# -- the package ---------------------------------------------------------------------------------------


def test_the_package_re_exports_the_api_and_imports_it_only_when_used() -> None:
    assert [getattr(specselect, name) for name in specselect.__all__ if name != "__version__"] == [
        api.Results,
        api.check,
        api.load_plan,
        api.load_results,
        api.probe,
        api.run,
        api.to_pandas,
    ]
    code = "import sys, specselect; print('specselect.api' in sys.modules, 'specselect._runner' in sys.modules)"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert fresh.stdout == "False False\n"
    with pytest.raises(AttributeError, match="module 'specselect' has no attribute 'nope'"):
        _ = specselect.nope  # type: ignore[attr-defined]
