"""Paired rounds: the design every run follows and the one estimator every decision uses (pure).

- `design`: which groups launch in which order in every round, and the looks fixed in advance
- `table`: a pair's (round x item) table over the frozen items
- `estimate`: per-round log ratios, their variance (own or pooled over the run's pairs), the t interval
- `looks`: at a look, which pairs are settled and which candidates run the next rounds
- `drift`: whether a pair's per-round ratios move with time

docs/statistics.md describes the design, the estimands and their error rates.
"""
