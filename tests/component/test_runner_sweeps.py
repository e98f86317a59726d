"""A concurrency sweep end to end against stub endpoints (kind "openai"): crossover, early stop, goodput, budget,
hand-off advice and the report's sweep section. Real-engine sweeps: tests/integration/test_sweep_real_engine.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from specselect._artifacts.store import load_document
from specselect._artifacts.verify import verify_run
from specselect._engines.openai.engine import AttachedServer, OpenAIEndpointEngine
from specselect._report.write import write_reports
from specselect._runner.progress import SilentProgress
from specselect._runner.run import RunOptions, run_plan
from specselect.records.handoff import Handoff
from specselect.records.results import EvidenceFile, Manifest
from specselect.records.server import SanityResult

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.stubs is test support, not in the package
from tests.stubs.openai_stub import StubBehavior, StubServer

PLAN = """
schema_version = 1
label = "sweep"
[target]
model = "stub-model"
[engine]
kind = "openai"
[sampling]
max_tokens = 8
[run]
repeats = 2
warmup_requests = 1
concurrency = [1, 2]
parity_pass = "auto"
EARLY
[thresholds]
# The stubs' TTFT p95 over 16 requests is the slowest one or two: a busy host's scheduling jitter alone moved it
# 1.5x (the sweep, not the TTFT check, is under test here).
max_ttft_regression_ratio = 3.0
slo_ttft_ms = 500.0
slo_tpot_ms = 50.0
[workloads]
general = "builtin:general"
[[candidates]]
name = "g0_target_only"
endpoint = { base_url = "BASE", model = "stub-model", peak_memory_mb = 900.0 }
[[candidates]]
name = "g1_ngram"
family = "ngram"
endpoint = { base_url = "CAND/v1", model = "stub-model", peak_memory_mb = 900.0 }
"""


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cand: StubBehavior,
    *,
    early_stop: bool = True,
    sampling: str = "[sampling]\n",
) -> Any:
    # The stub streams only; the real engine's non-streaming sanity request is covered by the integration tests.
    def sanity(self: OpenAIEndpointEngine, server: AttachedServer) -> SanityResult:
        return SanityResult(model_ids=(server.served_model,), api="chat", reply_text="hi", seconds=0.0)

    monkeypatch.setattr(OpenAIEndpointEngine, "sanity", sanity)
    base_behavior = StubBehavior(ttft_s=0.01, chunk_delay_s=0.02, output_tokens=8)
    with StubServer(base_behavior) as base, StubServer(cand) as served:
        text = PLAN.replace("BASE", base.base_url).replace("CAND", served.base_url)
        text = text.replace("EARLY", "" if early_stop else "early_stop = false").replace("[sampling]\n", sampling)
        (tmp_path / "plan.toml").write_text(text)
        out = run_plan(RunOptions(plan_ref=str(tmp_path / "plan.toml"), results_dir=tmp_path / "res"), SilentProgress())
    return out


def test_a_clearly_losing_candidate_skips_its_higher_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = StubBehavior(ttft_s=0.01, chunk_delay_s=0.06, output_tokens=8)  # 3x slower per token
    out = _run(tmp_path, monkeypatch, slow)
    cand = out.groups[1]
    assert [(s.scenario, s.status) for s in cand.scenarios] == [("general-c1", "completed"), ("general-c2", "skipped")]
    skipped = cand.scenarios[1]
    assert skipped.early_stop is not None and skipped.early_stop.startswith("clearly_losing: g1_ngram on general")
    evidence = load_document(out.layout.evidence, EvidenceFile)
    entry_c2 = next(e for e in evidence.entries if e.scenario == "general-c2")
    assert entry_c2.decision.decision.value == "not_evaluated"
    sweeps = evidence.sweeps
    assert sweeps is not None
    assert [(s.group, s.scenario) for s in sweeps.early_stops] == [("g1_ngram", "general-c2")]
    (crossover,) = sweeps.crossovers
    assert (crossover.candidate, crossover.status, crossover.pays_up_to) == ("g1_ngram", "never_pays", None)
    assert crossover.recommendation == "do not enable"
    handoff = load_document(out.layout.handoff, Handoff)
    (limit,) = handoff.concurrency_limits
    assert limit.recommendation == "do not enable" and limit.engine_setting is None
    assert verify_run(out.layout.root).ok


def test_a_paying_candidate_is_measured_at_every_level_with_goodput_and_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = StubBehavior(ttft_s=0.01, chunk_delay_s=0.02, tokens_per_chunk=4, output_tokens=8, spec_metrics=True)
    out = _run(tmp_path, monkeypatch, fast)
    assert [s.status for s in out.groups[1].scenarios] == ["completed", "completed"]
    sweeps = out.evidence.sweeps
    assert sweeps is not None and sweeps.early_stops == ()
    (crossover,) = sweeps.crossovers
    assert crossover.levels == (1, 2) and crossover.status == "pays_at_all_levels"
    assert crossover.recommendation.startswith("no cut-off needed")
    # Goodput for both groups at both levels: every request meets TTFT <= 500 ms and TPOT <= 50 ms here.
    assert sorted((g.group, g.scenario) for g in sweeps.goodput) == [
        ("g0_target_only", "general-c1"),
        ("g0_target_only", "general-c2"),
        ("g1_ngram", "general-c1"),
        ("g1_ngram", "general-c2"),
    ]
    assert all(g.goodput.share_met == 1.0 and g.goodput.goodput_rps for g in sweeps.goodput)
    manifest = load_document(out.layout.manifest, Manifest)
    assert manifest.budget is not None and manifest.budget.servers == 0  # endpoints: nothing to start
    # The candidate's two rounds and the baseline's second: every round's scenarios, named by launch.
    assert [s.name for s in manifest.budget.per_scenario] == [
        "g1_ngram/general-c1/round1",
        "g1_ngram/general-c2/round1",
        "g1_ngram/general-c1/round2",
        "g1_ngram/general-c2/round2",
        "g0_target_only/general-c1/round2",
        "g0_target_only/general-c2/round2",
    ]
    html, md = write_reports(out.layout.root)
    markdown = md.read_text()
    assert "## Sweeps" in markdown and "no cut-off needed" in markdown and "Goodput under the SLOs" in markdown
    assert 'id="sweeps"' in html.read_text()
    assert verify_run(out.layout.root).ok


def test_early_stop_off_measures_every_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = StubBehavior(ttft_s=0.01, chunk_delay_s=0.06, output_tokens=8)
    out = _run(tmp_path, monkeypatch, slow, early_stop=False)
    assert [s.status for s in out.groups[1].scenarios] == ["completed", "completed"]
    (crossover,) = out.evidence.sweeps.crossovers
    assert crossover.status == "never_pays" and crossover.levels == (1, 2)


def test_each_temperature_is_a_sweep_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = StubBehavior(ttft_s=0.01, chunk_delay_s=0.02, tokens_per_chunk=4, output_tokens=8, spec_metrics=True)
    sampling = "[sampling]\ntemperature = [0, 0.7]\nparity_prompts = 2\nparity_samples = 2\n"
    out = _run(tmp_path, monkeypatch, fast, sampling=sampling)
    assert [(s.scenario, s.status) for s in out.groups[1].scenarios] == [
        ("general-c1", "completed"),
        ("general-c2", "completed"),
        ("general-c1-t0.7", "completed"),
        ("general-c2-t0.7", "completed"),
    ]
    sweeps = out.evidence.sweeps
    assert sweeps is not None
    assert [(c.temperature, c.levels, c.status) for c in sweeps.crossovers] == [
        (0.0, (1, 2), "pays_at_all_levels"),
        (0.7, (1, 2), "pays_at_all_levels"),
    ]
    handoff = load_document(out.layout.handoff, Handoff)
    assert [(c.workload, c.temperature) for c in handoff.concurrency_limits] == [("general", 0.0), ("general", 0.7)]
    html, md = write_reports(out.layout.root)
    markdown = md.read_text()
    assert "### Speedup and acceptance vs temperature" in markdown and "| T 0.7: speedup |" in markdown
    assert "| g1_ngram | general at T 0.7 | 1, 2 |" in markdown
    assert "Speedup vs temperature · general-c1" in html.read_text()  # the plot: one line from T 0 to 0.7
    assert verify_run(out.layout.root).ok
