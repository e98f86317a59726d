"""Paired rounds (`[run] rounds`, `looks`) through the runner, against the stand-in SGLang server.

A real launch is a vLLM server start (tests/e2e runs builtin:cpu-smoke); here the stand-in shows what only a
chosen interruption can: the alternating order of the rounds, the records of each launch, a resume that keeps
the launches that finished and reruns the one that was interrupted, and the looks' choice of who runs on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "data"))  # the fake SGLang installer
import sglang_fake_install as FAKE
from test_assets_files import tiny_llama

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect._engines.sglang import engine as sglang_engine_module
from specselect._engines.sglang.engine import SglangEngine
from specselect._runner import run as run_module
from specselect._runner import schedule_candidate as schedule_module
from specselect._runner.conclusion import look
from specselect._runner.context import RunContext
from specselect._runner.progress import SilentProgress
from specselect._runner.run import RunOptions, run_plan
from specselect.errors import InterruptedRun
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.sweeps import DerivedSchedule
from specselect.records.group import GroupResult

PLAN = """
schema_version = 1
label = "launches"
[target]
model = "MODEL"
[engine]
kind = "sglang"
python = "ENGINE_PY"
startup_timeout_s = 60.0
env = { PYTHONPATH = "SITE" }
[sampling]
max_tokens = 8
[run]
repeats = 2
rounds = 2
warmup_requests = 1
parity_pass = "off"
[workloads]
general = "builtin:general"
[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 3
[[candidates]]
name = "g2_ngram"
family = "ngram"
num_speculative_tokens = 2
"""


class Stages(SilentProgress):
    """Remembers the stages; raises KeyboardInterrupt (as Ctrl-C would) at the line that starts with `stop_at`."""

    def __init__(self, stop_at: str | None = None) -> None:
        self.stages: list[str] = []
        self.stop_at = stop_at

    def stage(self, text: str) -> None:
        self.stages.append(text)

    def info(self, text: str) -> None:
        if self.stop_at is not None and text.startswith(self.stop_at):
            raise KeyboardInterrupt


def _options(tmp_path: Path, *, resume: bool = False) -> RunOptions:
    site = tmp_path / "site"
    if not site.exists():
        FAKE.install(site, "registry")
    target = tmp_path / "target"
    if not target.exists():
        tiny_llama(target)
    text = PLAN.replace("MODEL", str(target)).replace("ENGINE_PY", sys.executable).replace("SITE", str(site))
    (tmp_path / "plan.toml").write_text(text)
    return RunOptions(
        plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res", home=tmp_path / "home", resume=resume
    )


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_rounds_alternate_their_order_and_each_launch_continues_the_passes(tmp_path: Path, one_gpu: None) -> None:
    progress = Stages()
    out = run_plan(_options(tmp_path), progress)

    groups = [s.removeprefix("group ") for s in progress.stages if s.startswith("group ")]
    assert groups == [
        "g0_target_only",
        "g1_ngram",
        "g2_ngram",
        "g2_ngram, round 2 of 2",
        "g1_ngram, round 2 of 2",
        "g0_target_only, round 2 of 2",
    ]
    for group in out.groups:
        assert group.launches_planned == 2
        assert [(r.index, r.run_status.value) for r in group.relaunches] == [(1, "completed")]
        again = group.relaunches[0]
        assert again.launch is not None and again.launch.base_url != group.launch.base_url  # type: ignore[union-attr]
        assert again.release is not None and again.release.processes_gone
        assert [(s.scenario, s.launch, s.status) for s in again.scenarios] == [("general-c1", 1, "completed")]
    root = out.layout.root
    first = _records(root / "records" / "g1_ngram" / "general-c1.jsonl")
    second = _records(root / "records" / "g1_ngram" / "general-c1.l1.jsonl")
    measured = [r for r in second if not r["warmup"]]
    assert {r["launch"] for r in first} == {0} and {r["launch"] for r in second} == {1}
    # Launch 1 measures passes 2 and 3: (item, repeat) names one request of the group across its launches.
    assert sorted({r["repeat"] for r in measured}) == [2, 3] and len(measured) == 16
    assert (root / "logs" / "g1_ngram.l1.log").exists()
    assert verify_run(root).ok


def test_a_resume_keeps_finished_launches_and_reruns_the_interrupted_one(tmp_path: Path, one_gpu: None) -> None:
    with pytest.raises(InterruptedRun):
        run_plan(_options(tmp_path), Stages(stop_at="starting server for g1_ngram (round 2 of 2)"))
    layout = RunLayout(tmp_path / "res" / "launches")
    kept = load_document(layout.group_summary("g2_ngram"), GroupResult)
    interrupted = load_document(layout.group_summary("g1_ngram"), GroupResult)
    assert [(r.index, r.run_status.value) for r in kept.relaunches] == [(1, "completed")]
    assert [(r.index, r.reason) for r in interrupted.relaunches] == [(1, "interrupted")]

    progress = Stages()
    out = run_plan(_options(tmp_path, resume=True), progress)

    assert [s for s in progress.stages if s.startswith("group ")] == [
        "group g1_ngram, round 2 of 2",
        "group g0_target_only, round 2 of 2",
    ]
    by_name = {g.group: g for g in out.groups}
    assert by_name["g2_ngram"].relaunches == kept.relaunches
    assert [(r.index, r.run_status.value) for r in by_name["g1_ngram"].relaunches] == [(1, "completed")]
    assert verify_run(layout.root).ok


def test_after_a_look_only_the_candidates_the_rule_names_run_on_with_their_baseline(
    tmp_path: Path, one_gpu: None
) -> None:
    opts = _options(tmp_path)
    Path(opts.plan_ref).write_text(
        Path(opts.plan_ref).read_text().replace("rounds = 2\n", "rounds = 2\nlooks = [2, 3]\n")
    )
    progress = Lines()
    out = run_plan(opts, progress)

    (said,) = [line for line in progress.lines if line.startswith("look 1 after 2 rounds")]
    on = said.split(": ", 1)[1].removesuffix(" run on").split(", ") if said.endswith(" run on") else []
    launches = {g.group: 1 + len(g.relaunches) for g in out.groups}
    assert {name for name, n in launches.items() if n == 3} == ({*on, "g0_target_only"} if on else set())
    assert out.evidence is not None and out.evidence.plan is not None
    assert out.evidence.plan.rounds_done == (3 if on else 2)
    assert [p.rounds for p in out.evidence.looks] == ([2, 3] if on else [2])
    assert out.evidence.looks[0].level == pytest.approx(1 - 0.025 * 2 / 3 * 2)  # look 1 spends 2/3 of 2.5 %


def test_a_schedule_candidates_second_launch_runs_the_schedule_its_first_launch_derived(
    tmp_path: Path, one_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-in SGLang has no per-batch-size schedule: here it admits one and expresses it as an n-gram option
    # it knows, so each launch's command shows which schedule ran. Derivations are counted: a relaunch reuses.
    derived = DerivedSchedule(sweep="g1_ngram", status="derived", levels=(), ranges=((1, None, 2),), reason="k=2")
    derivations: list[str] = []

    def derive(*args: object) -> DerivedSchedule:
        derivations.append("derived")
        return derived

    def as_option(self: SglangEngine, ranges: object, ctx: object) -> dict[str, int]:
        return {"speculative_ngram_max_trie_depth": 1000 + sum(k for _, _, k in ranges)}  # type: ignore[attr-defined]

    monkeypatch.setattr(schedule_module, "_derive", derive)
    monkeypatch.setattr(SglangEngine, "batch_schedule", as_option)
    monkeypatch.setattr(sglang_engine_module, "controller_check", lambda *args, **kwargs: None)  # admits the controller
    opts = _options(tmp_path)
    text = Path(opts.plan_ref).read_text().split("[[candidates]]")[0].replace("repeats = 2\n", "concurrency = [1, 2]\n")
    Path(opts.plan_ref).write_text(
        text + '[[candidates]]\nname = "g1_ngram"\nfamily = "ngram"\nnum_speculative_tokens = [1, 2]\n'
        "measure_schedule = true\n"
    )
    out = run_plan(opts, Stages())

    group = next(g for g in out.groups if g.group == "g1_ngram.schedule")
    lives = [group, *group.relaunches]
    assert [life.run_status.value for life in lives] == ["completed", "completed"]
    assert derivations == ["derived"] and group.derived_schedule == derived
    commands = [life.launch.command for life in lives if life.launch is not None]
    assert len(commands) == 2 and all("1002" in command for command in commands), commands


class Lines(Stages):
    """Also remembers every info line."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)


def test_rounds_after_a_look_that_would_overrun_the_time_budget_are_left_out_and_recorded(
    tmp_path: Path, one_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-in reports no peak memory, so its pairs are incomplete and settled: here the look keeps g1 open.
    def open_look(run: RunContext, groups: Sequence[GroupResult]) -> Evidence:
        found = look(run, groups)
        assert found.plan is not None
        return found.model_copy(update={"plan": found.plan.model_copy(update={"continuing": ("g1_ngram",)})})

    monkeypatch.setattr(run_module, "look", open_look)
    opts = _options(tmp_path)
    extra = "rounds = 2\nlooks = [2, 3]\nsequential_budget_s = 1.0\n"
    Path(opts.plan_ref).write_text(Path(opts.plan_ref).read_text().replace("rounds = 2\n", extra))
    progress = Lines()
    out = run_plan(opts, progress)

    assert all(len(g.relaunches) == 1 for g in out.groups)  # no third launch
    assert out.manifest is not None and out.manifest.sequential_stop is not None
    assert out.manifest.sequential_stop.startswith("round 3 left out: ")
    assert out.manifest.sequential_stop.endswith("exceed sequential_budget_s = 1")
    assert f"rounds: {out.manifest.sequential_stop}" in progress.lines
    assert out.evidence is not None and out.evidence.plan is not None and out.evidence.plan.rounds_done == 2
