"""Output parity at temperature > 0: do the candidate's sampled outputs follow the baseline's distribution?

Speculative decoding with rejection sampling is lossless: the target's distribution is unchanged, but no single
output has to match. So at T > 0 parity is a two-sample test per prompt, pooled over prompts. Each side draws
several outputs per prompt, every request with its own seed; under parity a prompt's outputs from both sides are
exchangeable, so the null distribution comes from permuting the side labels within each prompt (exact for any
sample size, no asymptotics). Every statistic is computed on the same permutations.

The statistics are chosen for the failures seen in practice:
- `token_frequencies`: at each of the first `positions` output positions, a chi-square distance between the
  sides' token counts (tokens seen fewer than `min_count` times in the prompt's pooled outputs share one cell, an
  ended output is a cell of its own); summed over positions and prompts. A changed temperature or top-p, or a
  proposal distribution leaking into the output, moves these frequencies.
- `distinct_bigrams`: per prompt, the share of distinct bigrams among each side's outputs; the candidate's minus
  the baseline's, summed over prompts. Greedy verification at T > 0 collapses diversity.
- `length`: per prompt, the difference of mean output lengths in the prompt's pooled standard deviations.
- `target_logprob`: per prompt, the difference of mean per-token log-probabilities of the outputs under the
  target (the engine's reported logprob of each sampled token), in the prompt's pooled standard deviations; used
  only when every output carries them. Sharper sampling (lower T, top-p) raises it, hotter sampling lowers it.
The signed statistics are summed with their signs before the absolute value, so a shift in one direction across
prompts adds up while noise cancels.

The family-wise error over the statistics is held at `alpha` by the Westfall-Young single-step min-p adjustment
over the same permutations: a statistic's adjusted p-value is the share of permutations whose smallest p-value
over all statistics is at most its own. The verdict fails when any adjusted p-value is at most `alpha`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specselect.records.evidence.sampled_parity import (
    SampledParity,
    SampledParityPolicy,
    StatisticName,
    StatisticResult,
)
from specselect.records.measurement import RequestRecord

__all__ = ["PromptSamples", "Sample", "sampled_parity", "samples_from_records"]

_Labels = npt.NDArray[np.float64]
_Values = npt.NDArray[np.float64]
_ROUND = 9
"""Statistics are compared after rounding: one label set summed in another order must tie with itself."""


@dataclass(frozen=True)
class Sample:
    """One sampled output: its token ids and, when the engine reported them, each token's target log-probability."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...] | None = None


@dataclass(frozen=True)
class PromptSamples:
    """One prompt's sampled outputs on each side."""

    baseline: tuple[Sample, ...]
    candidate: tuple[Sample, ...]


@dataclass(frozen=True)
class _Prompt:
    """One prompt's pooled outputs (baseline first) and the label rows: row 0 observed, then the permutations."""

    name: str
    samples: tuple[Sample, ...]
    labels: _Labels
    """1 = candidate; shape (1 + permutations, n)."""


def _label_rows(n_base: int, n_cand: int, permutations: int, rng: np.random.Generator) -> _Labels:
    observed = np.concatenate([np.zeros(n_base), np.ones(n_cand)])
    shuffled = rng.permuted(np.tile(observed, (permutations, 1)), axis=1)
    return np.vstack([observed, shuffled])


def _side_means(labels: _Labels, values: _Values) -> tuple[_Values, _Values]:
    n_cand = labels[0].sum()
    n_base = labels.shape[1] - n_cand
    cand = labels @ values / n_cand
    base = (1.0 - labels) @ values / n_base
    return cand, base


def _standardized_difference(labels: _Labels, values: _Values) -> _Values | None:
    spread = float(values.std())
    if spread == 0.0:
        return None
    cand, base = _side_means(labels, values)
    return (cand - base) / spread


