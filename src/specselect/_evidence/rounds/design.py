"""The experiment's design, fixed before the first server starts: which groups launch in which order in every
round, and at which rounds the evidence is looked at with how much of the error budget.

A round launches every active group of a track once: the baseline, then its candidates in plan order. Odd
rounds run the even rounds' order reversed (ABBA): a candidate that ran after its baseline in one round runs
before it in the next, so a drift that is linear in time adds to one round's ratio what it takes from the
next one's and cancels in their mean, and a candidate's launch is as far from its baseline's in every round.
With one candidate every launch sits next to the baseline launch it is paired with, and adjacent launches
share most of their noise on this host (docs/statistics.md); candidate k of K sits k launches away, which
docs/statistics.md prices. The baseline leads round 0 because a candidate's first launch reads the baseline's
records of that round (the parity pass over divergent items, the early stop of a concurrency sweep, a derived
schedule).

The looks are fixed in advance (`LookSchedule`): the rule may stop a pair only at a look, and the error budget
of an accept, one-sided alpha = (1 - confidence level) / 2, is spent over the looks in proportion to the rounds
each adds (alpha x rounds / last look's rounds, a linear spending function). An accept at any look is a false
one at most sum(alpha_k) = alpha of the time, whatever the looks' correlation (the union bound), so the plan's
confidence level keeps its meaning with any number of looks.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["DESIGN_RULE", "TrackRound", "block_order", "round_order"]

DESIGN_RULE = (
    "per round, each track's baseline then its candidates in plan order; odd rounds run the order reversed "
    "(ABBA), so linear drift cancels over a pair of rounds; candidate launch j is paired with its baseline's "
    "launch j"
)


class TrackRound(BaseModel):
    """The groups of one track that launch in a round: its baseline and the members paired with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    baseline: str
    members: tuple[str, ...] = ()
    """Candidates (and A/A controls) in plan order."""


def block_order(track: TrackRound) -> tuple[str, ...]:
    """One track's launches in an even round: the baseline, then its members."""
    return (track.baseline, *track.members)


def round_order(
    tracks: Sequence[TrackRound], index: int, *, reverse_first: bool = False, keep_empty: bool = False
) -> tuple[str, ...]:
    """The launch order of round `index` (0-based): each track's block in plan order, every odd round (or every
    even one, with `reverse_first`) reversed. A track with no member launches nothing unless `keep_empty`."""
    order = tuple(name for track in tracks if track.members or keep_empty for name in block_order(track))
    return tuple(reversed(order)) if (index % 2 == 1) != reverse_first else order
