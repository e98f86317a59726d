"""`specselect run builtin:cpu-sweep` on the real CPU vLLM: n-gram at proposal lengths 1, 3 and 5, each at
concurrency 1 and 2, runs to the end; the 4-layer draft model loses at concurrency 1 and is stopped early; the
sweep analysis, the hand-off advice and the report's speedup-vs-length and speedup-vs-concurrency plots are all
there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import specselect

from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import EvidenceFile, Handoff, Manifest
from specselect.artifacts.store import load_document
from specselect.artifacts.verify import verify_run

pytestmark = pytest.mark.integration

SUBS = ["g1_ngram.k1", "g1_ngram.k3", "g1_ngram.k5"]
DRAFT = "g2_draft_model"


def test_cpu_sweep_over_length_and_concurrency(tmp_path: Path) -> None:
    done = specselect("run", "builtin:cpu-sweep", "--results-dir", "results", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    layout = RunLayout(tmp_path / summary["results_dir"])  # relative to the run's working directory

    manifest = load_document(layout.manifest, Manifest)
    assert manifest.status == "complete"
    assert [g.name for g in manifest.groups] == ["g0_target_only", *SUBS, DRAFT]
    assert all(g.run_status.value == "completed" for g in manifest.groups)
    assert manifest.budget is not None and manifest.budget.servers == len(SUBS) + 1  # stated after the baseline

    evidence = load_document(layout.evidence, EvidenceFile)
    scenarios = {(e.candidate, e.scenario) for e in evidence.entries}
    assert scenarios == {(s, f"repetition-c{c}") for s in [*SUBS, DRAFT] for c in (1, 2)}
    sweeps = evidence.sweeps
    assert sweeps is not None
    # One crossover per n-gram sub-candidate over both levels, one length choice per scenario over the lengths.
    crossovers = {c.candidate: c for c in sweeps.crossovers}
    assert sorted(crossovers) == sorted([*SUBS, DRAFT])
    assert all(crossovers[s].levels == (1, 2) for s in SUBS)
    # The draft model is clearly slower at concurrency 1: concurrency 2 is skipped and it is never enabled.
    assert [(s.group, s.scenario) for s in sweeps.early_stops] == [(DRAFT, "repetition-c2")]
    assert sweeps.early_stops[0].reason.startswith(f"clearly_losing: {DRAFT} on repetition at concurrency 1")
    assert (crossovers[DRAFT].status, crossovers[DRAFT].recommendation) == ("never_pays", "do not enable")
    skipped = next(e for e in evidence.entries if (e.candidate, e.scenario) == (DRAFT, "repetition-c2"))
    assert skipped.decision.decision.value == "not_evaluated"
    assert sorted((s.sweep, s.choice.workload, s.choice.concurrency) for s in sweeps.lengths) == [
        ("g1_ngram", "repetition", 1),
        ("g1_ngram", "repetition", 2),
    ]
    for s in sweeps.lengths:
        assert [row.length for row in s.choice.per_length] == [1, 3, 5]
        # On copy-heavy prompts longer proposals win: whatever the verdict, a length is recommended.
        assert s.choice.recommended_length in (1, 3, 5), s.choice.reason
    assert {(g.group, g.scenario) for g in sweeps.goodput} >= {("g0_target_only", "repetition-c1")}

    handoff = load_document(layout.handoff, Handoff)
    assert len(handoff.concurrency_limits) == len(SUBS) + 1 and len(handoff.proposal_lengths) == 2

    html = (layout.root / "report.html").read_text()
    assert "Speedup vs proposal length" in html and "Speedup vs concurrency" in html
    assert 'id="sweeps"' in html
    report = verify_run(layout.root)
    assert report.ok, report.problems
