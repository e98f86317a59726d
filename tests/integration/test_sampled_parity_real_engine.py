"""Selection at temperature > 0 on the real CPU vLLM: the distribution test against planted faults.

The plan leaves the sampling parameters out of the requests (`[sampling] in_request = false`), so each server's
generation defaults decide them, as in a deployment whose clients send none: every server is started with
`--override-generation-config` at temperature 0.7 and top-p 1.0, and two candidates are misconfigured by their own
engine arguments -- a later `--override-generation-config` that serves at temperature 1.0, or at top-p 0.8. That is
the real engine sampling at the wrong settings, not a fake.

What the engine does (found by this test, reported, not tuned away): vLLM 0.32.0's CPU build verifies draft
positions with the temperature and top-p of uninitialised memory -- its C++ stand-in for Triton's expand kernel
writes into an int64 copy of the float output, so `expand_batch_to_tokens` returns `new_empty` (reproduced in
docs/statistics.md). The honest n-gram candidate therefore fails the test too (its outputs more diverse, less
likely under the target, acceptance near 0). So the planted faults are shown on top of that: each differs from the
honest candidate in the direction planted (hotter: more distinct bigrams still; top-p 0.8: fewer).

Reduced to what CI can afford: one round (four server starts), 8 chat prompts (a seeded AlpacaEval sample, where
a 135M model's outputs at temperature 0.7 vary), 16 outputs of 24 tokens per prompt and side.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reduced_plan import cpu_plan_head, specselect

from specselect._artifacts.layout import RunLayout
from specselect._artifacts.store import load_document
from specselect.records.group import GroupResult
from specselect.records.results import EvidenceFile

pytestmark = pytest.mark.integration


def _override(settings: dict[str, float]) -> str:
    return json.dumps(["--override-generation-config", json.dumps(settings)])[1:-1]


def _ngram(name: str, served: dict[str, float] | None = None) -> str:
    """An n-gram candidate; `served`: the sampling its own `--override-generation-config` plants."""
    extra = f"engine_args = [{_override(served)}]\n" if served else ""
    return f"""
[[candidates]]
name = "{name}"
family = "ngram"
method = "ngram"
num_speculative_tokens = 5
options = {{ prompt_lookup_min = 3, prompt_lookup_max = 5 }}
{extra}"""


SAMPLING = """temperature = 0.7
top_p = 1.0
in_request = false
parity_prompts = 8
parity_samples = 16
"""

PLAN = (
    cpu_plan_head("sampled-faults", max_tokens=24)
    .replace(
        'args = ["--enforce-eager"]', f'args = ["--enforce-eager", {_override({"temperature": 0.7, "top_p": 1.0})}]'
    )
    .replace("temperature = 0.0\n", SAMPLING)
    + """
[run]
concurrency = [1]
warmup_requests = 1
repeats = 1
rounds = 1
prefix_cache = "salt"

[workloads]
general = { source = "builtin:alpacaeval", items = 8, seed = 0 }

"""
    + _ngram("g1_ngram")
    + _ngram("g2_ngram_hot", {"temperature": 1.0, "top_p": 1.0})
    + _ngram("g3_ngram_top_p", {"temperature": 0.7, "top_p": 0.8})
)


def test_a_candidate_served_at_another_temperature_or_top_p_is_rejected_as_a_distribution_mismatch(
    tmp_path: Path,
) -> None:
    assert PLAN.count("temperature = 0.7\n") == 1 and "--override-generation-config" in PLAN
    (tmp_path / "plan.toml").write_text(PLAN)
    done = specselect("run", "plan.toml", "--results-dir", "results", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    layout = RunLayout(tmp_path / "results" / "sampled-faults")
    evidence = load_document(layout.evidence, EvidenceFile)
    by_candidate = {e.candidate: e for e in evidence.entries}
    assert evidence.policy.distribution_test is not None and evidence.policy.distribution_test.alpha == 0.05

    for faulty in ("g2_ngram_hot", "g3_ngram_top_p"):
        entry = by_candidate[faulty]
        assert entry.sampled_parity is not None and entry.parity is None
        assert entry.sampled_parity.verdict == "fail", entry.sampled_parity
        assert entry.evidence.quality_check == "output_distribution"
        drafted = entry.telemetry is not None and bool(entry.telemetry.drafts)
        if drafted:
            assert (entry.decision.decision.value, entry.decision.reason) == ("reject", "distribution_mismatch")
        else:
            # n-gram found nothing to propose in the timed requests (it happens at T 1.0 on chat prompts: few
            # repeated n-grams in 24 tokens): no mechanism observed, so the evidence is incomplete -- the failed
            # distribution test is still in it, for a person to read.
            assert (entry.decision.decision.value, entry.decision.reason) == ("tune", "incomplete_evidence")
            assert "observed_speculative_proposals" in entry.evidence.missing_evidence

    honest = by_candidate["g1_ngram"]
    test = honest.sampled_parity
    assert test is not None and test.verdict in ("pass", "fail")
    assert test.samples_per_side == (128, 128) and len(test.prompts) == 8
    shown = "; ".join(f"{s.name} {s.observed} adj. p {s.adjusted_p_value}" for s in test.statistics)
    print(f"n-gram at T 0.7: {test.verdict}; {shown}")
    assert honest.telemetry is not None and honest.telemetry.acceptance_rate is not None

    def distinct(name: str) -> float:
        test = by_candidate[name].sampled_parity
        assert test is not None
        return next(s.observed for s in test.statistics if s.name == "distinct_bigrams")

    # The planted faults move the outputs the planted way relative to the honest candidate on the same engine.
    assert distinct("g2_ngram_hot") > distinct("g1_ngram") > distinct("g3_ngram_top_p")

    # What a person needs to check it: every sample with its own seed and logprobs, in the records the pass saved.
    group = load_document(layout.group_summary("g1_ngram"), GroupResult)
    (pass_run,) = group.parity_passes
    assert pass_run.status == "completed" and pass_run.n_ok == 128 and pass_run.n_with_logprobs == 128
    records = [json.loads(line) for line in (layout.root / pass_run.records_path).read_text().splitlines()]
    seeds = {r["seed"] for r in records}
    assert len(seeds) == len(records)  # one seed per request
    assert all(r["output_token_ids"] for r in records)
