"""The A/A noise floor: the baseline measured against independent launches of itself.

Speedup: THE speedup of the second set of launches over the first (`replicated_speedup`); on A/A data the
interval must contain 1.0 -- when it does not, the launches are not exchangeable (drift, a warm machine) or the
interval leaves launch variation out. Spread: s = max(|log low|, |log high|) of that interval: identical servers
land within exp(+-s) of each other, so `core.decision` refuses an accept whose gain does not clear exp(s).
Parity: do launches of the same server agree token for token? Every launch is compared with the first, key by
key; at concurrency 1 the repeats inside one launch always agree, so only this shows the numerics' noise floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.core.decision import NoiseFloor, SpeedupInterval, clears_noise_floor
from specselect.evidence.parity import Output, ParityVerdict, compare_outputs
from specselect.evidence.replication.twostage import ReplicatedEstimate, ReplicationPolicy, replicated_speedup
from specselect.evidence.samples import RequestKey, RequestSample
from specselect.evidence.stats import BootstrapPolicy

__all__ = [
    "AA_RULE",
    "NOISE_FLOOR_SCHEMA_VERSION",
    "AANoiseFloor",
    "AAVerdict",
    "LaunchAgreement",
    "NoiseFloorCheck",
    "aa_noise_floor",
    "check_noise_floor",
    "launch_agreement",
    "pool_launch_outputs",
]

NOISE_FLOOR_SCHEMA_VERSION = 1
AAVerdict = Literal["pass", "fail", "not_assessed"]

AA_RULE = (
    "A/A: THE speedup of the baseline's second set of launches over its first; pass when its interval contains "
    "1.0 and every launch's outputs equal the first launch's token for token; spread = max(|log low|, |log high|) "
    "of that interval; a candidate's gain must clear exp(spread) (its interval low, or its point without one)"
)


class LaunchAgreement(BaseModel):
    """Whether launches of one server produced the same outputs, key by key (item_id, repeat)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_launches: int
    n_compared: int
    """(key, later launch) comparisons with the first launch's output for that key."""
    n_equal: int
    match_share: float | None
    n_not_comparable: int
    """Keys present in both but not comparable (a failed request, tokens vs text)."""
    unit: Literal["token", "character", "mixed"] | None
    verdict: ParityVerdict
    reason: str
    differing: tuple[RequestKey, ...] = ()
    inconsistent_items: tuple[str, ...] = ()


def launch_agreement(per_launch: Sequence[Mapping[RequestKey, Output]]) -> LaunchAgreement:
    """Compare every launch's outputs with the first launch's for the same (item_id, repeat)."""
    first = per_launch[0] if per_launch else {}
    compared = equal = not_comparable = 0
    units: set[str] = set()
    differing: set[RequestKey] = set()
    for later in per_launch[1:]:
        for key in sorted(first.keys() & later.keys()):
            parity = compare_outputs(first[key], later[key])
            if parity is None:
                not_comparable += 1
                continue
            compared += 1
            units.add(parity.unit)
            equal += parity.equal
            if not parity.equal:
                differing.add(key)
    if compared == 0:
        verdict, reason = ParityVerdict.NOT_ASSESSED, "no_comparable_launches"
    elif differing:
        verdict, reason = ParityVerdict.FAIL, "launches_disagree"
    else:
        verdict, reason = ParityVerdict.PASS, "launches_agree"
    unit: Literal["token", "character", "mixed"] | None = None
    if units:
        unit = "token" if units == {"token"} else "character" if units == {"character"} else "mixed"
    return LaunchAgreement(
        n_launches=len(per_launch),
        n_compared=compared,
        n_equal=equal,
        match_share=equal / compared if compared else None,
        n_not_comparable=not_comparable,
        unit=unit,
        verdict=verdict,
        reason=reason,
        differing=tuple(sorted(differing)),
        inconsistent_items=tuple(sorted({item for item, _ in differing})),
    )


