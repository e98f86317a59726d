"""The rules the evidence pipeline applies, as the text it writes into `EvidencePolicy` (the types it fills in are
in `records.evidence.result`)."""

from __future__ import annotations

__all__ = ["AA_CONTROL_RULE", "CONTAMINATION_RULE", "MISSING_UNCONTAMINATED", "PARITY_PASS_RULE", "RULE", "TRACK_RULE"]

RULE = (
    "contract s5: evidence not comparable/incomplete -> not_evaluated; incomplete -> tune; quality (exact output "
    "parity at temperature 0) failed -> reject; throughput_speedup >= min AND ttft_ratio (p95) <= max AND "
    "e2e_p95_ratio <= max AND peak memory <= budget -> accept, else tune; the speedup is the paired-round "
    "estimate (exp of the mean per-round log ratio) and an accept needs its interval's low >= the minimum "
    "(insufficient_confidence) with launch variation in it (no_launch_replication: one round); the mean TTFT and "
    "mean E2E ratios, paired by round, with intervals at the plan's level at every look, must not lie clearly "
    "above their limits (interval low > limit: "
    "ttft_mean_regression, e2e_mean_regression) and, with latency_gate = shown_within, must lie within them "
    "(insufficient_latency_confidence); a lossy candidate (allow_lossy: its verification is not exact, so its "
    "outputs are not the target's) is judged on quality by the distribution test alone, and at temperature 0, "
    "where there is none, its pair is incomplete (missing quality_ok: tune)"
)

TRACK_RULE = (
    "contract s6: each candidate is paired with the target-only baseline of its own target (its track); raw "
    "throughput and latency are compared only within a track, across tracks only within-pair ratios"
)
PARITY_PASS_RULE = (
    "untimed pass (one request per item, concurrency 1, top-2 logprobs) by every candidate over the items whose "
    "timed output differs from the baseline's, and with parity_pass = 'full' also by the baseline over every "
    "item; a first divergence where the target's top-2 logprobs differ by less than the threshold is a near_tie "
    "(numerics: parity inconclusive, not failed), else a real_difference; a divergence in the timed records is "
    "judged with the baseline pass's logprobs when it ran, else the candidate pass's (both run the target on the "
    "same prefix up to it), where that pass produced the same tokens up to the divergence"
)
CONTAMINATION_RULE = (
    "endpoints specselect does not own: /metrics is scraped around an idle gap before and after each scenario; "
    "request/token counters moving while specselect sends nothing, or more finished requests than sent, mark "
    "the scenario contaminated; servers specselect starts: other processes taking more than "
    "thresholds.max_host_foreign_cpu_share of all CPU time during a scenario mark it contaminated (see "
    "measure.hostload); servers on GPUs: a process other than the server's and specselect's on one of its "
    "devices (NVML, read before and during the scenario) marks it contaminated; a proposer whose cache of the "
    "server's responses had answered a measured prompt before the pass (a learning suffix cache replayed by the "
    "warm-up, a repeat or an earlier scenario: records.responsecache) marks it contaminated too; a contaminated "
    "launch's round is left out of that scenario's pairs (named in the "
    "estimate's excluded_rounds); a pair with no round left is incomplete (missing uncontaminated_measurement; "
    "decision tune, reason incomplete_evidence: measure again while nothing else uses the endpoint or the machine)"
)
MISSING_UNCONTAMINATED = "uncontaminated_measurement"
AA_CONTROL_RULE = (
    "A/A control: the baseline's own configuration, launched next to the baseline in every round, is paired with "
    "it like a candidate and decided by the plan's thresholds as if it proposed (execution path and mechanism "
    "taken as speculative); identical servers must not be accepted, and their interval should contain 1.0 at its "
    "level; their round variances join the run's pool (more degrees of freedom for every pair)"
)
