"""The distribution test's error rates: false alarms on identical laws and power against planted faults.

Every simulated run draws outputs from `specselect._evidence.sampling_model.SyntheticModel` (a bigram target with
a known law, served plainly or speculatively) for both sides and judges them with the project's own test,
`specselect._evidence.sampled_parity.sampled_parity`, at its default policy (999 label permutations, Westfall-Young
min-p over the statistics at a family-wise 5 %).

Cases at a baseline temperature of 0.7, top-p 1.0:
- null: the target alone on both sides (A/A), and lossless speculative decoding (3 draft tokens, rejection
  sampling) against the target alone: every fail is a false alarm;
- faults: the candidate samples at temperature 1.0; at top-p 0.8; with greedy verification (3 draft tokens).
The targets' entropy is varied (logit scale 2, 3, 4.5), since a low-entropy target leaves little to compare.

Targets (issue 27): false alarms <= 5 % on identical laws, and power >= 90 % against each planted fault, at the
sample size the built-in plan uses (8 prompts, 16 outputs per prompt and side). A cell's false-alarm rate over 500
runs has a binomial standard deviation of about one point, so the target is on the rate pooled over the null cells
at that size (A/A and lossless, every entropy: 3,000 runs); the worst single cell is shown next to it.

    .venv/bin/python benchmarks/bench_sampled_parity.py [--runs 400] [--write-results benchmarks/RESULTS.md]
(pure computation: no server, no lock).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from _common import Report, RunClock, TargetCheck, add_results_arguments, publish
from specselect._evidence.sampled_parity import PromptSamples, sampled_parity
from specselect._evidence.sampling_model import SamplerSettings, SyntheticModel
from specselect.records.evidence.sampled_parity import SampledParity

TITLE = "Sampled-output parity: the distribution test's false alarms and power"
BASE = SamplerSettings(temperature=0.7)
CASES: dict[str, SamplerSettings] = {
    "A/A (null)": BASE,
    "lossless speculative (null)": SamplerSettings(temperature=0.7, verification="lossless"),
    "candidate at T 1.0": SamplerSettings(temperature=1.0, verification="lossless"),
    "candidate at top-p 0.8": SamplerSettings(temperature=0.7, top_p=0.8, verification="lossless"),
    "greedy verification": SamplerSettings(temperature=0.7, verification="greedy_verification"),
}
NULL_CASES = ("A/A (null)", "lossless speculative (null)")
SCALES = (2.0, 3.0, 4.5)
PLAN_SIZE = (8, 16)
"""(prompts, outputs per prompt and side) of the built-in plan."""
SIZES = ((8, 8), PLAN_SIZE, (4, 16))


@dataclass(frozen=True)
class CellResult:
    fail_rate: float
    fired: Counter[str]
    """How often each statistic's adjusted p-value was at or below alpha."""


def _one_run(model: SyntheticModel, candidate: SamplerSettings, size: tuple[int, int], seed: int) -> SampledParity:
    prompts, per_side = size
    rng = np.random.default_rng(seed)
    samples = {
        f"p{prompt}": PromptSamples(
            baseline=model.sample(prompt, BASE, per_side, rng),
            candidate=model.sample(prompt, candidate, per_side, rng),
        )
        for prompt in range(1, prompts + 1)
    }
    return sampled_parity(samples)


def run_cell(scale: float, case: str, size: tuple[int, int], runs: int, seed: int) -> CellResult:
    model = SyntheticModel(scale=scale, seed=seed)
    fails, fired = 0, Counter[str]()
    for run in range(runs):
        result = _one_run(model, CASES[case], size, seed * 1_000_003 + run)
        fails += result.verdict == "fail"
        fired.update(s.name for s in result.statistics if s.adjusted_p_value <= result.policy.alpha)
    return CellResult(fails / runs, fired)


def _pct(value: float) -> str:
    return f"{value:.1%}"