def _chi_square(labels: _Labels, codes: Sequence[object], min_count: int) -> _Values | None:
    """The 2 x cells chi-square distance of one position; None when the pooled outputs have one cell only."""
    counts = Counter(codes)
    pooled = [code if counts[code] >= min_count else "rare" for code in codes]
    index = {cell: i for i, cell in enumerate(sorted(set(pooled), key=str))}
    if len(index) < 2:
        return None
    onehot = np.zeros((len(codes), len(index)))
    onehot[np.arange(len(codes)), [index[cell] for cell in pooled]] = 1.0
    total = labels.shape[1]
    n_cand = labels[0].sum()
    column = onehot.sum(axis=0)
    cand = labels @ onehot
    expected = n_cand * column / total
    scale = total**2 / (n_cand * (total - n_cand) * column)
    result: _Values = ((cand - expected) ** 2 * scale).sum(axis=1)
    return result


def _token_frequencies(prompt: _Prompt, policy: SampledParityPolicy) -> _Values | None:
    parts = []
    for position in range(policy.positions):
        codes = [s.tokens[position] if position < len(s.tokens) else "end" for s in prompt.samples]
        part = _chi_square(prompt.labels, codes, policy.min_count)
        if part is not None:
            parts.append(part)
    return np.sum(parts, axis=0) if parts else None


def _distinct_bigrams(prompt: _Prompt, _: SampledParityPolicy) -> _Values | None:
    bigram_sets = [set(zip(s.tokens, s.tokens[1:], strict=False)) for s in prompt.samples]
    universe = sorted(set().union(*bigram_sets))
    if not universe:
        return None
    index = {bigram: i for i, bigram in enumerate(universe)}
    present = np.zeros((len(prompt.samples), len(universe)))
    for row, bigrams in enumerate(bigram_sets):
        present[row, [index[b] for b in bigrams]] = 1.0
    totals = np.array([max(len(s.tokens) - 1, 0) for s in prompt.samples], dtype=float)
    labels = prompt.labels

    def share(side: _Labels) -> _Values:
        distinct = ((side @ present) > 0).sum(axis=1)
        return np.asarray(distinct / np.maximum(side @ totals, 1.0), dtype=float)

    return share(labels) - share(1.0 - labels)


def _length(prompt: _Prompt, _: SampledParityPolicy) -> _Values | None:
    values = np.array([len(s.tokens) for s in prompt.samples], dtype=float)
    return _standardized_difference(prompt.labels, values)


def _target_logprob(prompt: _Prompt, _: SampledParityPolicy) -> _Values | None:
    if any(s.logprobs is None or not s.logprobs for s in prompt.samples):
        return None
    values = np.array([float(np.mean(s.logprobs or ())) for s in prompt.samples])
    return _standardized_difference(prompt.labels, values)


_STATISTICS: tuple[tuple[StatisticName, Callable[[_Prompt, SampledParityPolicy], _Values | None], bool], ...] = (
    ("token_frequencies", _token_frequencies, False),
    ("distinct_bigrams", _distinct_bigrams, True),
    ("length", _length, True),
    ("target_logprob", _target_logprob, True),
)
"""(name, per-prompt term over the label rows, signed)."""


def _upper_p_values(values: _Values) -> _Values:
    """Each row's permutation p-value: the share of rows (itself and the observed included) at least as extreme."""
    ordered = np.sort(values)
    at_least = len(values) - np.searchsorted(ordered, values, side="left")
    return np.asarray(at_least / len(values), dtype=float)


def _prompts(samples: Mapping[str, PromptSamples], policy: SampledParityPolicy) -> list[_Prompt]:
    rng = np.random.default_rng(policy.seed)
    out = []
    for name in sorted(samples):
        pair = samples[name]
        if min(len(pair.baseline), len(pair.candidate)) < policy.min_samples:
            continue
        labels = _label_rows(len(pair.baseline), len(pair.candidate), policy.permutations, rng)
        out.append(_Prompt(name, pair.baseline + pair.candidate, labels))
    return out


@dataclass(frozen=True)
class _Computed:
    name: StatisticName
    signed: bool
    rows: _Values
    """The statistic on every label row (signed statistics before the absolute value)."""
    by_prompt: dict[str, float]


def _compute(prompts: Sequence[_Prompt], policy: SampledParityPolicy) -> list[_Computed]:
    out = []
    for name, term, signed in _STATISTICS:
        terms = {p.name: term(p, policy) for p in prompts}
        known = {k: v for k, v in terms.items() if v is not None}
        if known:
            rows = np.round(np.sum(list(known.values()), axis=0), _ROUND)
            out.append(_Computed(name, signed, rows, {k: round(float(v[0]), 6) for k, v in known.items()}))
    return out


