"""Workload identity: the hash follows the canonical content, not the file's formatting."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specselect._workloads import canonical_bytes, categories, content_sha256, load_workload
from specselect.errors import WorkloadError
from specselect.records.workloads import Workload, WorkloadIdentity, WorkloadItem

ROWS: list[dict[str, Any]] = [
    {"id": "a", "category": "chat", "messages": [{"role": "user", "content": "Say hello to Zoë."}]},
    {"id": "b", "prompt": "Count to five:", "max_tokens": 16},
]


def _write_compact(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r, separators=(",", ":")) for r in rows), encoding="utf-8")
    return path


def test_reformatting_does_not_change_the_hash(tmp_path: Path) -> None:
    compact = load_workload(str(_write_compact(tmp_path / "c.jsonl", ROWS)))
    spaced = tmp_path / "s.jsonl"
    spaced.write_text(
        "\n\n".join("  " + json.dumps(dict(reversed(list(r.items()))), indent=None, ensure_ascii=True) for r in ROWS)
        + "\n\n",
        encoding="utf-8",
    )
    array = tmp_path / "a.json"
    array.write_text(json.dumps(ROWS, indent=4), encoding="utf-8")
    nulls = _write_compact(tmp_path / "n.jsonl", [{**ROWS[0], "max_tokens": None}, ROWS[1]])
    hashes = {load_workload(str(p)).identity.sha256 for p in (spaced, array, nulls)}
    assert hashes == {compact.identity.sha256}


def test_editing_one_character_changes_the_hash(tmp_path: Path) -> None:
    base = load_workload(str(_write_compact(tmp_path / "w.jsonl", ROWS))).identity.sha256
    edited = json.loads(json.dumps(ROWS))
    edited[0]["messages"][0]["content"] = "Say hello to Zoe."
    assert load_workload(str(_write_compact(tmp_path / "w.jsonl", edited))).identity.sha256 != base
    reordered = [ROWS[1], ROWS[0]]
    assert load_workload(str(_write_compact(tmp_path / "w.jsonl", reordered))).identity.sha256 != base


def test_hash_is_the_sha256_of_the_canonical_bytes(tmp_path: Path) -> None:
    wl = load_workload(str(_write_compact(tmp_path / "w.jsonl", ROWS)))
    expected = json.dumps(ROWS, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert canonical_bytes(wl.items) == expected
    assert wl.identity.sha256 == hashlib.sha256(expected).hexdigest() == content_sha256(wl.items)


@settings(max_examples=50, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40).filter(str.strip),
    index=st.integers(min_value=0),
    char=st.characters(exclude_categories=("Cs",)),
)
def test_any_single_character_edit_changes_the_hash(text: str, index: int, char: str) -> None:
    pos = index % len(text)
    edited = text[:pos] + char + text[pos + 1 :]
    original = [WorkloadItem(id="x", prompt=text)]
    changed = [WorkloadItem(id="x", prompt=edited)]
    assert (content_sha256(original) == content_sha256(changed)) == (edited == text)


def test_a_lone_surrogate_escape_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text('{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": "bad \\ud800 text"}\n')
    with pytest.raises(WorkloadError) as err:
        load_workload(str(path))
    assert "w.jsonl:2" in str(err.value) + " ".join(err.value.problems)
    assert "surrogate" in str(err.value) + " ".join(err.value.problems)


def test_key_and_categories() -> None:
    items = (
        WorkloadItem(id="1", prompt="a", category="b"),
        WorkloadItem(id="2", prompt="a"),
        WorkloadItem(id="3", prompt="a", category="a"),
        WorkloadItem(id="4", prompt="a", category="b"),
    )
    sha = content_sha256(items)
    wl = Workload(identity=WorkloadIdentity(name="w", version="2", sha256=sha, item_count=4, source="x"), items=items)
    assert wl.identity.key == f"w@2#{sha[:16]}"
    assert categories(wl) == ("b", "a")
