"""SGLang's `/server_info` answer: the speculative facts specselect reads from it, and the snapshot type.

`/server_info` (formerly `/get_server_info`) merges the server arguments, scheduler info and the
schedulers' internal states. Only the speculative facts are kept: the raw answer includes the API key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect._engines.prometheus import MetricsSnapshot
from specselect.errors import ProtocolError

__all__ = ["ServerInfoReading", "ServerInfoSnapshot", "ServerInfoState", "parse_server_info"]

_ACCEPT_COUNT_KEYS = ("spec_total_num_accept_tokens", "spec_total_num_accepted_tokens", "cum_spec_accept_length")
_STEP_COUNT_KEYS = ("spec_total_num_forward_ct", "cum_spec_accept_count")
_CHAIN = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "FROZEN_KV_MTP", "DFLASH"})
"""Algorithms that verify one chain of proposed tokens per step when eagle_topk is 1."""


class ServerInfoState(BaseModel):
    """One scheduler's (data-parallel rank's) speculative state in `/server_info`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int
    avg_spec_accept_length: float | None
    """Server-cumulative, bonus token included; None before the first speculative step."""
    accept_tokens: int | None = None
    """Cumulative emitted tokens of verify steps (bonus included), when the version exposes it."""
    verify_steps: int | None = None
    """Cumulative verify steps per request, when the version exposes it."""


class ServerInfoReading(BaseModel):
    """The speculative facts of one `/server_info` answer (never the raw answer: it holds the API key)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    version: str | None = None
    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    decode_log_interval: int | None = None
    states: tuple[ServerInfoState, ...] = ()
    max_total_num_tokens: int | None = None
    """The KV pool's size in tokens (SGLang's own capacity figure)."""
    context_length: int | None = None
    page_size: int | None = None

    @property
    def proposals_per_step(self) -> int | None:
        """k, the proposed tokens each verify step checks, for chain drafting; None for trees or unknown."""
        if self.algorithm not in _CHAIN or self.eagle_topk not in (None, 1) or not self.num_draft_tokens:
            return None
        return self.num_draft_tokens - 1 if self.num_draft_tokens > 1 else None


def _number(value: Any, key: str, location: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ProtocolError(f"{key} is {value!r}, expected a number >= 0", location=location, fix="check the engine")
    return float(value)


def _count(entry: Mapping[str, Any], keys: tuple[str, ...], location: str) -> int | None:
    for key in keys:
        if key in entry:
            value = _number(entry[key], key, location)
            return None if value is None else round(value)
    return None


def _int_arg(args: Mapping[str, Any], key: str, location: str) -> int | None:
    value = _number(args.get(key), key, location)
    return None if value is None else round(value)


def parse_server_info(answer: Any, *, location: str = "/server_info") -> ServerInfoReading:
    """Read the speculative facts of a `/server_info` (or `/get_server_info`) answer; ProtocolError if malformed.

    Handles both shapes SGLang has used: the internal state merged into the top level (older) and
    `internal_states: [...]`, one entry per data-parallel rank (newer). A non-positive or sub-1 average
    means no speculative step was counted yet and reads as None.
    """
    if not isinstance(answer, Mapping):
        raise ProtocolError(f"answer is not a JSON object: {answer!r:.80}", location=location, fix="check the engine")
    nested = answer.get("server_args")
    args: Mapping[str, Any] = {**nested, **answer} if isinstance(nested, Mapping) else answer
    raw_states = answer.get("internal_states")
    if raw_states is None:
        entries: list[Any] = [answer]
    elif isinstance(raw_states, list):
        entries = raw_states
    else:
        raise ProtocolError("internal_states is not a list", location=location, fix="check the engine version")
    states: list[ServerInfoState] = []
    for rank, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ProtocolError(f"internal_states[{rank}] is not an object", location=location, fix="check the engine")
        avg = _number(entry.get("avg_spec_accept_length"), "avg_spec_accept_length", location)
        states.append(
            ServerInfoState(
                rank=rank,
                avg_spec_accept_length=avg if avg is not None and avg >= 1.0 else None,
                accept_tokens=_count(entry, _ACCEPT_COUNT_KEYS, location),
                verify_steps=_count(entry, _STEP_COUNT_KEYS, location),
            )
        )
    algorithm = args.get("speculative_algorithm")
    algorithm = str(algorithm).upper() if algorithm not in (None, "") else None
    version = answer.get("version")
    return ServerInfoReading(
        version=str(version) if version is not None else None,
        algorithm=None if algorithm == "NONE" else algorithm,
        num_steps=_int_arg(args, "speculative_num_steps", location),
        eagle_topk=_int_arg(args, "speculative_eagle_topk", location),
        num_draft_tokens=_int_arg(args, "speculative_num_draft_tokens", location),
        decode_log_interval=_int_arg(args, "decode_log_interval", location),
        states=tuple(states),
        max_total_num_tokens=_int_arg(args, "max_total_num_tokens", location),
        context_length=_int_arg(args, "context_length", location),
        page_size=_int_arg(args, "page_size", location),
    )


class ServerInfoSnapshot(MetricsSnapshot):
    """A /metrics scrape plus the `/server_info` reading taken with it (SGLang's telemetry snapshot)."""

    server_info: ServerInfoReading | None = None
    server_info_error: str | None = None
