"""The README's main job: `specselect run` with no plan runs builtin:cpu-smoke on the bundled CPU model.

Checks the outcome the project promises for the embedded default (issue "runner" and "evidence"):
n-gram wins on the repetition workload with confidence and parity, and clearly more there than on real chat
prompts (a seeded sample of AlpacaEval); MTP/EAGLE-3/DFlash/DSpark are refused by admission; suffix needs
arctic-inference.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import EvidenceFile, GroupResult, Manifest
from specselect.artifacts.store import load_document
from specselect.core.decision import SpeedupInterval
from specselect.evidence.pipeline.result import ScenarioEvidence

pytestmark = pytest.mark.e2e

BUDGET_S = 600.0


def test_default_plan_end_to_end(tmp_path: Path) -> None:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "specselect.cli.main", "run", "--label", "default", "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    elapsed = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-4000:]
    print(done.stdout)
    print(f"default plan wall time: {elapsed:.0f} s")
    layout = RunLayout(tmp_path / "default")
    manifest = load_document(layout.manifest, Manifest)
    assert manifest.status == "complete"
    status = {g.name: (g.run_status.value, g.reason) for g in manifest.groups}
    later: dict[str, list[tuple[int, str, int]]] = {}
    for name in ("g0_target_only", "g1_ngram"):
        group = load_document(layout.group_summary(name), GroupResult)
        assert status[name][0] == "completed", f"{name}: {group.reason}: {group.hint}\n{group.log_tail}"
        later[name] = [(r.index, r.run_status.value, len(r.scenarios)) for r in group.relaunches]
    # Each group's second server launch measured both workloads again; a pair still open after two launches
    # (`max_launches = 3`) got a third launch of n-gram and of its baseline, unless the manifest says that round
    # would have overrun the plan's time budget (`sequential_budget_s`).
    assert later["g0_target_only"] == later["g1_ngram"]
    assert later["g1_ngram"] in ([(1, "completed", 2)], [(1, "completed", 2), (2, "completed", 2)])
    launches = tuple(range(1 + len(later["g1_ngram"])))
    for name in ("g2_mtp", "g3_eagle3", "g4_dflash", "g5_dspark"):
        assert status[name][0] in {"asset_missing", "unsupported", "incompatible"}, status[name]
    assert status["g7_suffix"] == ("unsupported", "suffix_needs_arctic_inference")
    for name in ("g2_mtp", "g3_eagle3", "g4_dflash", "g5_dspark", "g7_suffix"):
        assert load_document(layout.group_summary(name), GroupResult).launch is None  # no server was started

    evidence = load_document(layout.evidence, EvidenceFile)
    by = {(e.candidate, e.scenario): e for e in evidence.entries}
    rep = by[("g1_ngram", "repetition-c1")]
    assert rep.evidence.evidence_status.value == "comparable"
    assert rep.parity is not None
    assert rep.parity.verdict.value == "pass"
    assert rep.evidence.throughput_speedup is not None
    assert rep.evidence.throughput_speedup >= 1.5
    assert rep.telemetry is not None
    assert rep.telemetry.source in {"prometheus", "both"}
    assert (rep.telemetry.acceptance_rate or 0) > 0
    # THE speedup pools both launches of both sides, and its interval counts how much the launches differ.
    assert rep.speedup is not None and rep.speedup.launch_variance_included
    assert rep.speedup.launches_baseline == rep.speedup.launches_candidate == launches
    assert evidence.sequential is not None
    assert (evidence.sequential.n_continuing == 0) is (manifest.sequential_stop is None), manifest.sequential_stop
    assert {step.pair for step in evidence.sequential.steps} == {"g1_ngram/general-c1", "g1_ngram/repetition-c1"}
    assert rep.evidence.throughput_speedup == pytest.approx(rep.speedup.point)
    # The baseline against its own second launch: the A/A noise floor of each scenario.
    floors = {(n.track, n.scenario): n.floor for n in evidence.noise_floors}
    assert set(floors) == {("g0_target_only", "general-c1"), ("g0_target_only", "repetition-c1")}
    interval = rep.decision.confidence.interval
    assert interval is not None
    latency = {"max_ttft_regression_ratio", "max_e2e_p95_regression_ratio"}
    if floors[("g0_target_only", "repetition-c1")].verdict == "pass":
        _quiet_machine_decisions(by, interval, latency)
    else:
        _noisy_machine_decision(rep, interval, floors[("g0_target_only", "repetition-c1")].band_high, latency)
    summary = json.loads(layout.handoff.read_text())
    _handoff_answers(summary, accepted=rep.decision.decision.value == "accept")
    assert elapsed < BUDGET_S, f"default plan took {elapsed:.0f} s (budget {BUDGET_S:.0f} s: 10 minutes)"


def _quiet_machine_decisions(
    by: dict[tuple[str, str], ScenarioEvidence], interval: SpeedupInterval, latency: set[str]
) -> None:
    """What the default plan decides when the baseline's two launches agree (its A/A check passes)."""
    rep = by[("g1_ngram", "repetition-c1")]
    # The gain clears the 1.10 bar with confidence. Whether it is accepted depends on TTFT too: on this machine
    # (2026-12-01) n-gram's prefill took 10-16 % longer than the baseline's, over the 1.10 limit, so both
    # back-to-back runs said tune (ttft_regression); on the machine of the first runs it was 1.01x and accepted.
    assert interval.low > 1.10
    assert rep.decision.checks["min_throughput_speedup"] is True
    assert rep.decision.decision.value == "accept" or set(rep.decision.failed_checks) <= latency, rep.decision
    assert rep.decision.checks["outside_noise_floor"] is True
    # n-gram gains far more on text that copies its prompt than on chat, where answers repeat a phrase of the
    # question now and then (points 0.85-1.28x on the 8 AlpacaEval prompts against 1.65-2.46x on repetition in six
    # runs, 2026-12-01/02), and the chat gain is never accepted, so the repetition gain is never the answer for
    # general traffic (contract s6; `_handoff_answers` checks the hand-off leaves n-gram off there). Whether the
    # two intervals are disjoint depends on the launches: a CI run (2026-12-02) had chat at 0.87x [0.43, 1.76]
    # against repetition's low of 1.62, its chat baseline launches far apart.
    gen = by[("g1_ngram", "general-c1")]
    assert gen.evidence.throughput_speedup is not None and rep.evidence.throughput_speedup is not None
    assert gen.evidence.throughput_speedup < interval.low, (gen.evidence.throughput_speedup, interval)
    assert gen.decision.decision.value != "accept", gen.decision


