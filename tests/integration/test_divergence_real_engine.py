"""Output divergence on the real engine: a candidate whose server changes greedy outputs goes through the logprob
parity pass end to end, which classifies every first divergence as a near tie or a real difference from the
baseline's own top-2 logprobs, and the decision follows from it.

What changes the outputs: n-gram speculation on a server whose default generation config carries a repetition
penalty (`--override-generation-config`, a setting that ships with many checkpoints' generation_config.json and
that every request which does not name it inherits). It changes outputs on every CPU. bfloat16 in eager mode,
the first choice, changes outputs under n-gram's batched verification only on CPUs with AVX-512: on an AVX2
machine (CI, 2026-12-02) bfloat16 gave the baseline's outputs token for token, with and without chunked prefill.
float32 with the baseline's own settings never diverges here, so this is the only place the path runs for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import copy_code_item, copy_list_item, cpu_plan_head, specselect, write_workload

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect.records.group import GroupResult
from specselect.records.results import EvidenceFile

pytestmark = pytest.mark.integration

NEAR_TIE_NATS = 0.1

PLAN = (
    cpu_plan_head("divergence", max_tokens=32)
    + f"""
[run]
concurrency = [1]
warmup_requests = 1
# One pass: what diverges is each item's greedy output, the same in every pass.
repeats = 1
rounds = 1  # parity, not speed: one server per group
request_timeout_s = 300.0
parity_pass = "full"

[workloads]
mixed = "mixed.jsonl"

[thresholds]
near_tie_threshold_nats = {NEAR_TIE_NATS}
max_host_foreign_cpu_share = 1.0    # the test is about parity, not the host-load guard

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 4
options = {{ prompt_lookup_min = 2, prompt_lookup_max = 4 }}
engine_args = ["--override-generation-config", '{{"repetition_penalty": 1.3}}']
"""
)

PROSE = (
    "Explain in a few sentences why the sky is blue.",
    "Describe how a hash table works and when it is a poor choice.",
)


def test_divergences_are_classified_from_logprobs_and_decide_the_candidate(tmp_path: Path) -> None:
    items = [
        copy_list_item(),
        copy_code_item("for i in range(10):\n    print(i, i * i, i ** 3)\n" * 3),
        *({"id": f"prose-{n}", "messages": [{"role": "user", "content": text}]} for n, text in enumerate(PROSE)),
    ]
    write_workload(tmp_path / "mixed.jsonl", items)
    (tmp_path / "plan.toml").write_text(PLAN)
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    layout = RunLayout(tmp_path / "results" / "divergence")
    evidence = load_document(layout.evidence, EvidenceFile)
    candidate = load_document(layout.group_summary("g1_ngram"), GroupResult)
    baseline = load_document(layout.group_summary("g0_target_only"), GroupResult)

    # Both logprob passes ran: the baseline over every item, the candidate over the items that diverged.
    (base_pass,) = baseline.parity_passes
    (cand_pass,) = candidate.parity_passes
    assert base_pass.status == "completed" and base_pass.n_with_logprobs == len(items)
    entry = next(e for e in evidence.entries if e.candidate == "g1_ngram")
    parity = entry.parity
    assert parity is not None and parity.unit == "token"
    assert parity.divergences, f"the penalised server gave identical outputs: {json.dumps(done.stdout)[:300]}"
    assert cand_pass.status == "completed" and cand_pass.items is not None
    assert {d.item_id for d in parity.divergences} <= set(cand_pass.items)

    for d in parity.divergences:
        # Judged with the baseline pass's logprobs at the first differing token, against the plan's threshold.
        assert d.logprob_source == "baseline" and d.logprob_gap_nats is not None, d
        expected = "near_tie" if d.logprob_gap_nats < NEAR_TIE_NATS else "real_difference"
        assert d.classification == expected, d
    real = [d for d in parity.divergences if d.attribution == "unexplained"]
    if real:
        assert (parity.verdict.value, entry.decision.decision.value) == ("fail", "reject")
        assert entry.decision.reason == "quality_failed"
    else:
        assert parity.verdict.value == "inconclusive" and entry.decision.decision.value != "accept"
