"""The request plan of a scenario: seeded order, cache salts, request bodies and open-loop arrivals.

Everything here is a pure function of (items, scenario, seed, ...): the baseline and every candidate see
the same requests in the same order with the same salts, so records pair on (item_id, repeat).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specselect.errors import ConfigError
from specselect.records.measurement import CacheSaltPolicy, Endpoint, SamplingParams, ScenarioSpec
from specselect.records.workloads import WorkloadItem

__all__ = [
    "PlannedRequest",
    "arrival_offsets",
    "build_body",
    "cache_salt",
    "plan_requests",
    "request_order",
    "request_seed",
]

_WARMUP_STREAM = 0
_MEASURED_STREAM = 1
_ARRIVAL_STREAM = 2


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request to send: identity, salt and the pre-serialised JSON body (built before timing starts)."""

    request_id: str
    item_id: str
    repeat: int
    warmup: bool
    cache_salt: str | None
    body: bytes
    seed: int | None = None


def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, stream, index]))


def request_order(n_items: int, repeat: int, seed: int) -> list[int]:
    """The seeded permutation of item indices for measured pass `repeat`."""
    return [int(i) for i in _rng(seed, _MEASURED_STREAM, repeat).permutation(n_items)]


def _warmup_order(n_items: int, count: int, seed: int) -> list[int]:
    perm = [int(i) for i in _rng(seed, _WARMUP_STREAM).permutation(n_items)]
    return [perm[k % n_items] for k in range(count)]


def cache_salt(seed: int, scenario: str, repeat: int) -> str:
    """The prefix-cache salt of one (scenario, repeat); warm-up (repeat -1) gets its own."""
    digest = hashlib.sha256(f"specselect-salt:{seed}:{scenario}:{repeat}".encode()).hexdigest()
    return digest[:32]


def request_seed(seed: int, scope: str, request_id: str) -> int:
    """One request's own sampling seed (31 bits, as engines take it): a pure function of the plan's seed, who
    sends it and the request, so reruns draw the same samples and two groups draw independent ones."""
    digest = hashlib.sha256(f"specselect-seed:{seed}:{scope}:{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def arrival_offsets(n: int, request_rate: float, burstiness: float, seed: int) -> list[float]:
    """Open-loop release times (s after the phase start): Gamma inter-arrivals with mean 1/rate.

    The first request is released at 0, as in `vllm bench serve`; an infinite rate releases all at 0.
    """
    if n <= 0:
        return []
    if math.isinf(request_rate):
        return [0.0] * n
    scale = 1.0 / (request_rate * burstiness)
    gaps = _rng(seed, _ARRIVAL_STREAM).gamma(shape=burstiness, scale=scale, size=n - 1)
    return [0.0, *(float(x) for x in np.cumsum(gaps))]


def _sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """Temperature, top-p, top-k (unless left to the server's defaults) and the seed."""
    out: dict[str, Any] = {}
    if sampling.in_request:
        out["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            out["top_p"] = sampling.top_p
        if sampling.top_k is not None:
            out["top_k"] = sampling.top_k
    if sampling.seed is not None:
        out["seed"] = sampling.seed
    return out


def build_body(endpoint: Endpoint, item: WorkloadItem, sampling: SamplingParams, salt: str | None) -> dict[str, Any]:
    """The JSON request body for one item (streaming, with per-chunk usage)."""
    body: dict[str, Any] = {"model": endpoint.model}
    if endpoint.api == "chat":
        if item.messages is None:
            raise ConfigError(
                f"item {item.id!r} has a 'prompt' but the endpoint uses the chat API",
                location=f"workload item {item.id}",
                fix="give the item 'messages' or measure with api='completions'",
            )
        body["messages"] = [{"role": m.role, "content": m.content} for m in item.messages]
    else:
        if item.prompt is None:
            raise ConfigError(
                f"item {item.id!r} has 'messages' but the endpoint uses the completions API",
                location=f"workload item {item.id}",
                fix="give the item a 'prompt' or measure with api='chat'",
            )
        body["prompt"] = item.prompt
    body["max_tokens"] = item.max_tokens or sampling.max_tokens
    body.update(_sampling_fields(sampling))
    if sampling.ignore_eos:
        body["ignore_eos"] = True
    if sampling.logprobs is not None:
        if endpoint.api == "chat":
            body["logprobs"] = True
            body["top_logprobs"] = sampling.logprobs
        else:
            body["logprobs"] = sampling.logprobs
    if sampling.return_token_ids:
        body["return_token_ids"] = True
    if salt is not None:
        body["cache_salt"] = salt
    body["stream"] = True
    body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body


def plan_requests(
    endpoint: Endpoint, items: Sequence[WorkloadItem], spec: ScenarioSpec
) -> tuple[list[PlannedRequest], list[PlannedRequest]]:
    """(warm-up requests, measured requests) in sending order.

    Measured pass r (r = first_repeat .. first_repeat + repeats - 1) visits every item once in the
    order `request_order(len(items), r, seed)`; extra passes after a first run use new repeat indices.
    """
    scenario, warmup, repeats, seed = spec.scenario, spec.warmup, spec.repeats, spec.seed
    first_repeat, sampling = spec.first_repeat, spec.sampling
    where = f"scenario {scenario}"
    if not items:
        raise ConfigError("no workload items to send", location=where, fix="give the scenario a non-empty workload")
    if seed < 0 or warmup < 0 or repeats < 1 or first_repeat < 0:
        raise ConfigError(
            f"bad schedule: seed={seed}, warmup={warmup}, repeats={repeats}, first_repeat={first_repeat}",
            location=where,
            fix="use seed >= 0, warmup >= 0, repeats >= 1, first_repeat >= 0",
        )
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ConfigError(f"duplicate item ids {dup[:5]}", location=where, fix="give every workload item a unique id")
    salted = spec.cache_salt_policy is CacheSaltPolicy.SALT

    def planned(item: WorkloadItem, repeat: int, request_id: str) -> PlannedRequest:
        salt = cache_salt(seed, scenario, repeat) if salted else None
        params = sampling
        if sampling.seed_per_request and sampling.seed is not None:
            params = sampling.model_copy(update={"seed": request_seed(sampling.seed, spec.seed_scope, request_id)})
        body = json.dumps(build_body(endpoint, item, params, salt), separators=(",", ":")).encode()
        return PlannedRequest(request_id, item.id, repeat, repeat < 0, salt, body, params.seed)

    warm = [
        planned(items[i], -1, f"{scenario}:w{k}:{items[i].id}")
        for k, i in enumerate(_warmup_order(len(items), warmup, seed))
    ]
    measured = [
        planned(items[i], r, f"{scenario}:r{r}:{items[i].id}")
        for r in range(first_repeat, first_repeat + repeats)
        for i in request_order(len(items), r, seed)
    ]
    return warm, measured
