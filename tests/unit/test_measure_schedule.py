"""The request plan: seeded order, salts, request bodies, open-loop arrivals (pure, no server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specselect._common.canonical import canonical_sha256
from specselect._measure import PlannedRequest, arrival_offsets, build_body, cache_salt, plan_requests, request_order
from specselect.errors import ConfigError
from specselect.records.measurement import CacheSaltPolicy, Endpoint, LoadShape, SamplingParams, ScenarioSpec
from specselect.records.workloads import ChatMessage, WorkloadItem

CHAT = Endpoint(base_url="http://127.0.0.1:1/", model="m")
COMP = Endpoint(base_url="http://127.0.0.1:1/v1", model="m", api="completions")


def _items(n: int, *, prompt: bool = False) -> list[WorkloadItem]:
    if prompt:
        return [WorkloadItem(id=f"p{i}", prompt=f"prompt {i}") for i in range(n)]
    return [WorkloadItem(id=f"c{i}", messages=(ChatMessage(role="user", content=f"q {i}"),)) for i in range(n)]


def _plan(
    items: list[WorkloadItem], *, seed: int = 7, policy: CacheSaltPolicy = CacheSaltPolicy.SALT, **kw: int
) -> tuple[list[PlannedRequest], list[PlannedRequest]]:
    spec = ScenarioSpec(
        scenario="general-c4",
        warmup=kw.get("warmup", 3),
        repeats=kw.get("repeats", 3),
        seed=seed,
        sampling=SamplingParams(),
        cache_salt_policy=policy,
        first_repeat=kw.get("first_repeat", 0),
    )
    return plan_requests(CHAT, items, spec)


def test_endpoint_urls() -> None:
    assert CHAT.url == "http://127.0.0.1:1/v1/chat/completions"
    assert COMP.url == "http://127.0.0.1:1/v1/completions"
    with pytest.raises(ValueError, match="http"):
        Endpoint(base_url="127.0.0.1:1", model="m")


def test_order_is_a_seeded_permutation_identical_across_runs_and_different_per_repeat() -> None:
    items = _items(20)
    warm_a, meas_a = _plan(items)
    warm_b, meas_b = _plan(items)
    assert [(p.item_id, p.repeat) for p in meas_a] == [(p.item_id, p.repeat) for p in meas_b]
    assert [p.body for p in meas_a] == [p.body for p in meas_b]
    assert [p.request_id for p in warm_a] == [p.request_id for p in warm_b]
    for r in range(3):
        pass_ids = [p.item_id for p in meas_a if p.repeat == r]
        assert sorted(pass_ids) == sorted(i.id for i in items)
    orders = {tuple(request_order(20, r, 7)) for r in range(3)}
    assert len(orders) == 3
    assert request_order(20, 0, 7) != request_order(20, 0, 8)
    keys = [(p.item_id, p.repeat) for p in meas_a]
    assert len(set(keys)) == len(keys)


def test_warmup_requests_are_flagged_and_cycle_over_items() -> None:
    warm, _ = _plan(_items(2), warmup=5)
    assert len(warm) == 5
    assert all(p.warmup and p.repeat == -1 for p in warm)
    assert len({p.request_id for p in warm}) == 5


def test_salts_are_unique_per_scenario_and_repeat_and_identical_across_groups() -> None:
    warm, meas = _plan(_items(4))
    salts = {p.repeat: p.cache_salt for p in (*warm, *meas)}
    assert len(set(salts.values())) == 4  # warm-up, r0, r1, r2
    assert all(p.cache_salt == salts[p.repeat] for p in meas)
    assert salts[1] == cache_salt(7, "general-c4", 1)
    assert cache_salt(7, "general-c1", 1) != salts[1]
    assert json.loads(meas[0].body)["cache_salt"] == meas[0].cache_salt
    for policy in (CacheSaltPolicy.FRESH_SERVER, CacheSaltPolicy.DISABLED):
        _, unsalted = _plan(_items(4), policy=policy)
        assert all(p.cache_salt is None and b"cache_salt" not in p.body for p in unsalted)


def test_extra_repeats_get_new_indices_and_salts() -> None:
    _, first = _plan(_items(3), repeats=2)
    _, extra = _plan(_items(3), repeats=2, first_repeat=2)
    assert {p.repeat for p in extra} == {2, 3}
    assert not {p.cache_salt for p in first} & {p.cache_salt for p in extra}


def test_chat_body_streams_with_usage_and_does_not_send_ignore_eos() -> None:
    item = WorkloadItem(id="a", messages=(ChatMessage(role="user", content="hi"),), max_tokens=9)
    body = build_body(CHAT, item, SamplingParams(temperature=0.0, seed=3), None)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 9
    assert body["seed"] == 3
    assert body["temperature"] == 0.0
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert "ignore_eos" not in body
    assert "return_token_ids" not in body
    default = build_body(CHAT, _items(1)[0], SamplingParams(max_tokens=33, logprobs=2, return_token_ids=True), "s")
    assert default["max_tokens"] == 33
    assert (default["logprobs"], default["top_logprobs"]) == (True, 2)
    assert default["return_token_ids"] is True
    assert default["cache_salt"] == "s"


def test_completions_body_and_api_mismatch() -> None:
    body = build_body(COMP, _items(1, prompt=True)[0], SamplingParams(logprobs=1, ignore_eos=True), None)
    assert body["prompt"] == "prompt 0"
    assert body["logprobs"] == 1
    assert body["ignore_eos"] is True
    with pytest.raises(ConfigError, match="chat API"):
        build_body(CHAT, _items(1, prompt=True)[0], SamplingParams(), None)
    with pytest.raises(ConfigError, match="completions API"):
        build_body(COMP, _items(1)[0], SamplingParams(), None)


def test_bad_schedules_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="non-empty"):
        _plan([])
    with pytest.raises(ConfigError, match="repeats"):
        _plan(_items(2), repeats=0)
    dup = [_items(1)[0], _items(1)[0]]
    with pytest.raises(ConfigError, match="duplicate"):
        _plan(dup)


def test_sampling_key_is_stable_and_sensitive() -> None:
    assert SamplingParams().key == SamplingParams().key
    assert SamplingParams(temperature=0.5).key != SamplingParams().key


def test_load_shape_validation() -> None:
    assert LoadShape().kind == "closed"
    with pytest.raises(ValueError, match="request_rate"):
        LoadShape(kind="open")
    with pytest.raises(ValueError, match="closed-loop"):
        LoadShape(request_rate=3.0)
    assert LoadShape(kind="open", request_rate=float("inf")).request_rate == float("inf")


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_open_loop_arrivals_have_mean_gap_one_over_rate_and_gamma_dispersion(burstiness: float) -> None:
    rate = 20.0
    offsets = arrival_offsets(20001, rate, burstiness, seed=11)
    assert offsets[0] == 0.0
    gaps = np.diff(offsets)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.05)
    cv = gaps.std() / gaps.mean()  # Gamma(shape=k): CV = 1/sqrt(k); Poisson (k=1): exponential, CV 1
    assert cv == pytest.approx(1 / np.sqrt(burstiness), rel=0.07)
    assert arrival_offsets(50, rate, burstiness, seed=11) == offsets[:50]


def test_infinite_rate_releases_everything_at_once() -> None:
    assert arrival_offsets(4, float("inf"), 1.0, seed=0) == [0.0] * 4


def _sampled(scope: str, *, seed: int = 5, in_request: bool = True) -> list[PlannedRequest]:
    sampling = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=40, seed=seed, seed_per_request=True, in_request=in_request
    )
    spec = ScenarioSpec(scenario="general-c1", repeats=2, sampling=sampling, seed_scope=scope)
    return plan_requests(CHAT, _items(4), spec)[1]


def test_at_temperature_above_0_every_request_sends_its_own_recorded_seed() -> None:
    measured = _sampled("g0_target_only")
    seeds = [p.seed for p in measured]
    assert len(set(seeds)) == len(measured) == 8
    assert all(json.loads(p.body)["seed"] == p.seed for p in measured)
    assert all(seed is not None and 0 <= seed < 2**31 for seed in seeds)
    assert seeds == [p.seed for p in _sampled("g0_target_only")]  # a rerun draws the same samples
    assert not set(seeds) & {p.seed for p in _sampled("g1_ngram")}  # another group draws its own
    assert not set(seeds) & {p.seed for p in _sampled("g0_target_only", seed=6)}


def test_the_sampling_parameters_are_sent_or_left_to_the_servers_defaults() -> None:
    sent = json.loads(_sampled("g", in_request=True)[0].body)
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0.7, 0.9, 40)
    left = json.loads(_sampled("g", in_request=False)[0].body)
    assert not {"temperature", "top_p", "top_k"} & left.keys()
    assert "seed" in left


def test_new_sampling_fields_at_their_defaults_keep_the_recorded_sampling_key() -> None:
    # Keys recorded before top_k, seed_per_request and in_request existed must still pair with new ones.
    old_fields = SamplingParams(max_tokens=32).model_dump(
        mode="json", exclude={"top_k", "seed_per_request", "in_request"}
    )
    assert SamplingParams(max_tokens=32).key == "sampling#" + canonical_sha256(old_fields)[:16]
    assert SamplingParams(max_tokens=32, in_request=False).key != SamplingParams(max_tokens=32).key
