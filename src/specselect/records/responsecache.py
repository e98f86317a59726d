"""A proposer's cache of the server's earlier responses, and what it held when each measured pass began.

Suffix decoding (vLLM's `suffix`) drafts from a tree of every response the server produced before, unless that
global tree is off. Replaying a prompt to the same server then drafts from the earlier answer to that very prompt:
acceptance rises (22% -> 94% on chat prompts in a trial) because of the measurement, not the deployment.
specselect's warm-up, repeats, later scenarios of a launch and `check` all replay prompts, so every measured pass
records the cache state it saw (`PassResponseCache`), and evidence leaves out a round whose pass drafted from
answers to its own prompts (`inflated`; `specselect._evidence.pipeline.sides.excluded_rounds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specselect.records.measurement import RequestRecord

__all__ = ["REPLAY_FIX", "REPLAY_MARK", "PassResponseCache", "ResponseCacheSetting"]

REPLAY_MARK = "acceptance inflated by replay"
"""Ends the reason a round was left out for (`PassResponseCache.reason`), so the closing lines give its own fix."""
REPLAY_FIX = (
    "measure the suffix candidate with its response cache off (drop suffix_decoding_max_cached_requests from its "
    "options: specselect then sets 0)"
)


class ResponseCacheSetting(BaseModel):
    """How a launched proposer caches the server's responses (set by the engine from the launch's configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: Literal["off", "learning"]
    """off: drafts come from the request's own prompt and output only; learning: also from earlier responses."""
    option: str
    """The engine's setting that decides it (vLLM: `suffix_decoding_max_cached_requests`)."""
    value: int
    stated_by: Literal["plan", "specselect"]
    """plan: the candidate's options set it; specselect: unset in the plan, so specselect turned the cache off."""


class PassResponseCache(BaseModel):
    """The response cache as one measured pass saw it: its setting and how much of the pass it had seen before."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    setting: ResponseCacheSetting
    earlier_requests: int = Field(ge=0)
    """Requests this server answered before the pass's measured requests (earlier passes, this pass's warm-up)."""
    replayed_requests: int = Field(ge=0)
    """Measured requests whose prompt this server had answered before: in an earlier pass, in the warm-up, or in an
    earlier repeat of this pass."""

    @property
    def inflated(self) -> bool:
        """The cache learned from answers to the prompts it was measured on: its acceptance is not a deployment's."""
        return self.setting.state == "learning" and self.replayed_requests > 0

    def reason(self, role: str, where: str) -> str:
        """Why an inflated pass's round is left out (`role` candidate or baseline, `where` its scenario and round)."""
        return (
            f"{role}: its response cache ({self.setting.option}={self.setting.value}) had answered "
            f"{self.replayed_requests} of the measured prompts before {where}: {REPLAY_MARK}"
        )

    @classmethod
    def of(
        cls, setting: ResponseCacheSetting, answered: Mapping[str, int], records: Iterable[RequestRecord]
    ) -> PassResponseCache:
        """The pass of `records` (warm-up and measured, as sent) on a server that had answered the items in
        `answered` (item id -> requests) before it."""
        records = list(records)
        seen = {item for item, count in answered.items() if count > 0}
        seen |= {r.item_id for r in records if r.warmup}
        first_repeat: dict[str, int] = {}
        for r in records:
            if not r.warmup:
                first_repeat[r.item_id] = min(r.repeat, first_repeat.get(r.item_id, r.repeat))
        replayed = sum(1 for r in records if not r.warmup and (r.item_id in seen or r.repeat > first_repeat[r.item_id]))
        earlier = sum(answered.values()) + sum(1 for r in records if r.warmup)
        return cls(setting=setting, earlier_requests=earlier, replayed_requests=replayed)
