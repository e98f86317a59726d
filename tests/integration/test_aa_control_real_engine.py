"""An A/A control on the real CPU vLLM: the baseline's own configuration launched next to it in every round
(`[run] aa_control`), served target-only under its own name, paired and judged like a candidate.

Reduced to what CI can afford: builtin:cpu-aa's target and engine, two rounds (four server starts) on the copy
task only, 16 tokens. What the control's interval says over more rounds -- it holds 1.0 at its level -- is the
calibration bench's question (RESULTS.md section 7) and a full builtin:cpu-aa run's (the issue note); here: it runs,
it is never accepted, its outputs equal the baseline's, and its rounds join the run's pool.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _reduced_plan import specselect

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect._plan.loader import builtin_plan_text
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import EvidenceFile, Manifest

pytestmark = pytest.mark.integration

CONTROL = "g0_target_only.aa"


def test_an_aa_control_runs_as_the_baseline_and_is_judged_like_a_candidate(tmp_path: Path) -> None:
    text = builtin_plan_text("cpu-aa")
    edits = {
        "rounds = 4 ": "rounds = 2 ",
        "max_tokens = 32": "max_tokens = 16",
        'general = { source = "builtin:alpacaeval", items = 8, seed = 0 }\n': "",
    }
    for old, new in edits.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / "aa.toml").write_text(text)
    done = specselect("run", "aa.toml", "--results-dir", "results", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    layout = RunLayout(tmp_path / "results" / "cpu-aa")
    manifest = load_document(layout.manifest, Manifest)
    assert [(g.name, g.role, g.run_status.value) for g in manifest.groups] == [
        ("g0_target_only", "baseline", "completed"),
        (CONTROL, "control", "completed"),
    ]
    control = load_document(layout.group_summary(CONTROL), GroupResult)
    assert control.execution_path == "target_only" and control.family == "target_only"
    assert control.launch is not None and control.launch.speculative_config is None
    assert "--speculative-config" not in control.launch.command
    assert len(control.relaunches) == 1  # round 2

    evidence = load_document(layout.evidence, EvidenceFile)
    assert evidence.entries == () and evidence.verdicts == {}
    (entry,) = evidence.controls
    assert entry.scenario == "repetition-c1" and entry.speedup is not None and entry.speedup.rounds == (0, 1)
    assert entry.parity is not None and entry.parity.verdict.value == "pass"  # identical servers, identical outputs
    assert entry.decision.decision.value != "accept", entry.decision
    (pool,) = [p for p in evidence.pools if p.metric == "throughput"]
    assert pool.members == (f"{CONTROL}/repetition-c1",)
    handoff = load_document(layout.handoff, Handoff)
    assert [(c.control, c.decision) for c in handoff.controls] == [(CONTROL, entry.decision.decision.value)]