def pool_launch_outputs(
    per_launch: Sequence[Mapping[RequestKey, Output]], *, repeats_per_launch: int | None = None
) -> dict[RequestKey, Output]:
    """All launches' outputs in one mapping: repeat r of launch j becomes repeat j * R + r.

    R is `repeats_per_launch` (default: the largest repeat + 1 seen). Pooling the baseline's launches and the
    candidate's with the SAME R lets `parity.scenario_parity` pair launch j with launch j and count the other
    launches as more baseline repeats, so its noise floor includes launch-to-launch disagreement.
    """
    seen = 1 + max((repeat for outputs in per_launch for _, repeat in outputs), default=0)
    width = seen if repeats_per_launch is None else repeats_per_launch
    if width < seen:
        raise ValueError(f"repeats_per_launch {width} is below a repeat seen ({seen - 1}); pass at least {seen}")
    return {
        (item, j * width + repeat): out
        for j, outputs in enumerate(per_launch)
        for (item, repeat), out in outputs.items()
    }


class AANoiseFloor(BaseModel):
    """The baseline against itself: the speedup noise floor and the parity noise floor of one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = NOISE_FLOOR_SCHEMA_VERSION
    speedup: ReplicatedEstimate
    contains_one: bool | None
    spread_log: float | None
    band_low: float | None
    band_high: float | None
    parity: LaunchAgreement | None
    verdict: AAVerdict
    reason: str
    rule: str = AA_RULE

    def noise_floor(self) -> NoiseFloor | None:
        """The band for `core.decision.decide`; None without an A/A interval."""
        if self.spread_log is None:
            return None
        return NoiseFloor(spread_log=self.spread_log, level=self.speedup.level, method=self.speedup.method)


def _verdict(contains_one: bool | None, parity: LaunchAgreement | None) -> tuple[AAVerdict, str]:
    if contains_one is None:
        return "not_assessed", "aa_no_interval"
    if not contains_one:
        return "fail", "aa_interval_excludes_one"
    if parity is not None and parity.verdict is ParityVerdict.FAIL:
        return "fail", "aa_outputs_differ"
    if parity is None or parity.verdict is ParityVerdict.NOT_ASSESSED:
        return "pass", "aa_speedup_consistent_parity_not_assessed"
    return "pass", "aa_consistent"


def aa_noise_floor(
    first: Sequence[RequestSample],
    second: Sequence[RequestSample],
    *,
    outputs: Sequence[Mapping[RequestKey, Output]] | None = None,
    policy: BootstrapPolicy | None = None,
    replication: ReplicationPolicy | None = None,
) -> AANoiseFloor:
    """The A/A noise floor from two sets of launches of the same server; `outputs`: each launch's outputs."""
    speedup = replicated_speedup(first, second, policy, replication)
    parity = launch_agreement(outputs) if outputs is not None else None
    low, high = speedup.low, speedup.high
    contains_one = None if low is None or high is None else low <= 1.0 <= high
    spread = None if low is None or high is None else max(abs(math.log(low)), abs(math.log(high)))
    verdict, reason = _verdict(contains_one, parity)
    return AANoiseFloor(
        speedup=speedup,
        contains_one=contains_one,
        spread_log=spread,
        band_low=None if spread is None else math.exp(-spread),
        band_high=None if spread is None else math.exp(spread),
        parity=parity,
        verdict=verdict,
        reason=reason,
    )


class NoiseFloorCheck(BaseModel):
    """A candidate's speedup against the A/A band, with the stable reason `decide` uses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outside: bool
    reason: Literal["outside_noise_floor", "within_noise_floor"]
    compared: Literal["interval_low", "point"]
    value: float
    band_high: float


def check_noise_floor(candidate: ReplicatedEstimate, floor: NoiseFloor) -> NoiseFloorCheck | None:
    """Is the candidate's gain outside the A/A spread? Its interval low, else its point; None without a point."""
    if candidate.point is None:
        return None
    interval: SpeedupInterval | None = candidate.speedup_interval()
    outside = clears_noise_floor(candidate.point, interval, floor)
    return NoiseFloorCheck(
        outside=outside,
        reason="outside_noise_floor" if outside else "within_noise_floor",
        compared="point" if interval is None else "interval_low",
        value=candidate.point if interval is None else interval.low,
        band_high=floor.band_high,
    )
