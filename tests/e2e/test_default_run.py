"""The README's main job: `specselect run` with no plan runs builtin:cpu-smoke on the bundled CPU model.

Checks the outcome the project promises for the embedded default (issue "runner" and "evidence"):
n-gram wins on the repetition workload with confidence and parity, not on general prose; the 4-layer draft
runs and loses; MTP/EAGLE-3/DFlash/DSpark are refused by admission; suffix needs arctic-inference.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import EvidenceFile, GroupResult, Manifest
from specselect.artifacts.store import load_document

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
    for name in ("g0_target_only", "g1_ngram", "g6_draft_model"):
        group = load_document(layout.group_summary(name), GroupResult)
        assert status[name][0] == "completed", f"{name}: {group.reason}: {group.hint}\n{group.log_tail}"
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
    assert rep.decision.decision.value == "accept"
    interval = rep.decision.confidence.interval
    assert interval is not None
    assert interval.low > 1.10
    # n-gram gains far more on text that copies its prompt than on free prose, where it is not accepted: its
    # speedup there is ~1.0 (0.98x-1.02x in clean runs; a run on a machine loaded by another server once measured
    # 1.15x, which is why groups must not share the machine with other work).
    gen = by[("g1_ngram", "general-c1")]
    assert gen.evidence.throughput_speedup is not None
    assert rep.evidence.throughput_speedup > 2 * gen.evidence.throughput_speedup
    assert gen.decision.decision.value != "accept", (gen.decision.reason, gen.decision.confidence)
    for scenario in ("general-c1", "repetition-c1"):
        draft = by[("g6_draft_model", scenario)]
        assert draft.evidence.evidence_status.value == "comparable"
        assert draft.evidence.throughput_speedup is not None
        assert draft.evidence.throughput_speedup < 1.0
    summary = json.loads(layout.handoff.read_text())
    assert summary["scenarios"][1]["recommended"] == "g1_ngram"
    assert elapsed < BUDGET_S, f"default plan took {elapsed:.0f} s (budget {BUDGET_S:.0f} s: 10 minutes)"
