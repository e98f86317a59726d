"""`specselect run` end to end on the real CPU vLLM (the shared recorded run): baseline + n-gram + the target as its
own draft + a candidate refused at admission + a candidate that fails at launch. Checks every artifact and
status, then `--resume` keeps completed groups."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from _reduced_plan import RecordedRun, specselect

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document, load_records
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.results import EvidenceFile, Manifest, PreflightFile

pytestmark = pytest.mark.integration


def _engine_processes(root: Path) -> list[psutil.Process]:
    """vLLM servers started for this test's run (their cwd is a work dir under `root`)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "vllm.entrypoints.cli.main" in cmd and str(root) in (proc.info.get("cwd") or ""):
            found.append(proc)
    return found


def test_recorded_plan_end_to_end(recorded_run: RecordedRun) -> None:
    done, tmp_path = recorded_run.done, recorded_run.cwd
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    layout = RunLayout(recorded_run.root)

    manifest = load_document(layout.manifest, Manifest)
    assert manifest.status == "complete"
    assert [g.name for g in manifest.groups] == ["g0_target_only", "g1_ngram", "g2_draft", "g3_eagle3", "g9_broken"]
    status = {g.name: g.run_status.value for g in manifest.groups}
    assert status == {
        "g0_target_only": "completed",
        "g1_ngram": "completed",
        "g2_draft": "completed",
        "g3_eagle3": "asset_missing",
        "g9_broken": "failed",
    }
    assert summary["verdicts"]
    for rel, digest in manifest.files.items():
        assert (layout.root / rel).exists(), rel
        assert len(digest) == 64

    pre = load_document(layout.preflight, PreflightFile)
    assert pre.engine is not None and pre.engine.engine_version.startswith("0.32.0")
    assert pre.target.snapshot and pre.workloads["repetition"].item_count == 8

    broken = load_document(layout.group_summary("g9_broken"), GroupResult)
    assert broken.reason == "server_start_failed"
    assert broken.log_tail and "kv" in broken.log_tail.lower()
    assert broken.release is not None and broken.release.port_free and broken.release.processes_gone
    refused = load_document(layout.group_summary("g3_eagle3"), GroupResult)
    assert refused.launch is None and refused.reason == "proposer_not_given"

    ngram = load_document(layout.group_summary("g1_ngram"), GroupResult)
    scen = ngram.scenarios[0]
    assert scen.telemetry is not None and (scen.telemetry.accepted_tokens or 0) > 0
    assert scen.telemetry.source == "both" and scen.telemetry.cross_check and scen.telemetry.cross_check.agree
    records = load_records(layout, "g1_ngram", "repetition-c1")
    assert len([r for r in records if not r.warmup]) == 8 and all(r.ok for r in records)
    assert all(r.output_token_ids for r in records)

    evidence = load_document(layout.evidence, EvidenceFile)
    entry = next(e for e in evidence.entries if e.candidate == "g1_ngram")
    assert entry.evidence.evidence_status.value == "comparable"
    assert entry.parity is not None and entry.parity.verdict.value == "pass"
    assert evidence.policy.parity_unit == "tokens"
    handoff = load_document(layout.handoff, Handoff)
    assert [c.candidate for c in handoff.scenarios[0].candidates] == ["g1_ngram", "g2_draft"]
    assert not _engine_processes(tmp_path)

    # --resume keeps every completed group (nothing to redo: failures are final unless interrupted).
    again = specselect("run", "plan.toml", "--results-dir", "results", "--resume", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "kept from the earlier run" not in again.stdout
    manifest2 = load_document(layout.manifest, Manifest)
    assert manifest2.created_at == manifest.created_at
    assert load_document(layout.group_summary("g1_ngram"), GroupResult).finished_at == ngram.finished_at

    # An existing label without --resume is refused with exit 2.
    refused_run = specselect("run", "plan.toml", "--results-dir", "results", cwd=tmp_path)
    assert refused_run.returncode == 2
    assert "--resume" in refused_run.stderr and "Traceback" not in refused_run.stderr
