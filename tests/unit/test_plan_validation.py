"""Every plan validation rule: the exact problem line (field, message and fix) a user sees."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specselect._plan import LoadedPlan, parse_plan_text
from specselect.errors import PlanError

DELETE = object()

BASE: dict[str, Any] = {
    "schema_version": 1,
    "label": "t",
    "target": {"model": "builtin:smollm2-135m"},
    "engine": {"python": "managed:vllm-cpu"},
    "workloads": {"general": "builtin:general"},
}


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is DELETE:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _load(patch: dict[str, Any]) -> LoadedPlan:
    data = copy.deepcopy(BASE)
    _merge(data, patch)
    return parse_plan_text(tomli_w.dumps(data), source="p.toml", base_dir=Path("."))


def problems(patch: dict[str, Any]) -> list[str]:
    with pytest.raises(PlanError) as info:
        _load(patch)
    assert info.value.exit_code == 2
    assert info.value.one_line().startswith("p.toml: plan does not validate (")
    return info.value.problems


def ngram(**extra: Any) -> dict[str, Any]:
    return {"name": "g1", "family": "ngram", **extra}


NAME_FIX = "(fix: use 1 to 100 letters, digits, '.', '_' or '-')"

CASES: list[tuple[dict[str, Any], str]] = [
    # top level
    ({"label": "bad label!"}, f"label: 'bad label!' may contain only letters, digits, '.', '_' and '-' {NAME_FIX}"),
    ({"label": ""}, f"label: must not be empty {NAME_FIX}"),
    ({"label": "x" * 101}, "label: is 101 characters long; at most 100 (fix: shorten it)"),
    ({"label": DELETE}, 'label: missing required key (fix: add label = "my-experiment")'),
    (
        {"schema_version": 2},
        "schema_version: unsupported schema_version 2: this specselect reads schema_version 1 "
        "(fix: write schema_version = 1, or upgrade specselect to read newer plans)",
    ),
    ({"schema_version": True}, "schema_version: must be the integer 1 (fix: write schema_version = 1)"),
    ({"schema_version": DELETE}, "schema_version: missing required key (fix: add schema_version = 1)"),
    ({"labl": "x"}, "labl: unknown key 'labl'; did you mean 'label'? (fix: rename it to label)"),
    (
        {"candidate": {"name": "x"}},
        "candidate: unknown key 'candidate'; did you mean 'candidates'? (fix: rename it to candidates)",
    ),
    # [target]
    (
        {"target": DELETE},
        'target: missing required table (fix: add [target] with model = "builtin:smollm2-135m")',
    ),
    (
        {"target": {"model": DELETE}},
        'target.model: missing required key (fix: add model = "builtin:smollm2-135m" to [target])',
    ),
    (
        {"target": {"model": "builtin:bad name"}},
        "target.model: model 'builtin:bad name' is not a valid builtin name "
        "(fix: write builtin:NAME where NAME has only letters, digits, '.', '_' or '-')",
    ),
    (
        {"target": {"model": " "}},
        """target.model: model must not be empty (fix: write builtin:NAME, "org/name" or a directory path)""",
    ),
    (
        {"target": {"dtype": "flaot32"}},
        "target.dtype: 'flaot32' is not one of 'auto', 'float32', 'bfloat16', 'float16' (fix: did you mean 'float32'?)",
    ),
    (
        {"target": {"max_model_len": "2048"}},
        "target.max_model_len: must be an integer, got a string ('2048') "
        "(fix: write it without quotes: max_model_len = 2048)",
    ),
    (
        {"target": {"max_model_len": 0}},
        "target.max_model_len: must be > 0 (got 0) (fix: use a positive length, e.g. max_model_len = 2048)",
    ),
    (
        {"target": {"modle": "x"}},
        "target.modle: unknown key 'modle'; did you mean 'model'? (fix: rename it to model)",
    ),
    (
        {"target": {"zzz": 1}},
        "target.zzz: unknown key 'zzz' (fix: remove it; allowed keys here: model, revision, dtype, "
        "max_model_len, tokenizer)",
    ),
    # [engine]
    (
        {"engine": {"command": ["vllm", "serve"]}},
        "engine.command: give either python or command, not both "
        "(fix: keep python to let specselect start the engine, or command to start it yourself)",
    ),
    (
        {"engine": {"python": DELETE}},
        "engine.python: missing python or command: specselect needs to know how to start the engine "
        '(fix: set python = "managed:vllm-cpu", python = "/path/to/venv/bin/python" or command = ["vllm", "serve"])',
    ),
    (
        {"engine": {"python": "managed:vllm-gpu"}},
        "engine.python: unknown managed environment 'managed:vllm-gpu' (fix: use one of: managed:vllm-cpu)",
    ),
    (
        {"engine": {"kind": "openai", "python": "/usr/bin/python3"}},
        "engine.python: kind = 'openai' measures servers you already run and starts nothing: python does not apply "
        "(fix: remove python; give every group an endpoint = { base_url = ..., model = ... })",
    ),
    (
        {"engine": {"kind": "sglang"}},
        "engine.python: managed:vllm-cpu is a vLLM environment but kind = 'sglang' "
        '(fix: set kind = "vllm" or give the python of your own engine environment)',
    ),
    (
        {"engine": {"kind": "sglang", "python": "/venv/bin/python", "distributed_executor_backend": "ray"}},
        "engine.distributed_executor_backend: distributed_executor_backend applies to kind = 'vllm' only "
        "(fix: remove distributed_executor_backend)",
    ),
    (
        {"engine": {"host": "0.0.0.0"}},
        "engine.host: host '0.0.0.0' is not a loopback address: the server would be reachable from the network "
        '(fix: use host = "127.0.0.1", or set allow_remote_bind = true if you really mean it)',
    ),
    (
        {"engine": {"port": 70000}},
        "engine.port: must be <= 65535 (got 70000) (fix: use a port from 1 to 65535, or 0 to pick a free one)",
    ),
    (
        {"engine": {"tensor_parallel_size": 0}},
        "engine.tensor_parallel_size: must be >= 1 (got 0) (fix: use a value >= 1)",
    ),
    (
        {"engine": {"args": ["--enforce-eager", "--max_model_len=4096"]}},
        "engine.args[1]: --max-model-len is set by the plan, not by engine arguments "
        "(fix: remove it and use [target].max_model_len)",
    ),
    (
        {"engine": {"args": ["--speculative-config", "{}"]}},
        "engine.args[0]: --speculative-config is set by the plan, not by engine arguments "
        "(fix: remove it and use a [[candidates]] entry)",
    ),
    (
        {"engine": {"env": {"VLLM_CPU_KVCACHE_SPACE": 2}}},
        "engine.env.VLLM_CPU_KVCACHE_SPACE: must be a string, got an integer (2) "
        '(fix: quote it: VLLM_CPU_KVCACHE_SPACE = "2")',
    ),
    (
        {"engine": {"env": {"1BAD": "x"}}},
        "engine.env.1BAD: '1BAD' is not a valid environment variable name "
        "(fix: use letters, digits and '_', not starting with a digit)",
    ),
    (
        {"engine": {"api_key_env": "MY KEY"}},
        "engine.api_key_env: 'MY KEY' is not an environment variable name "
        '(fix: name the environment variable that holds the key, e.g. api_key_env = "OPENAI_API_KEY")',
    ),
    (
        {"engine": {"kind": "tgi"}},
        "engine.kind: 'tgi' is not one of 'vllm', 'sglang', 'openai' (fix: use one of: 'vllm', 'sglang', 'openai')",
    ),
    # [sampling]
    (
        {"sampling": {"temperature": -0.5}},
        "sampling.temperature: must be >= 0 (got -0.5) "
        "(fix: use 0 for greedy decoding, or the deployment's temperature, e.g. 0.7)",
    ),
    (
        {"sampling": {"max_tokens": 0}},
        "sampling.max_tokens: must be > 0 (got 0) (fix: use 1 to 1000000, e.g. max_tokens = 128)",
    ),
    (
        {"sampling": {"seed": 1.5}},
        "sampling.seed: must be an integer, got a float (1.5) (fix: write an integer)",
    ),
    (
        {"sampling": {"temprature": 0}},
        "sampling.temprature: unknown key 'temprature'; did you mean 'temperature'? (fix: rename it to temperature)",
    ),
    # [run]
    (
        {"run": {"concurrency": [0, 4]}},
        "run.concurrency[0]: must be > 0 (got 0) "
        "(fix: use client concurrency levels from 1 to 100000, e.g. concurrency = [1, 4])",
    ),
    (
        {"run": {"concurrency": [0]}},
        "run.concurrency[0]: must be > 0 (got 0) "
        "(fix: use client concurrency levels from 1 to 100000, e.g. concurrency = [1, 4])",
    ),
    (
        {"run": {"concurrency": []}},
        "run.concurrency: needs at least 1 item(s) (fix: list at least one level, e.g. concurrency = [1])",
    ),
    (
        {"run": {"concurrency": [1, 4, 1]}},
        "run.concurrency[2]: concurrency level 1 is listed twice (fix: remove the duplicate 1)",
    ),
    (
        {"run": {"concurrency": 4}},
        "run.concurrency: must be an array, got an integer (4) (fix: write an array: concurrency = [4])",
    ),
    (
        {"run": {"repeats": 0}},
        "run.repeats: must be >= 1 (got 0) (fix: use 1 to 1000 repeats, e.g. repeats = 3)",
    ),
    (
        {"run": {"rounds": 0}},
        "run.rounds: must be >= 1 (got 0) (fix: use 1 to 50 rounds, e.g. rounds = 3)",
    ),
    (
        {"run": {"rounds": 3, "looks": [2, 4]}},
        "run.looks: the first look is after 2 rounds, but rounds = 3 (fix: set rounds = 2, or make looks start at 3)",
    ),
    (
        {"run": {"rounds": 3, "looks": [3, 3]}},
        "run.looks: looks [3, 3] are not strictly ascending (fix: list the round counts in ascending order)",
    ),
    (
        {"run": {"launches": 3, "max_launches": 2}},
        "run.max_launches: max_launches 2 is below launches 3 (fix: write rounds = 3 and looks = [3, ...] instead)",
    ),
    (
        {"run": {"launches": 2, "rounds": 2}},
        "run.launches: launches/max_launches and rounds/looks are two spellings of one setting (fix: keep rounds (and "
        "looks) and remove launches and max_launches)",
    ),
    (
        {"run": {"rounds": 2, "sequential_budget_s": 600.0}},
        "run.sequential_budget_s: sequential_budget_s limits the rounds after the first look, and there is only one "
        "look (fix: add a later look, e.g. looks = [3, 4], or remove sequential_budget_s)",
    ),
    (
        {"run": {"rounds": 2, "looks": [2, 3], "sequential_budget_s": 0.0}},
        "run.sequential_budget_s: must be > 0 (got 0.0) (fix: give the run's time budget in seconds, e.g. "
        "sequential_budget_s = 600)",
    ),
    (
        {"run": {"warmup_requests": -1}},
        "run.warmup_requests: must be >= 0 (got -1) (fix: use 0 to 100000 warm-up waves (each as many requests as "
        "the concurrency), e.g. warmup_requests = 1)",
    ),
    (
        {"run": {"load": "poisson"}},
        "run.request_rate: load = 'poisson' needs a request_rate "
        "(fix: set request_rate = <requests per second>, e.g. 2.0)",
    ),
    (
        {"run": {"request_rate": 2.0}},
        "run.request_rate: request_rate applies to load = 'poisson' or 'gamma' only "
        '(fix: remove request_rate, or set load = "poisson")',
    ),
    (
        {"run": {"load": "poisson", "request_rate": 2.0, "burstiness": 0.5}},
        "run.burstiness: burstiness applies to load = 'gamma' only (fix: remove burstiness, or set load = \"gamma\")",
    ),
    (
        {"run": {"request_timeout_s": 60.0, "scenario_timeout_s": 30.0}},
        "run.scenario_timeout_s: scenario_timeout_s is shorter than request_timeout_s "
        "(fix: make scenario_timeout_s at least as long as request_timeout_s)",
    ),
    (
        {"run": {"prefix_cache": "fresh"}},
        "run.prefix_cache: 'fresh' is not one of 'fresh_server', 'disabled', 'salt' "
        "(fix: did you mean 'fresh_server'?)",
    ),
    # [workloads]
    (
        {"workloads": {"general": DELETE}},
        "workloads: no workloads: a plan needs at least one "
        '(fix: add at least one workload under [workloads], e.g. general = "builtin:general")',
    ),
    (
        {"workloads": DELETE},
        'workloads: missing required table (fix: add [workloads] with general = "builtin:general")',
    ),
    (
        {"workloads": {"my load": "builtin:general"}},
        "workloads.\"my load\": workload name 'my load' has invalid characters "
        "(fix: use 1 to 100 letters, digits, '.', '_' or '-')",
    ),
    (
        {"workloads": {"general": "builtin:"}},
        "workloads.general: 'builtin:' is not a valid builtin workload name "
        '(fix: write builtin:NAME, e.g. "builtin:general")',
    ),
    # [thresholds]
    (
        {"thresholds": {"confidence_level": 1.5}},
        "thresholds.confidence_level: must be < 1 (got 1.5) "
        "(fix: use a level between 0 and 1, e.g. confidence_level = 0.95)",
    ),
    (
        {"thresholds": {"min_throughput_speedup": 0.0}},
        "thresholds.min_throughput_speedup: must be > 0 (got 0.0) (fix: use a value > 0)",
    ),
    (
        {"thresholds": {"max_peak_memory_mb": float("inf")}},
        "thresholds.max_peak_memory_mb: must be a finite number (got inf) (fix: use a finite number, not inf or nan)",
    ),
]


@pytest.mark.parametrize(("patch", "expected"), CASES, ids=[c[1].split(":")[0] + f"-{i}" for i, c in enumerate(CASES)])
def test_rule_gives_exact_problem_line(patch: dict[str, Any], expected: str) -> None:
    assert problems(patch) == [f"p.toml: {expected}"]


def test_minimal_plan_is_valid_and_defaults_are_filled_in() -> None:
    plan = _load({}).plan
    assert plan.target.dtype == "auto"
    assert plan.engine.host == "127.0.0.1"
    assert plan.engine.port == 0
    assert plan.sampling.temperature == 0.0
    assert plan.run.concurrency == (1,)
    assert plan.run.prefix_cache == "fresh_server"
    assert plan.run.load == "closed"
    assert plan.run.burstiness == 1.0
    assert plan.thresholds.min_throughput_speedup == 1.10
    assert plan.thresholds.max_ttft_regression_ratio == 1.10
    assert plan.thresholds.max_e2e_p95_regression_ratio == 1.05
    assert plan.thresholds.max_peak_memory_mb is None
    assert plan.thresholds.confidence_level == 0.95
    assert [group.name for group in plan.groups] == ["g0_target_only"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_hosts_need_no_permission(host: str) -> None:
    assert _load({"engine": {"host": host}}).plan.engine.host == host


def test_remote_host_is_allowed_when_the_plan_says_so() -> None:
    engine = _load({"engine": {"host": "0.0.0.0", "allow_remote_bind": True}}).plan.engine
    assert (engine.host, engine.allow_remote_bind) == ("0.0.0.0", True)


def test_gamma_load_takes_rate_and_burstiness() -> None:
    run = _load({"run": {"load": "gamma", "request_rate": 2.5, "burstiness": 0.5}}).plan.run
    assert (run.load, run.request_rate, run.burstiness) == ("gamma", 2.5, 0.5)


def test_sampling_key_is_stable_and_depends_on_every_parameter() -> None:
    key = _load({"sampling": {"temperature": 0, "max_tokens": 64, "seed": 0}}).plan.sampling_key
    assert key == "temperature=0.0;max_tokens=64;seed=0"
    assert _load({"sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 0}}).plan.sampling_key == key
    assert _load({"sampling": {"temperature": 0.0, "max_tokens": 65, "seed": 0}}).plan.sampling_key != key
    assert _load({"sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 1}}).plan.sampling_key != key


def test_every_problem_is_reported_at_once() -> None:
    lines = problems({"label": "a b", "target": {"dtype": "x"}, "run": {"repeats": 0}})
    assert [line.split(": ")[1] for line in lines] == ["label", "target.dtype", "run.repeats"]
    assert all(line.startswith("p.toml: ") and "\n" not in line for line in lines)


def test_huge_values_give_short_messages() -> None:
    lines = problems({"label": "x" * 200_000, "run": {"repeats": 10**40}, "engine": {"port": -(10**30)}})
    assert len(lines) == 3
    assert all(len(line) < 300 for line in lines)
    assert "run.repeats: must be <= 1000 (got 1000000000000000000000000000000000000...)" in lines[2]
