"""The hand-off closes the loop on the real CPU vLLM: one answer for the plan's traffic mix, serve flags that start
a server reproducing the candidate's acceptance, and `specselect check`, which passes on the unchanged setup and
fails naming the cause when the proposal length or the draft changed.

The shared recorded run (`recorded_run` of conftest.py: baseline, n-gram k=4, the target as its own draft model,
on builtin:repetition) is what every test here checks against.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _reduced_plan import RecordedRun, recorded_plan, specselect

from specselect._artifacts.check import CheckReport
from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._engines.prometheus import MetricsSnapshot
from specselect._engines.server import ServerOptions, ServerProcess
from specselect._engines.vllm.engine import VllmEngine
from specselect._engines.vllm.envsetup import EngineEnv
from specselect._evidence.regression import acceptance_problems
from specselect._measure import run_load
from specselect._plan import load_plan
from specselect._workloads.loader import load_workload
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.measurement import CacheSaltPolicy, Endpoint, SamplingParams, ScenarioSpec

pytestmark = pytest.mark.integration


def _plan(path: Path, *, k: int = 4, draft: str = "builtin:smollm2-135m") -> Path:
    path.write_text(recorded_plan(k_ngram=k, draft=draft, refused=False))
    return path


@pytest.fixture(scope="module")
def recorded(recorded_run: RecordedRun) -> RunLayout:
    """The shared recorded run (baseline, n-gram k=4, the target as its own draft, on builtin:repetition)."""
    assert recorded_run.done.returncode == 0, recorded_run.done.stderr[-3000:]
    return RunLayout(recorded_run.root)


def test_the_handoff_gives_one_configuration_first_for_the_mix_with_its_interval(recorded: RunLayout) -> None:
    handoff = load_document(recorded.handoff, Handoff)
    assert handoff.mix is not None and handoff.mix_note is None
    assert handoff.mix.recommended == "g1_ngram", handoff.mix.recommendation
    option = next(o for o in handoff.mix.options if o.candidate == "g1_ngram")
    assert option.on_segments is not None and 1.0 < option.on_segments.low < option.on_segments.point
    # The first answer is one configuration: n-gram on every request, with its interval.
    single = handoff.mix.single
    assert single is not None and single.estimate is not None and single.faster_than_baseline
    assert handoff.mix.recommendation.startswith("use g1_ngram (ngram) on every request: expected speedup of the mix")
    # One workload, accepted at its one level: routing would serve it with the same configuration.
    assert handoff.mix.routing is None and handoff.mix.routing_note is not None
    assert handoff.mix.routing_note.startswith("nothing to route: g1_ngram")
    assert handoff.mix.serve is not None and handoff.mix.serve.speculative is not None
    assert handoff.mix.serve.speculative["num_speculative_tokens"] == 4
    (scenario,) = handoff.scenarios
    ngram = next(c for c in scenario.candidates if c.candidate == "g1_ngram")
    assert ngram.acceptance_spread is not None and len(ngram.acceptance_spread.per_position) == 4
    assert "For your traffic mix" in (recorded.root / "report.md").read_text()


def test_a_server_started_from_the_handoff_flags_reproduces_the_acceptance(
    recorded: RunLayout, engine_env: EngineEnv, tmp_path: Path
) -> None:
    handoff = load_document(recorded.handoff, Handoff)
    assert handoff.mix is not None and handoff.mix.serve is not None
    flags = handoff.mix.serve
    spread = next(c for c in handoff.scenarios[0].candidates if c.candidate == "g1_ngram").acceptance_spread
    options = ServerOptions(
        log_path=tmp_path / "server.log",
        served_model=flags.args[flags.args.index("--served-model-name") + 1],
        run_dir=tmp_path / "run",
        env=flags.env,
        startup_timeout_s=420.0,
    )
    engine = VllmEngine(env=engine_env)
    workload = load_workload("builtin:repetition", name="repetition")
    spec = ScenarioSpec(
        scenario="again",
        warmup=1,
        sampling=SamplingParams(max_tokens=32, temperature=0.0, seed=0, return_token_ids=True),
        cache_salt_policy=CacheSaltPolicy.SALT,
    )
    # The hand-off says `vllm serve ...`: run it as a user who put the engine environment's bin/ first on PATH.
    assert flags.program[0] == "vllm"

    def argv(port: int) -> list[str]:
        program, *rest = flags.argv(port=port)
        return [str(engine_env.python.parent / program), *rest]

    with ServerProcess(argv, options) as server:
        endpoint = Endpoint(base_url=server.base_url, model=server.served_model)
        before: list[MetricsSnapshot] = []
        # The server's own counters over the measured requests (the warm-up aside, as the recorded spread is).
        result = asyncio.run(
            run_load(endpoint, workload.items, spec, before_measured=lambda: before.append(engine.snapshot(server)))
        )
        counters = engine.spec_counters(before[0], engine.snapshot(server), server.served_model)
    assert all(r.ok for r in result.records)
    assert counters.per_position_accepted is not None and counters.drafts
    rates = [n / counters.drafts for n in counters.per_position_accepted]
    assert acceptance_problems("repetition-c1", spread, rates) == [], (rates, spread)


def _check(recorded: RunLayout, tmp_path: Path, *args: str) -> tuple[int, str, CheckReport]:
    out = tmp_path / "check"
    done = specselect("check", str(recorded.root), "--out", str(out), *args, cwd=tmp_path)
    return done.returncode, done.stderr, load_document(out / "check.json", CheckReport)


def test_check_passes_on_the_unchanged_setup(recorded: RunLayout, tmp_path: Path) -> None:
    # One round (--rounds 1) where the recorded run measured two: two server starts instead of four. More rounds
    # go through the runner's own round loop (tests/unit/test_runner_rounds.py; on real vLLM the e2e default run).
    # One round's interval has no launch term, so its speedup is shown and not judged: here in CI one unchanged
    # setup read 2.66x [2.42, 2.92] recorded and 2.07x [1.80, 2.33] again (2026-12-02).
    code, stderr, report = _check(recorded, tmp_path, "--rounds", "1")
    assert code == 0, stderr[-3000:]
    assert report.ok and report.candidate == "g1_ngram" and report.stopped_early is None
    (row,) = report.scenarios
    assert row.speedup is not None and row.parity == row.recorded_parity and not row.speedup_judged
    assert "check of g1_ngram: 2 server starts (1 round, " in stderr  # the cost, before any server started
    assert "the speedup is shown, not judged" in stderr
    for group in ("g0_target_only", "g1_ngram"):
        measured = load_document(RunLayout(tmp_path / "check").group_summary(group), GroupResult)
        assert measured.run_status.value == "completed" and measured.relaunches == ()


def test_check_fails_naming_a_changed_proposal_length(recorded: RunLayout, tmp_path: Path) -> None:
    changed = _plan(tmp_path / "k2.toml", k=2)
    assert load_plan(changed).plan.candidates[0].num_speculative_tokens == 2
    code, stderr, report = _check(recorded, tmp_path, "--plan", str(changed))
    assert code == 6, stderr[-3000:]
    assert "proposal: num_speculative_tokens changed: 4 recorded, 2 now" in stderr
    assert "acceptance: repetition-c1: 2 draft positions now, 4 recorded" in stderr
    assert report.stopped_early is not None and "baseline was not started" in report.stopped_early


def test_check_fails_naming_a_swapped_draft(recorded: RunLayout, tmp_path: Path) -> None:
    swapped = _plan(tmp_path / "draft.toml", draft="builtin:smollm2-135m-draft4l")
    code, stderr, report = _check(recorded, tmp_path, "--plan", str(swapped), "--candidate", "g2_draft")
    assert code == 6, stderr[-3000:]
    lines = [p.line() for p in report.problems]
    assert any(line.startswith("identity: proposer snapshot changed: ") for line in lines), lines
    assert any(line.startswith("acceptance: repetition-c1: position 0 dropped: ") for line in lines), lines
    assert report.stopped_early is not None