def _handoff_answers(summary: dict[str, Any], *, accepted: bool) -> None:
    assert summary["scenarios"][1]["recommended"] == ("g1_ngram" if accepted else None)
    assert len(summary["noise_floors"]) == 2 and summary["launches"] == 2
    mix = summary["mix"]
    # One answer for the plan's mix (70% general, 30% repetition): n-gram on the repetition traffic only, with the
    # expected speedup of the whole mix and its interval -- exactly when repetition's gain was accepted.
    ngram = next(o for o in mix["options"] if o["candidate"] == "g1_ngram")
    enabled = [(s["workload"], s["enabled"]) for s in ngram["segments"]]
    assert ngram["on_segments"] is None or ngram["on_segments"]["low"] <= ngram["on_segments"]["point"]
    if accepted:
        assert mix["recommended"] == "g1_ngram", mix["recommendation"]
        assert enabled == [("general", False), ("repetition", True)]
        assert 1.0 < ngram["on_segments"]["low"] <= ngram["on_segments"]["point"] <= ngram["on_segments"]["high"]
        assert mix["serve"]["speculative"]["method"] == "ngram"
    else:
        assert mix["recommended"] is None and mix["recommendation"].startswith("keep the target-only baseline")
        assert enabled == [("general", False), ("repetition", False)]


def _noisy_machine_decision(
    rep: ScenarioEvidence, interval: SpeedupInterval, band_high: float | None, latency: set[str]
) -> None:
    """What the default plan decides when the baseline's two launches disagree (its A/A check fails)."""
    # The machine changed under the baseline between its launches (a CI run here, 2026-12-01: its second
    # launch decoded repetition at 22 tok/s against 36 in its first, at 4 % foreign CPU): an accept needs the
    # gain's interval above the A/A band -- refused at 3.11x [1.19, 8.11] against a band up to 1.81 in that
    # run, accepted at a low of 1.81 against a narrow failing band in another.
    assert band_high is not None
    clears = interval.low > band_high
    assert rep.decision.checks["outside_noise_floor"] is clears, (rep.decision, band_high)
    if clears:
        assert rep.decision.decision.value == "accept" or set(rep.decision.failed_checks) <= latency
    else:
        assert rep.decision.decision.value != "accept", rep.decision
        assert set(rep.decision.failed_checks) <= latency | {"outside_noise_floor"}, rep.decision
