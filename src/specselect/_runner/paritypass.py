"""The untimed parity pass: when it runs, for which groups, and the policy written into evidence.json.

At temperature 0 it reruns divergent items with top-2 logprobs so each divergence is classified; above 0 it
draws the distribution test's samples: `parity_samples` outputs of each of the first `parity_prompts` items,
every one with its own seed, on the baseline and every candidate alike.
"""

from __future__ import annotations

from specselect._evidence.pipeline import PARITY_PASS_RULE
from specselect._plan import LoadedPlan
from specselect._runner.scenario import PARITY_LOGPROBS
from specselect.records.evidence.result import ParityPassPolicy
from specselect.records.evidence.sampled_parity import SampledParityPolicy

__all__ = ["baseline_parity_pass", "distribution_test", "parity_pass_enabled", "parity_policy"]


def parity_pass_enabled(loaded: LoadedPlan) -> bool:
    """The logprob parity pass runs when the plan does not turn it off and some scenarios decode greedily."""
    plan = loaded.plan
    return plan.run.parity_pass != "off" and plan.sampling.greedy


def baseline_parity_pass(loaded: LoadedPlan) -> bool:
    """Baselines run the pass over every item only with parity_pass = 'full'; 'auto' leaves divergences to the
    candidates' own passes, which cost nothing when every output matches."""
    return parity_pass_enabled(loaded) and loaded.plan.run.parity_pass == "full"


def distribution_test(loaded: LoadedPlan) -> SampledParityPolicy | None:
    """The distribution test's policy for the scenarios above temperature 0 (its level the plan's confidence
    level's complement); None when every scenario is at temperature 0."""
    plan = loaded.plan
    if not plan.sampling.sampled:
        return None
    return SampledParityPolicy(alpha=round(1.0 - plan.thresholds.confidence_level, 6))


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
