"""Seeded samples: the same seed and size give the same items in the same order, computed from ids alone."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from specselect._workloads import load_workload
from specselect._workloads.canonical import content_sha256
from specselect._workloads.sample import WorkloadSample, sample_items
from specselect.errors import WorkloadError

ROWS = [{"id": f"req-{n:02d}", "messages": [{"role": "user", "content": f"Question {n}?"}]} for n in range(20)]


def _write(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def _documented_order(ids: list[str], seed: int) -> list[str]:
    """The rule as the docs state it, rebuilt without the package's code."""
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())


def test_the_same_seed_and_size_give_the_same_items_in_the_same_order() -> None:
    ref = WorkloadSample(source="builtin:humaneval", items=5, seed=0)
    first, second = load_workload(ref), load_workload(ref)
    assert first == second
    assert [item.id for item in first.items] == [
        "HumanEval/156",
        "HumanEval/94",
        "HumanEval/72",
        "HumanEval/80",
        "HumanEval/149",
    ]


def test_the_sample_follows_the_documented_rule(tmp_path: Path) -> None:
    ids = [row["id"] for row in ROWS]
    sample = load_workload(WorkloadSample(source=_write(tmp_path / "w.jsonl", ROWS), items=7, seed=42))
    assert [item.id for item in sample.items] == _documented_order(ids, 42)[:7]


def test_a_different_seed_gives_a_different_sample() -> None:
    zero = load_workload(WorkloadSample(source="builtin:humaneval", items=5, seed=0))
    one = load_workload(WorkloadSample(source="builtin:humaneval", items=5, seed=1))
    assert [item.id for item in zero.items] != [item.id for item in one.items]
    assert zero.identity.sha256 != one.identity.sha256


def test_a_larger_sample_extends_a_smaller_one_with_the_same_seed() -> None:
    small = load_workload(WorkloadSample(source="builtin:gsm8k", items=8, seed=3))
    large = load_workload(WorkloadSample(source="builtin:gsm8k", items=16, seed=3))
    assert large.items[:8] == small.items


def test_the_file_order_does_not_change_the_sample(tmp_path: Path) -> None:
    shuffled = list(ROWS)
    random.Random(5).shuffle(shuffled)
    a = load_workload(WorkloadSample(source=_write(tmp_path / "a.jsonl", ROWS), items=6, seed=9))
    b = load_workload(WorkloadSample(source=_write(tmp_path / "b.jsonl", shuffled), items=6, seed=9))
    assert a.items == b.items
    assert a.identity.sha256 == b.identity.sha256


def test_a_sample_larger_than_its_source_is_refused_in_one_line() -> None:
    with pytest.raises(WorkloadError) as info:
        load_workload(WorkloadSample(source="builtin:gsm8k", items=101, seed=0))
    assert str(info.value) == (
        "builtin:gsm8k: a sample of 101 items was asked for, but it holds 100 (fix: ask for at most items = 100)"
    )


def test_the_identity_records_the_sample_and_what_it_was_drawn_from() -> None:
    whole = load_workload("builtin:humaneval")
    sample = load_workload(WorkloadSample(source="builtin:humaneval", items=4, seed=7), name="code")
    ident = sample.identity
    assert (ident.name, ident.version, ident.source, ident.item_count) == ("code", "1", "builtin:humaneval", 4)
    assert ident.sha256 == content_sha256(sample.items)
    assert ident.key != whole.identity.key
    assert ident.provenance == whole.identity.provenance
    assert ident.selection is not None
    assert ident.selection.model_dump() == {
        "rule": "seeded_sample",
        "items": 4,
        "population": 164,
        "population_sha256": whole.identity.sha256,
        "seed": 7,
    }


def test_a_whole_workload_records_that_it_took_every_item() -> None:
    ident = load_workload("builtin:general").identity
    assert ident.selection is not None
    assert ident.selection.model_dump() == {
        "rule": "all",
        "items": 8,
        "population": 8,
        "population_sha256": ident.sha256,
        "seed": None,
    }


def test_sample_items_takes_the_lowest_ranks_first() -> None:
    items = load_workload("builtin:general").items
    ranked = sample_items(items, len(items), seed=0, label="general")
    assert sorted(ranked, key=lambda i: i.id) == sorted(items, key=lambda i: i.id)
    assert [i.id for i in ranked] == _documented_order([i.id for i in items], 0)


@pytest.mark.parametrize("bad", [{"items": 0}, {"items": True}, {"items": 2.0}, {"seed": -1}, {"count": 3}])
def test_a_sample_table_is_strict(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        WorkloadSample.model_validate({"source": "builtin:general", "items": 3, **bad})
