"""Built-in workloads: counts, categories, ids, frozen hashes recomputed independently from the data files."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import pytest

from specselect._workloads import builtin_workload_names, categories, load_workload
from specselect.errors import WorkloadError

CATEGORIES = (
    "general",
    "repetition",
    "multi_turn",
    "code_editing",
    "summarization",
    "rag_qa",
    "translation",
    "math_reasoning",
)


def _data_lines(name: str) -> list[dict[str, Any]]:
    text = resources.files("specselect._workloads").joinpath("data", f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _independent_sha256(rows: list[dict[str, Any]]) -> str:
    """The documented canonical form, rebuilt without the package's own code."""
    clean = [{k: v for k, v in row.items() if v is not None} for row in rows]
    text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _rows(name: str) -> list[dict[str, Any]]:
    lines = _data_lines(name)
    header = lines[0]["specselect_workload"]
    if header.get("compose"):
        pool = {row["id"]: row for cat in CATEGORIES for row in _data_lines(cat)[1:]}
        return [pool[i] for i in header["compose"]]
    return lines[1:]


def test_names_match_the_shipped_files() -> None:
    data = resources.files("specselect._workloads").joinpath("data")
    shipped = {entry.name.removesuffix(".jsonl") for entry in data.iterdir() if entry.name.endswith(".jsonl")}
    extracted = {"alpacaeval", "arena_hard", "sharegpt"}
    assert set(builtin_workload_names()) == shipped | extracted
    assert not shipped & extracted
    assert builtin_workload_names()[: len(CATEGORIES) + 1] == (*CATEGORIES, "mixed")


@pytest.mark.parametrize("category", CATEGORIES)
def test_category_workload_loads_frozen(category: str) -> None:
    first = load_workload(f"builtin:{category}")
    second = load_workload(f"builtin:{category}")
    ident = first.identity
    assert ident == second.identity
    assert ident.name == category
    assert ident.version == "1"
    assert ident.source == f"builtin:{category}"
    assert ident.item_count == len(first.items) == 8
    assert categories(first) == (category,)
    assert [item.id for item in first.items] == [f"{category}-{n:02d}" for n in range(1, 9)]
    header = _data_lines(category)[0]["specselect_workload"]
    assert ident.sha256 == header["sha256"] == _independent_sha256(_rows(category))
    assert ident.key == f"{category}@1#{ident.sha256[:16]}"


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_request_is_a_chat_ending_with_a_short_user_turn(category: str) -> None:
    for item in load_workload(f"builtin:{category}").items:
        assert item.messages is not None
        assert item.prompt is None
        assert item.messages[-1].role == "user"
        # ~400 tokens at a pessimistic 2.5 characters per token
        assert sum(len(m.content) for m in item.messages) <= 1000, item.id


def test_multi_turn_items_carry_prior_assistant_turns() -> None:
    for item in load_workload("builtin:multi_turn").items:
        assert item.messages is not None
        assert any(m.role == "assistant" for m in item.messages), item.id


def test_repetition_prompts_hold_long_material_and_general_prompts_do_not() -> None:
    for item in load_workload("builtin:repetition").items:
        assert item.messages is not None
        assert len(item.messages[-1].content) >= 300, item.id
    for item in load_workload("builtin:general").items:
        assert item.messages is not None
        assert len(item.messages[-1].content) <= 200, item.id


def test_mixed_is_a_fixed_selection_from_every_category() -> None:
    mixed = load_workload("builtin:mixed")
    assert mixed.identity.item_count == 16
    assert categories(mixed) == CATEGORIES
    expected = [f"{cat}-{n:02d}" for n in (1, 5) for cat in CATEGORIES]
    assert [item.id for item in mixed.items] == expected
    by_id = {item.id: item for cat in CATEGORIES for item in load_workload(f"builtin:{cat}").items}
    assert all(item == by_id[item.id] for item in mixed.items)
    header = _data_lines("mixed")[0]["specselect_workload"]
    assert mixed.identity.sha256 == header["sha256"] == _independent_sha256(_rows("mixed"))
    assert load_workload("builtin:mixed").identity == mixed.identity


def test_ids_are_unique_across_all_builtins() -> None:
    ids = [item.id for cat in CATEGORIES for item in load_workload(f"builtin:{cat}").items]
    assert len(ids) == len(set(ids))


def test_builtin_name_is_matched_loosely_and_can_be_renamed() -> None:
    loose = load_workload("builtin:Multi-Turn")
    assert loose.identity.name == "multi_turn"
    renamed = load_workload("builtin:repetition", name="copying")
    assert renamed.identity.name == "copying"
    assert renamed.identity.source == "builtin:repetition"
    assert renamed.identity.sha256 == load_workload("builtin:repetition").identity.sha256


def test_unknown_builtin_suggests_the_closest() -> None:
    with pytest.raises(WorkloadError) as info:
        load_workload("builtin:repetiton")
    assert "builtin:repetition" in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_name_override_is_refused() -> None:
    with pytest.raises(WorkloadError, match="invalid workload name"):
        load_workload("builtin:general", name="my workload@2")


def test_a_tampered_builtin_file_is_refused() -> None:
    from specselect._workloads.reader import parse_workload_bytes

    data = resources.files("specselect._workloads").joinpath("data", "general.jsonl").read_bytes()
    tampered = data.replace(b"sky look blue", b"sky look Blue", 1)
    assert tampered != data
    with pytest.raises(WorkloadError, match="does not match the header"):
        parse_workload_bytes(tampered, "general.jsonl", builtin=True)
