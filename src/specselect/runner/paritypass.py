"""The untimed logprob parity pass: when it runs, for which groups, and the policy written into evidence.json."""

from __future__ import annotations

from specselect.evidence.pipeline import PARITY_PASS_RULE, ParityPassPolicy
from specselect.plan import LoadedPlan
from specselect.runner.scenario import PARITY_LOGPROBS

__all__ = ["baseline_parity_pass", "parity_pass_enabled", "parity_policy"]


def parity_pass_enabled(loaded: LoadedPlan) -> bool:
    """The logprob parity pass runs when the plan does not turn it off and decoding is greedy."""
    plan = loaded.plan
    return plan.run.parity_pass != "off" and plan.sampling.temperature == 0


def baseline_parity_pass(loaded: LoadedPlan) -> bool:
    """Baselines run the pass over every item only with parity_pass = 'full'; 'auto' leaves divergences to the
    candidates' own passes, which cost nothing when every output matches."""
    return parity_pass_enabled(loaded) and loaded.plan.run.parity_pass == "full"


def parity_policy(loaded: LoadedPlan) -> ParityPassPolicy:
    """The parity pass's policy as written into evidence.json."""
    plan = loaded.plan
    return ParityPassPolicy(
        mode=plan.run.parity_pass,
        ran=parity_pass_enabled(loaded),
        baseline_pass=baseline_parity_pass(loaded),
        logprobs=PARITY_LOGPROBS,
        near_tie_threshold_nats=plan.thresholds.near_tie_threshold_nats,
        rule=PARITY_PASS_RULE,
    )
