"""Secrets: an API key comes from an environment variable and appears in no file of the results directory,
no recorded command, no log copied into results, no report and no error message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_fault_harness import FakeRun, assert_no_orphans, fake_run_fixture, fake_vllm_fixture, ngram  # noqa: F401

PLANTED = "sk-planted-4f1c9e7a2b6d8e0f3a5c7b9d1e3f5a7c"
KEY_ENV = "SPECSELECT_TEST_API_KEY"


def _files_with(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@dataclass(frozen=True)
class KeyedRun:
    run: FakeRun
    stdout: str
    """The run's --json summary."""
    output: str
    """Everything the run and `specselect report` printed."""


@pytest.fixture(scope="module")
def keyed_run(fake_vllm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedRun]:
    """A run whose engine requires the planted key, prints it to its log, and one group that fails at start
    with the key in its last log lines (one run for the module)."""
    base = tmp_path_factory.mktemp("keyed")
    (base / "work").mkdir()
    fake_run = FakeRun(base / "work", fake_vllm, base / "home")
    fake_run.plan(
        candidates=[ngram("g1_ngram"), ngram("g2_dies", "--fake-exit-at-start", "3")],
        engine={"api_key_env": KEY_ENV, "args": ["--fake-print-key"]},
    )
    done = fake_run.call("run", "plan.toml", "--json", env={KEY_ENV: PLANTED})
    assert done.returncode == 0, done.stderr[-3000:]
    report = fake_run.call("report", "results/faults", env={KEY_ENV: PLANTED})
    assert report.returncode == 0, report.stderr[-3000:]
    assert (fake_run.results / "faults" / "report.html").is_file()
    yield KeyedRun(fake_run, done.stdout, done.stdout + done.stderr + report.stdout + report.stderr)
    assert_no_orphans(fake_vllm.parents[1], fake_run.results)


def test_the_key_is_used_through_the_environment(keyed_run: KeyedRun) -> None:
    run = keyed_run.run
    groups = {g["group"]: g["run_status"] for g in json.loads(keyed_run.stdout)["groups"]}
    # The stand-in answers 401 without the key: completed groups prove the client sent it.
    assert groups == {"g0_target_only": "completed", "g1_ngram": "completed", "g2_dies": "failed"}
    log = (run.results / "faults" / "logs" / "g1_ngram.log").read_text()
    assert "--api-key" not in log  # passed as VLLM_API_KEY, never on the command line


def test_planted_key_is_in_no_result_document_record_or_output(keyed_run: KeyedRun) -> None:
    root = keyed_run.run.results / "faults"
    assert PLANTED not in keyed_run.output
    found = [f for f in _files_with(root, PLANTED.encode()) if not f.startswith("logs/")]
    assert found == []  # result documents, records, report.html, report.md, engine work files
    failed = json.loads((root / "groups" / "g2_dies.json").read_text())
    assert "failing at start-up with the key *** in the message" in failed["log_tail"]
    for group in root.glob("groups/*.json"):
        launch = json.loads(group.read_text()).get("launch")
        if launch:
            assert not any(PLANTED in part for part in launch["command"])


def test_planted_key_is_in_no_file_under_the_results_directory(keyed_run: KeyedRun) -> None:
    assert _files_with(keyed_run.run.results, PLANTED.encode()) == []


def test_a_key_written_into_the_plan_is_refused_without_echoing_it(fake_run: FakeRun) -> None:
    fake_run.plan(engine={"env": {"OPENAI_API_KEY": PLANTED}})
    done = fake_run.call("validate", "plan.toml")
    assert done.returncode == 2
    assert "engine.env.OPENAI_API_KEY" in done.stderr
    assert PLANTED not in done.stderr and PLANTED not in done.stdout and "Traceback" not in done.stderr


def test_an_unset_key_variable_stops_the_run_before_anything_starts(fake_run: FakeRun) -> None:
    fake_run.plan(engine={"api_key_env": "SPECSELECT_UNSET_KEY_VARIABLE"})
    done = fake_run.call("run", "plan.toml", env={"SPECSELECT_UNSET_KEY_VARIABLE": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "api_key_env_unset: environment variable SPECSELECT_UNSET_KEY_VARIABLE is not set" in done.stderr
    assert not (fake_run.results / "faults").exists()