def error_rows(runs: int, seed: int) -> tuple[list[list[str]], dict[tuple[float, str, tuple[int, int]], CellResult]]:
    rows, found = [], {}
    for scale in SCALES:
        model = SyntheticModel(scale=scale, seed=seed)
        entropy = f"{model.entropy(0.7):.2f}"
        for size in SIZES:
            cells = {case: run_cell(scale, case, size, runs, seed) for case in CASES}
            found.update({(scale, case, size): cell for case, cell in cells.items()})
            rows.append([f"{scale:g}", entropy, f"{size[0]} x {size[1]}", *(_pct(c.fail_rate) for c in cells.values())])
    return rows, found


def fired_rows(found: dict[tuple[float, str, tuple[int, int]], CellResult]) -> list[list[str]]:
    rows = []
    for (scale, case, size), cell in found.items():
        if size != PLAN_SIZE or case in NULL_CASES:
            continue
        total = max(sum(cell.fired.values()), 1)
        shares = ", ".join(f"{name} {count / total:.0%}" for name, count in cell.fired.most_common())
        rows.append([f"{scale:g}", case, _pct(cell.fail_rate), shares or "-"])
    return rows


def targets(found: dict[tuple[float, str, tuple[int, int]], CellResult]) -> list[TargetCheck]:
    at_plan = {key: cell for key, cell in found.items() if key[2] == PLAN_SIZE}
    nulls = [cell.fail_rate for (_, case, _), cell in at_plan.items() if case in NULL_CASES]
    pooled = sum(nulls) / len(nulls)
    faults = [case for case in CASES if case not in NULL_CASES]
    checks = [
        TargetCheck(
            target="sampled parity: false alarms <= 5% on identical laws (A/A and lossless, every entropy, pooled), "
            f"{PLAN_SIZE[0]} prompts x {PLAN_SIZE[1]} outputs",
            result=f"{_pct(pooled)} (cells {_pct(min(nulls))}-{_pct(max(nulls))})",
            met=pooled <= 0.05,
        )
    ]
    for case in faults:
        worst = min(cell.fail_rate for (_, c, _), cell in at_plan.items() if c == case)
        checks.append(
            TargetCheck(
                target=f"sampled parity: power >= 90% against {case}, every entropy",
                result=_pct(worst),
                met=worst >= 0.90,
            )
        )
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated runs per cell")
    parser.add_argument("--seed", type=int, default=0)
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    clock, t0 = RunClock.start(), time.monotonic()
    report = Report()
    rows, found = error_rows(args.runs, args.seed)
    report.table(
        "1. fail rate by case (nulls: false alarms; faults: power)",
        ("logit scale", "entropy at T 0.7 (nats)", "prompts x outputs", *CASES),
        rows,
        (
            "Entropy: the target's mean next-token entropy at temperature 0.7. Faults are candidates that serve "
            "speculatively; the baseline samples at T 0.7, top-p 1.0.",
        ),
    )
    report.table(
        f"2. which statistics caught the faults ({PLAN_SIZE[0]} prompts x {PLAN_SIZE[1]} outputs)",
        ("logit scale", "fault", "caught", "statistics at or below alpha (share of firings)"),
        fired_rows(found),
    )
    checks = targets(found)
    report.text(
        f"{args.runs} simulated runs per cell (seed {args.seed}), {time.monotonic() - t0:.0f} s. Targets: "
        + "; ".join(f"{t.target}: {t.result} ({'met' if t.met else 'MISSED'})" for t in checks)
        + "."
    )
    if args.write_results:
        record = clock.record(
            "bench_sampled_parity",
            TITLE,
            engine_version=None,
            model=None,
            model_snapshot=None,
            configuration=(
                f"**Simulation:** {args.runs} runs per cell, seed {args.seed}; a 48-token bigram target of "
                "`specselect._evidence.sampling_model` (32 tokens per output), the test of "
                "`specselect._evidence.sampled_parity` at its default policy.",
            ),
            targets=tuple(checks),
        )
        publish(Path(args.write_results), record, report)
    return 0 if all(t.met is not False for t in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
