"""The regression check's judgements: a configuration measured again against what its hand-off recorded.

Pure comparisons, one problem per difference: an identity that changed (engine version, snapshots, frozen
workload), a speculative-configuration key that changed, acceptance per draft position outside its recorded
spread, a speedup whose interval now lies entirely below the recorded one, a parity verdict that changed.
A brief re-measure has its own uncertainty, so the speedup fails only when the two intervals do not overlap, and
only when the interval measured now rests on at least `MIN_JUDGED_ROUNDS` paired rounds: one round's interval has
no launch-to-launch term, and two single launches of an unchanged n-gram setup here read 2.66x [2.42, 2.92] and
2.07x [1.80, 2.33] (CI, 2026-12-02) -- a "change" that was the launch. Acceptance at temperature 0 repeats itself
request for request on an unchanged setup, so its recorded interval (widened by `ACCEPTANCE_TOLERANCE`) is the bar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from specselect.records.evidence.acceptance import AcceptanceSpread

__all__ = [
    "ACCEPTANCE_TOLERANCE",
    "MIN_JUDGED_ROUNDS",
    "REGRESSION_RULE",
    "Problem",
    "ProblemKind",
    "SpeedupSpan",
    "acceptance_problems",
    "config_problems",
    "identity_problems",
    "parity_problem",
    "speedup_judged",
    "speedup_problem",
]

ACCEPTANCE_TOLERANCE = 0.02
"""Absolute slack around a recorded per-position interval (numerics may move a rate by a token or two)."""

MIN_JUDGED_ROUNDS = 2
"""Rounds below which the speedup measured now is shown but not judged (its interval lacks launch noise)."""

REGRESSION_RULE = (
    "identity: engine version, target and proposer snapshots, workload keys must equal the recorded ones; "
    "proposal: every key of the speculative configuration must equal the recorded value (paths aside: the "
    "proposer's snapshot says whether it is the same model); acceptance: per draft position the rate measured "
    f"now must lie inside the recorded interval widened by {ACCEPTANCE_TOLERANCE:g}, with as many positions; "
    "speedup: a problem when the interval measured now lies entirely below the recorded interval (high now < low "
    f"recorded), judged when the check measured at least {MIN_JUDGED_ROUNDS} rounds (fewer: shown, not "
    "judged) and a problem at any round count when no comparable speedup was measured; parity: the verdict must "
    "equal the recorded one"
)

ProblemKind = Literal["identity", "proposal", "acceptance", "speedup", "parity", "not_measured"]


class Problem(BaseModel):
    """One difference between the recorded configuration and the one measured now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ProblemKind
    scenario: str | None = None
    message: str

    def line(self) -> str:
        """`kind: scenario: message`, the check's one line per problem."""
        where = f"{self.scenario}: " if self.scenario else ""
        return f"{self.kind}: {where}{self.message}"


class SpeedupSpan(BaseModel):
    """A speedup point with its interval (bounds None when it has none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        if self.point is None:
            return "n/a"
        if self.low is None or self.high is None:
            return f"{self.point:.2f}x"
        return f"{self.point:.2f}x [{self.low:.2f}, {self.high:.2f}]"


def identity_problems(recorded: Mapping[str, str | None], now: Mapping[str, str | None]) -> list[Problem]:
    """One problem per named identity (engine version, snapshots, workload keys) that differs."""
    return [
        Problem(kind="identity", message=f"{name} changed: {recorded[name]} recorded, {now.get(name)} now")
        for name in recorded
        if recorded[name] != now.get(name)
    ]


def config_problems(
    recorded: Mapping[str, Any] | None, now: Mapping[str, Any] | None, *, ignore: Sequence[str] = ()
) -> list[Problem]:
    """One problem per speculative-configuration key whose value differs (keys in `ignore` are skipped)."""
    if recorded is None or now is None:
        if recorded == now:
            return []
        return [Problem(kind="proposal", message=f"speculation {'off' if now is None else 'on'} now, recorded not")]
    keys = [k for k in dict.fromkeys((*recorded, *now)) if k not in ignore]
    return [
        Problem(kind="proposal", message=f"{key} changed: {recorded.get(key)!r} recorded, {now.get(key)!r} now")
        for key in keys
        if recorded.get(key) != now.get(key)
    ]


def acceptance_problems(
    scenario: str, recorded: AcceptanceSpread | None, rates: Sequence[float] | None
) -> list[Problem]:
    """Per draft position, the rate measured now against the recorded spread."""
    if recorded is None:
        return []
    if rates is None:
        return [Problem(kind="acceptance", scenario=scenario, message="no acceptance exported now, recorded was")]
    if len(rates) != len(recorded.per_position):
        return [
            Problem(
                kind="acceptance",
                scenario=scenario,
                message=f"{len(rates)} draft positions now, {len(recorded.per_position)} recorded",
            )
        ]
    out: list[Problem] = []
    for spread, rate in zip(recorded.per_position, rates, strict=True):
        low = (spread.low if spread.low is not None else spread.rate) - ACCEPTANCE_TOLERANCE
        high = (spread.high if spread.high is not None else spread.rate) + ACCEPTANCE_TOLERANCE
        if not low <= rate <= high:
            moved = "dropped" if rate < low else "rose"
            shown = f"{spread.rate:.2f}" + (
                f" [{spread.low:.2f}, {spread.high:.2f}]" if spread.low is not None and spread.high is not None else ""
            )
            out.append(
                Problem(
                    kind="acceptance",
                    scenario=scenario,
                    message=f"position {spread.position} {moved}: {rate:.2f} now, recorded {shown}",
                )
            )
    return out


def speedup_judged(rounds: int) -> bool:
    """Whether a speedup measured over `rounds` paired rounds is judged against the recorded one."""
    return rounds >= MIN_JUDGED_ROUNDS


def speedup_problem(
    scenario: str, recorded: SpeedupSpan, now: SpeedupSpan, why: str = "", *, rounds: int = MIN_JUDGED_ROUNDS
) -> Problem | None:
    """A problem when the speedup measured now over `rounds` rounds lies entirely below the recorded interval
    (`why`: the evidence's own account when it has no speedup). Fewer rounds than `MIN_JUDGED_ROUNDS`: shown,
    never a problem, unless nothing comparable was measured at all."""
    if now.point is None:
        detail = f" ({why})" if why else ""
        return Problem(kind="speedup", scenario=scenario, message=f"no comparable speedup now{detail}")
    if not speedup_judged(rounds):
        return None
    floor = recorded.low if recorded.low is not None else recorded.point
    top = now.high if now.high is not None else now.point
    if floor is None or top >= floor:
        return None
    return Problem(kind="speedup", scenario=scenario, message=f"{now.text()} now, below the recorded {recorded.text()}")


def parity_problem(scenario: str, recorded: str | None, now: str | None, detail: str = "") -> Problem | None:
    """A problem when the parity verdict differs from the recorded one."""
    if recorded == now:
        return None
    extra = f" ({detail})" if detail else ""
    return Problem(kind="parity", scenario=scenario, message=f"{now} now, {recorded} recorded{extra}")