def _results(computed: Sequence[_Computed]) -> list[StatisticResult]:
    extremes = np.column_stack([np.abs(c.rows) if c.signed else c.rows for c in computed])
    p_rows = np.column_stack([_upper_p_values(column) for column in extremes.T])
    min_p = p_rows.min(axis=1)
    out = []
    for k, c in enumerate(computed):
        observed = float(c.rows[0])
        direction = None
        if c.signed and observed != 0.0:
            direction = "candidate_higher" if observed > 0 else "candidate_lower"
        out.append(
            StatisticResult(
                name=c.name,
                observed=round(observed, 6),
                p_value=round(float(p_rows[0, k]), 6),
                adjusted_p_value=round(float(np.mean(min_p <= p_rows[0, k])), 6),
                direction=direction,
                by_prompt=c.by_prompt,
            )
        )
    return out


def _distinct(prompts: Sequence[_Prompt]) -> tuple[int, int]:
    base = cand = 0
    for p in prompts:
        observed = p.labels[0]
        base += len({s.tokens for s, label in zip(p.samples, observed, strict=True) if label == 0})
        cand += len({s.tokens for s, label in zip(p.samples, observed, strict=True) if label == 1})
    return base, cand


def sampled_parity(samples: Mapping[str, PromptSamples], policy: SampledParityPolicy | None = None) -> SampledParity:
    """Test whether the candidate's outputs follow the baseline's distribution, prompt by prompt, pooled.

    `samples` maps a prompt (item id) to both sides' outputs. Prompts with fewer than `min_samples` outputs on a
    side are left out; with none left, or no statistic that can vary, the verdict is `not_assessed`.
    """
    policy = policy or SampledParityPolicy()
    prompts = _prompts(samples, policy)
    if not prompts:
        reason = f"no prompt has {policy.min_samples} or more sampled outputs on each side"
        return SampledParity(verdict="not_assessed", reason=reason, policy=policy)
    sizes = (
        sum(int((p.labels[0] == 0).sum()) for p in prompts),
        sum(int(p.labels[0].sum()) for p in prompts),
    )
    common = {
        "policy": policy,
        "prompts": tuple(p.name for p in prompts),
        "samples_per_side": sizes,
        "distinct_outputs": _distinct(prompts),
    }
    computed = _compute(prompts, policy)
    if not computed:
        return SampledParity(verdict="not_assessed", reason="every output is empty", **common)
    results = tuple(_results(computed))
    failed = any(r.adjusted_p_value <= policy.alpha for r in results)
    return SampledParity(
        verdict="fail" if failed else "pass",
        reason="distribution_mismatch" if failed else None,
        statistics=results,
        **common,
    )


def _sample(record: RequestRecord) -> Sample | None:
    if not record.ok or record.warmup or record.output_token_ids is None:
        return None
    logprobs = [lp.logprob for lp in record.logprobs or ()]
    known = len(logprobs) == len(record.output_token_ids) and all(v is not None for v in logprobs)
    return Sample(tuple(record.output_token_ids), tuple(float(v or 0.0) for v in logprobs) if known else None)


def _by_item(records: Sequence[RequestRecord]) -> dict[str, tuple[Sample, ...]]:
    out: dict[str, list[Sample]] = {}
    for record in records:
        sample = _sample(record)
        if sample is not None:
            out.setdefault(record.item_id, []).append(sample)
    return {item: tuple(samples) for item, samples in out.items()}


def samples_from_records(
    baseline: Sequence[RequestRecord], candidate: Sequence[RequestRecord]
) -> dict[str, PromptSamples]:
    """Both sides' sampled outputs by item: completed measured requests with token ids (failed requests and
    warm-ups are no samples); a token's logprob is kept when the engine reported one for every token."""
    base, cand = _by_item(baseline), _by_item(candidate)
    return {item: PromptSamples(base[item], cand[item]) for item in sorted(base.keys() & cand.keys())}
