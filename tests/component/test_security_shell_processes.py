"""The tests of test_security_shell that start processes or stand-in servers (the unit tier is pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_fault_harness import FakeRun, fake_run_fixture, fake_vllm_fixture, ngram  # noqa: F401


@pytest.fixture
def canary_home(tmp_path: Path) -> Path:
    """A stand-in HOME holding a canary file (so a shell-interpreted `~` could only ever reach this)."""
    home = tmp_path / "fake-home"
    home.mkdir()
    (home / "canary").write_text("still here")
    return home


@pytest.mark.parametrize("field", ["model", "python"])
def test_shell_syntax_as_a_model_or_engine_path_is_just_a_bad_name(
    fake_run: FakeRun, canary_home: Path, field: str
) -> None:
    evil = "x; rm -rf ~"
    if field == "model":
        fake_run.plan(model=evil)
    else:
        fake_run.plan(engine={"python": evil})
    done = fake_run.call("run", "plan.toml", env={"HOME": str(canary_home)})
    assert done.returncode == 3, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("specselect: error:")]
    assert len(errors) == 1 and evil in errors[0] and "Traceback" not in done.stderr
    assert (canary_home / "canary").read_text() == "still here"
    assert not (fake_run.results / "faults").exists()


def test_shell_syntax_in_plan_values_reaches_the_engine_verbatim_and_runs_nothing(
    fake_run: FakeRun, canary_home: Path
) -> None:
    model = fake_run.dir / "m; touch PWNED_model"
    model.mkdir()
    (model / "config.json").write_text((fake_run.python.parents[2] / "model" / "config.json").read_text())
    note = "$(touch PWNED_sub) `touch PWNED_tick` | touch PWNED_pipe && rm -rf ~"
    fake_run.plan(
        model=f"./{model.name}",
        engine={"args": ["--fake-note", note], "env": {"FAKE_NOTE": "$(touch PWNED_env)"}},
        candidates=[ngram("g1_ngram", "--fake-other", "; touch PWNED_cand")],
    )
    done = fake_run.call("run", "plan.toml", "--json", env={"HOME": str(canary_home)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert {g["group"]: g["run_status"] for g in json.loads(done.stdout)["groups"]} == {
        "g0_target_only": "completed",
        "g1_ngram": "completed",
    }
    root = fake_run.results / "faults"
    log = (root / "logs" / "g1_ngram.log").read_text()
    argv = json.loads(next(line for line in log.splitlines() if line.startswith("fake engine argv: "))[18:])
    assert argv[argv.index("--fake-note") + 1] == note
    assert argv[argv.index("--fake-other") + 1] == "; touch PWNED_cand"
    assert argv[argv.index("--served-model-name") + 1] == model.name
    command = json.loads((root / "groups" / "g1_ngram.json").read_text())["launch"]["command"]
    assert note in command and str(model.resolve()) in command
    assert not list(fake_run.dir.parent.rglob("PWNED*"))
    assert not list(canary_home.parent.rglob("PWNED*"))
    assert (canary_home / "canary").read_text() == "still here"
